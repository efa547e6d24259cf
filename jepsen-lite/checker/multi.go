package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
)

// multi.go: the checkers of the multi workload (multi-limit reserves,
// settlements and releases).

// MultiDimensions judges the calls of the multi workload in every
// dimension at once (fakeapi.MultiJudge, the live judge's own code,
// replayed over the recorded calls in time order): strict spacing of
// starts, tokens per window, calls in progress. With atUse the calls start
// at their send times (sent_ns: the moment the worker checked its grant)
// instead of their receive times; calls without a send time are then
// skipped. A call with no end stamp stays in progress to the end.
func MultiDimensions(calls []fakeapi.Call, spec fakeapi.MultiSpec, atUse bool) (Result, error) {
	name := "multi-dimensions"
	if atUse {
		name = "multi-dimensions-at-use"
	}
	r := newResult(name)
	j, err := fakeapi.NewMultiJudge(spec)
	if err != nil {
		return r, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	type event struct {
		t    int64
		end  bool
		call int
	}
	var evs []event
	skipped := 0
	for i, c := range calls {
		if c.Tokens == nil {
			return r, fmt.Errorf("%w: call #%d (%s) has no tokens", ErrInvalid, c.Seq, c.Worker)
		}
		start := c.TimeNanos
		if atUse {
			if c.SentNanos == nil {
				skipped++
				continue
			}
			start = *c.SentNanos
		}
		evs = append(evs, event{t: start, call: i})
		if c.EndNanos != nil {
			evs = append(evs, event{t: max(*c.EndNanos, start), end: true, call: i})
		}
	}
	slices.SortStableFunc(evs, func(a, b event) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		if a.end != b.end { // an end before a start at the same time
			if a.end {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.call, b.call)
	})
	perDim := map[string]int{fakeapi.DimSpacing: 0, fakeapi.DimTokens: 0, fakeapi.DimInFlight: 0}
	for _, e := range evs {
		if e.end {
			j.End()
			continue
		}
		c := calls[e.call]
		for _, v := range j.Start(e.t, *c.Tokens) {
			perDim[v.Dimension]++
			r.violate("call #%d by %s (grant %s, %d tokens) at %v: %s: %s", c.Seq, c.Worker, c.RequestID, *c.Tokens, time.Duration(e.t), v.Dimension, v.Detail)
		}
	}
	r.Details["violations_per_dimension"] = perDim
	r.Details["stats"] = j.Stats()
	r.Details["spacing_rule"] = fmt.Sprintf("starts >= %v - tolerance %v apart", time.Duration(spec.SpacingNanos), time.Duration(spec.SpacingToleranceNanos))
	r.Details["token_rule"] = fmt.Sprintf("tokens started in any closed window of W - %v <= %s, W in %v", time.Duration(spec.TokenToleranceNanos), spec.TokenBound.Formula, durations(spec.TokenWindowsNanos))
	r.Details["in_flight_rule"] = fmt.Sprintf("calls in progress (receive to end stamp) <= %d", spec.MaxInFlight)
	if skipped > 0 {
		r.Details["calls_without_send_time"] = skipped
	}
	return r, nil
}

func durations(ns []int64) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = time.Duration(n).String()
	}
	return out
}

// MultiNodeCounts is one node's granted_requests of the multi workload's
// limits, read at the end (GET /v1/limits/{name}); a limit it could not
// read is absent and Errors says why.
type MultiNodeCounts struct {
	Node            string            `json:"node"`
	GrantedRequests map[string]uint64 `json:"granted_requests"`
	Errors          []string          `json:"errors,omitempty"`
}

// MultiGrantsInput is the no-partial-grant checker's input.
type MultiGrantsInput struct {
	Ops []history.Op
	// Limits are the limits every multi-limit reserve names.
	Limits []string
	Nodes  []MultiNodeCounts
}

// MultiGrants checks that no multi-limit reserve was granted in part:
//
//   - on every node that answered for all the limits, their
//     granted_requests are equal (every reserve of the workload names them
//     all; a refusal grants none) and at least the number of distinct
//     request IDs granted in the history;
//   - every granted reserve in the history has a reservation ID; one
//     reservation ID names one request; a replayed grant (duplicate)
//     names the reservation of the first answer.
func MultiGrants(in MultiGrantsInput) (Result, error) {
	r := newResult("multi-no-partial-grant")
	pairs, err := history.Pair(in.Ops)
	if err != nil {
		return r, err
	}
	byRequest := map[string]string{} // request id → reservation id
	byReservation := map[string]string{}
	granted := 0
	for _, o := range history.Filter(pairs, history.FReserve) {
		var req history.MultiReserveRequest
		if err := o.Invoke.DecodeValue(&req); err != nil {
			return r, err
		}
		if len(req.Limits) == 0 || o.Outcome() != history.OK {
			continue
		}
		var resp history.MultiReserveResponse
		if err := o.Completion.DecodeValue(&resp); err != nil {
			return r, err
		}
		rid, id := o.RequestID(), resp.ReservationID
		if id == "" {
			r.violate("op #%d: granted reserve %s of %v has no reservation id", o.Completion.Index, rid, req.Limits)
			continue
		}
		if prev, ok := byRequest[rid]; ok {
			if prev != id {
				r.violate("op #%d: request %s granted as reservation %s, earlier as %s", o.Completion.Index, rid, id, prev)
			}
			continue
		}
		if prev, ok := byReservation[id]; ok && prev != rid {
			r.violate("op #%d: reservation %s granted to request %s and to request %s", o.Completion.Index, id, prev, rid)
		}
		byRequest[rid], byReservation[id] = id, rid
		granted++
	}
	read := 0
	for _, n := range in.Nodes {
		var first uint64
		complete := true
		for i, l := range in.Limits {
			v, ok := n.GrantedRequests[l]
			if !ok {
				complete = false
				continue
			}
			if i == 0 {
				first = v
			}
			if v < uint64(granted) {
				r.violate("node %s: limit %s granted_requests %d < %d reservations the history saw granted", n.Node, l, v, granted)
			}
		}
		if !complete {
			continue
		}
		read++
		for _, l := range in.Limits[1:] {
			if v := n.GrantedRequests[l]; v != first {
				r.violate("node %s: granted_requests %v differ across the limits %v (a partial grant)", n.Node, n.GrantedRequests, in.Limits)
				break
			}
		}
	}
	r.Details["granted_in_history"] = granted
	r.Details["nodes"] = in.Nodes
	r.Details["nodes_read"] = read
	if read == 0 {
		r.violate("no node answered granted_requests for all of %v: the partial-grant check could not run", in.Limits)
	}
	return r, nil
}

// MultiSettlements checks that settlements and releases applied once:
//
//   - per reservation, at most one ok settle answer that is not a
//     duplicate;
//   - a settle sent again with the same request ID (raw, attempt 2) after
//     an ok answer is answered duplicate, with the first answer's limits;
//   - a settle with a new request ID of a reservation known settled is
//     refused 409 (conflict), never answered ok;
//   - a settle answer refunds at most reserved - actual and charges
//     nothing when actual <= reserved;
//   - a release frees at most 1 permit (one in-flight permit per
//     reservation), a repeated release 0, and all releases of a
//     reservation together at most 1.
func MultiSettlements(ops []history.Op) (Result, error) {
	c := &settlements{r: newResult("multi-settle-once"), rs: map[string]*settledReservation{}, counts: map[string]int{}}
	pairs, err := history.Pair(ops)
	if err != nil {
		return c.r, err
	}
	for _, o := range pairs {
		switch o.F() {
		case history.FSettle:
			err = c.settle(o)
		case history.FRelease:
			err = c.release(o)
		}
		if err != nil {
			return c.r, err
		}
	}
	c.r.Details["reservations"] = len(c.rs)
	c.r.Details["ops"] = c.counts
	return c.r, nil
}

// settledReservation is what MultiSettlements saw of a reservation.
type settledReservation struct {
	settled   int  // ok non-duplicate answers
	known     bool // an ok settle answer seen
	firstByID map[string][]history.SettledLimit
	released  int64
}

// settlements is one MultiSettlements call's state: the reservations by
// ID and the ops counted by function and outcome.
type settlements struct {
	r      Result
	rs     map[string]*settledReservation
	counts map[string]int
}

// get is reservation id's state, made on first use.
func (c *settlements) get(id string) *settledReservation {
	if c.rs[id] == nil {
		c.rs[id] = &settledReservation{firstByID: map[string][]history.SettledLimit{}}
	}
	return c.rs[id]
}

// settle checks a settle op.
func (c *settlements) settle(o history.Operation) error {
	r := &c.r
	var req, resp history.SettleValue
	if err := o.Invoke.DecodeValue(&req); err != nil {
		return err
	}
	if o.Completed {
		if err := o.Completion.DecodeValue(&resp); err != nil {
			return err
		}
	}
	st := c.get(req.ReservationID)
	at := o.Invoke.Index
	c.counts["settles_"+string(o.Outcome())]++
	if req.Mode == history.SettleAgain && st.known {
		if o.Outcome() == history.OK {
			r.violate("op #%d: reservation %s, already settled, settled again with a new request id: answered %s (want 409 conflict)", at, req.ReservationID, o.Completion.Value)
		} else if o.Outcome() == history.Fail && resp.Code != 409 {
			r.violate("op #%d: reservation %s, already settled, settled again with a new request id: answered %d %s (want 409 conflict)", at, req.ReservationID, resp.Code, resp.Error)
		}
	}
	if o.Outcome() != history.OK {
		return nil
	}
	if !resp.Duplicate {
		st.settled++
		if st.settled > 1 {
			r.violate("op #%d: reservation %s settled a second time (a non-duplicate answer): %s", at, req.ReservationID, o.Completion.Value)
		}
	}
	if req.SettleRequestID != "" {
		if first, ok := st.firstByID[req.SettleRequestID]; ok {
			if !resp.Duplicate {
				r.violate("op #%d: settle %s of reservation %s retried with the same request id but not answered as a duplicate", at, req.SettleRequestID, req.ReservationID)
			}
			if !slices.Equal(first, resp.Limits) {
				r.violate("op #%d: settle %s of reservation %s replayed %v; the first answer was %v", at, req.SettleRequestID, req.ReservationID, resp.Limits, first)
			}
		} else {
			st.firstByID[req.SettleRequestID] = resp.Limits
		}
	} else if req.Mode == history.SettleAgain && resp.Duplicate {
		r.violate("op #%d: a settle with a new request id of reservation %s answered as a duplicate", at, req.ReservationID)
	}
	st.known = true
	c.checkSettledLimits(at, req, resp)
	return nil
}

// checkSettledLimits checks an ok settle answer's limits: refunds and
// charges within what was reserved, and the actual permits as sent.
func (c *settlements) checkSettledLimits(at int, req, resp history.SettleValue) {
	r := &c.r
	for _, l := range resp.Limits {
		switch {
		case l.Actual <= l.Reserved && (l.Refunded > l.Reserved-l.Actual || l.Charged != 0):
			r.violate("op #%d: reservation %s, limit %s: reserved %d, actual %d, refunded %d, charged %d (allowed: refund <= %d, no charge)",
				at, req.ReservationID, l.Limit, l.Reserved, l.Actual, l.Refunded, l.Charged, l.Reserved-l.Actual)
		case l.Refunded < 0 || l.Charged < 0:
			r.violate("op #%d: reservation %s, limit %s: negative refund %d or charge %d", at, req.ReservationID, l.Limit, l.Refunded, l.Charged)
		}
	}
	for _, a := range req.Actual {
		for _, l := range resp.Limits {
			if l.Limit == a.Limit && l.Actual != a.Permits {
				r.violate("op #%d: reservation %s, limit %s: settled actual %d, the answer says %d", at, req.ReservationID, l.Limit, a.Permits, l.Actual)
			}
		}
	}
}

// release checks a release op.
func (c *settlements) release(o history.Operation) error {
	r := &c.r
	var req, resp history.ReleaseValue
	if err := o.Invoke.DecodeValue(&req); err != nil {
		return err
	}
	c.counts["releases_"+string(o.Outcome())]++
	if o.Outcome() != history.OK {
		return nil
	}
	if err := o.Completion.DecodeValue(&resp); err != nil {
		return err
	}
	st := c.get(req.ReservationID)
	at := o.Invoke.Index
	switch {
	case resp.Released < 0 || resp.Released > 1:
		r.violate("op #%d: release of reservation %s freed %d permits; it holds one in-flight permit", at, req.ReservationID, resp.Released)
	case req.Attempt > 1 && resp.Released != 0:
		r.violate("op #%d: repeated release of reservation %s freed %d permits (want 0)", at, req.ReservationID, resp.Released)
	}
	st.released += resp.Released
	if st.released > 1 && resp.Released > 0 {
		r.violate("op #%d: reservation %s released %d permits in all; it held one", at, req.ReservationID, st.released)
	}
	return nil
}
