package checker

import (
	"fmt"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
)

// ConservationInput is what Conservation judges.
type ConservationInput struct {
	// Ops is the history.
	Ops []history.Op
	// Calls are the fake API's calls.
	Calls []fakeapi.Call
	// SameTimeBase reports that history times and call times share one
	// origin (one process, one Start). Then every call must come after its
	// grant was received and not before its ready time (receive + wait)
	// minus ToleranceNanos, and the ledger runs in time order; otherwise
	// it counts all grants before all calls.
	SameTimeBase bool
	// ToleranceNanos (>= 0) is the delivery jitter allowed on early use.
	ToleranceNanos int64
	// Events are extra token movements, for example leases (Credit to a
	// holder) and steals (Transfer donor → taker), in the calls' time base.
	Events []TokenEvent
	// CallAccount maps a call to the account it spends from; nil means
	// GrantAccount(call.RequestID), or no account for an empty RequestID.
	CallAccount func(fakeapi.Call) string
}

// Conservation checks that tokens are never created except by the register
// and never spent twice:
//
//   - no request ID is granted twice: at most one ok reserve (or acquire)
//     per request ID that is not a replay (duplicate=true) of an earlier
//     decision;
//   - every API call is backed by a distinct grant: a call spends one token
//     of the grant named by its request ID, and a grant of n permits backs
//     at most n calls. So the number of calls never exceeds the number of
//     granted permits, at any moment (SameTimeBase) or in total;
//   - with SameTimeBase, no call is made before its grant was received, nor
//     before its ready time minus the tolerance.
//
// Grants are ok completions of reserve and acquire; an info reserve may
// have been granted, but its worker never learned so, and a call spending
// it is flagged. Details: grants, granted_permits, calls, spent,
// double_grants, early_calls, overdrafts.
func Conservation(in ConservationInput) (Result, error) {
	if in.ToleranceNanos < 0 {
		return Result{}, fmt.Errorf("%w: conservation tolerance %d ns; allowed: >= 0", ErrInvalid, in.ToleranceNanos)
	}
	ops, err := history.Pair(in.Ops)
	if err != nil {
		return Result{}, fmt.Errorf("checker: conservation: %w", err)
	}
	r := newResult("conservation")
	type grant struct {
		index   int   // invoke index
		readyAt int64 // receive + wait
		recvAt  int64
	}
	grants := make(map[string]grant) // account → first grant
	events := append([]TokenEvent(nil), in.Events...)
	nGrants, permits, doubles := 0, int64(0), 0
	for _, o := range ops {
		if (o.F() != history.FReserve && o.F() != history.FAcquire) || o.Outcome() != history.OK {
			continue
		}
		var req history.ReserveRequest
		var resp history.ReserveResponse
		if err := o.Invoke.DecodeValue(&req); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if err := o.Completion.DecodeValue(&resp); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		n := req.Permits
		if n == 0 {
			n = 1
		}
		if n < 0 {
			return Result{}, fmt.Errorf("%w: op #%d asks for %d permits; allowed: >= 1", ErrInvalid, o.Invoke.Index, n)
		}
		id := o.RequestID()
		account := GrantAccount(id)
		if id == "" {
			account = GrantAccount(fmt.Sprintf("#%d", o.Invoke.Index))
		}
		first, seen := grants[account]
		if seen && resp.Duplicate {
			continue // a replay of a grant already counted
		}
		if seen {
			doubles++
			r.violate("request_id %q granted twice: ops #%d and #%d both ok and not replays", id, first.index, o.Invoke.Index)
		}
		recv := o.Completion.TimeNanos
		g := grant{index: o.Invoke.Index, recvAt: recv, readyAt: recv + resp.WaitNanos}
		if !seen {
			grants[account] = g
		}
		at := int64(beforeAll)
		if in.SameTimeBase {
			at = recv
		}
		events = append(events, TokenEvent{Kind: Credit, TimeNanos: at, To: account, Tokens: n,
			Source: fmt.Sprintf("grant op #%d (%d permits, id %q)", o.Invoke.Index, n, id)})
		nGrants++
		permits += n
	}
	early := 0
	for _, c := range in.Calls {
		account := ""
		switch {
		case in.CallAccount != nil:
			account = in.CallAccount(c)
		case c.RequestID != "":
			account = GrantAccount(c.RequestID)
		}
		if g, ok := grants[account]; ok && in.SameTimeBase {
			switch {
			case c.TimeNanos < g.recvAt:
				early++
				r.violate("%s before its grant (op #%d) was received at %s", callString(c), g.index, dur(g.recvAt))
			case c.TimeNanos < g.readyAt-in.ToleranceNanos:
				early++
				r.violate("%s before its grant (op #%d) was ready at %s (tolerance %s)", callString(c), g.index, dur(g.readyAt), dur(in.ToleranceNanos))
			}
		}
		events = append(events, TokenEvent{Kind: Spend, TimeNanos: c.TimeNanos, From: account, Tokens: 1, Source: callString(c)})
	}
	totals, err := runLedger(events, &r)
	if err != nil {
		return Result{}, err
	}
	r.Details["grants"] = nGrants
	r.Details["granted_permits"] = permits
	r.Details["credited"] = totals.credited
	r.Details["calls"] = len(in.Calls)
	r.Details["spent"] = totals.spent
	r.Details["transferred"] = totals.transferred
	r.Details["overdrafts"] = totals.overdrafts
	r.Details["double_grants"] = doubles
	r.Details["early_calls"] = early
	r.Details["same_time_base"] = in.SameTimeBase
	return r, nil
}
