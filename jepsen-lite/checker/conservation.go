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
//   - every API call is backed by a distinct permit of a grant: a call
//     spends one token of the grant named by its request ID, and a grant of
//     n permits backs at most n calls. So the number of calls never exceeds
//     the number of granted permits, at any moment (SameTimeBase) or in
//     total. A call that names its permit (fakeapi.Call.Permit) must name
//     one of 0 to n-1 that no other call of the grant named;
//   - with SameTimeBase, no call is made before its grant was received, nor
//     before its permit's ready time minus the tolerance. Permit j of a
//     grant is ready at receive + wait + j·spacing (spacing_ns; 0 for
//     permits used together). A call naming permit j is judged against
//     permit j's ready time, and the k-th call of a grant (0-based, in
//     receive order) against permit k's at least, whatever it names: any
//     k+1 distinct permits include one numbered k or more.
//
// Grants are ok completions of reserve and acquire; an info reserve may
// have been granted, but its worker never learned so, and a call spending
// it is flagged. Details: grants, granted_permits, calls, spent,
// double_grants, early_calls, overdrafts, permit_reuses,
// permits_out_of_range.
func Conservation(in ConservationInput) (Result, error) {
	if in.ToleranceNanos < 0 {
		return Result{}, fmt.Errorf("%w: conservation tolerance %d ns; allowed: >= 0", ErrInvalid, in.ToleranceNanos)
	}
	ops, err := history.Pair(in.Ops)
	if err != nil {
		return Result{}, fmt.Errorf("checker: conservation: %w", err)
	}
	c := &conservation{
		in: in, r: newResult("conservation"),
		grants: make(map[string]*conservationGrant),
		events: append([]TokenEvent(nil), in.Events...),
	}
	for _, o := range ops {
		if err := c.credit(o); err != nil {
			return Result{}, err
		}
	}
	for _, call := range sortedCalls(in.Calls) {
		c.spend(call)
	}
	totals, err := runLedger(c.events, &c.r)
	if err != nil {
		return Result{}, err
	}
	r := c.r
	r.Details["grants"] = c.nGrants
	r.Details["granted_permits"] = c.permits
	r.Details["credited"] = totals.credited
	r.Details["calls"] = len(in.Calls)
	r.Details["spent"] = totals.spent
	r.Details["transferred"] = totals.transferred
	r.Details["overdrafts"] = totals.overdrafts
	r.Details["double_grants"] = c.doubles
	r.Details["early_calls"] = c.early
	r.Details["permit_reuses"] = c.reuses
	r.Details["permits_out_of_range"] = c.outOfRange
	r.Details["same_time_base"] = in.SameTimeBase
	return r, nil
}

// conservationGrant is a grant's account in the conservation check.
type conservationGrant struct {
	index   int   // invoke index
	readyAt int64 // receive + wait: permit 0's ready time
	recvAt  int64
	n       int64 // permits granted
	spacing int64 // permit j is ready at readyAt + j·spacing
	calls   int64 // calls seen so far (receive order)
	used    map[int64]bool
}

// conservation is one Conservation call's state: the grants by account,
// the ledger's events and the counts.
type conservation struct {
	in     ConservationInput
	r      Result
	grants map[string]*conservationGrant // account → first grant
	events []TokenEvent

	nGrants, doubles          int
	permits                   int64
	early, reuses, outOfRange int
}

// credit credits a successful reserve or acquire's permits to its
// account (a replay of a grant already counted credits nothing).
func (c *conservation) credit(o history.Operation) error {
	if (o.F() != history.FReserve && o.F() != history.FAcquire) || o.Outcome() != history.OK {
		return nil
	}
	var req history.ReserveRequest
	var resp history.ReserveResponse
	if err := o.Invoke.DecodeValue(&req); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := o.Completion.DecodeValue(&resp); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	n := req.Permits
	if n == 0 {
		n = 1
	}
	if n < 0 {
		return fmt.Errorf("%w: op #%d asks for %d permits; allowed: >= 1", ErrInvalid, o.Invoke.Index, n)
	}
	id := o.RequestID()
	account := GrantAccount(id)
	if id == "" {
		account = GrantAccount(fmt.Sprintf("#%d", o.Invoke.Index))
	}
	first, seen := c.grants[account]
	if seen && resp.Duplicate {
		return nil // a replay of a grant already counted
	}
	if seen {
		c.doubles++
		c.r.violate("request_id %q granted twice: ops #%d and #%d both ok and not replays", id, first.index, o.Invoke.Index)
	}
	if resp.SpacingNanos < 0 {
		return fmt.Errorf("%w: op #%d: spacing %d ns; allowed: >= 0", ErrInvalid, o.Invoke.Index, resp.SpacingNanos)
	}
	recv := o.Completion.TimeNanos
	g := &conservationGrant{index: o.Invoke.Index, recvAt: recv, readyAt: recv + resp.WaitNanos, n: n, spacing: resp.SpacingNanos, used: map[int64]bool{}}
	if !seen {
		c.grants[account] = g
	}
	at := int64(beforeAll)
	if c.in.SameTimeBase {
		at = recv
	}
	c.events = append(c.events, TokenEvent{Kind: Credit, TimeNanos: at, To: account, Tokens: n,
		Source: fmt.Sprintf("grant op #%d (%d permits, id %q)", o.Invoke.Index, n, id)})
	c.nGrants++
	c.permits += n
	return nil
}

// spend spends a call's permit from its account, checking the permit and
// the call's time against its grant.
func (c *conservation) spend(call fakeapi.Call) {
	in := c.in
	account := ""
	switch {
	case in.CallAccount != nil:
		account = in.CallAccount(call)
	case call.RequestID != "":
		account = GrantAccount(call.RequestID)
	}
	if g, ok := c.grants[account]; ok {
		c.checkSpend(g, call)
	}
	c.events = append(c.events, TokenEvent{Kind: Spend, TimeNanos: call.TimeNanos, From: account, Tokens: 1, Source: callString(call)})
}

// checkSpend checks a call against its grant: a permit in range, spent
// once, and not before the grant was received and the permit ready.
func (c *conservation) checkSpend(g *conservationGrant, call fakeapi.Call) {
	in, r := c.in, &c.r
	j := g.calls // at least the permit of its rank
	g.calls++
	if call.Permit != nil {
		switch p := *call.Permit; {
		case p < 0 || p >= g.n:
			c.outOfRange++
			r.violate("%s spends permit %d of a grant of %d permits (op #%d); allowed: 0 to %d", callString(call), p, g.n, g.index, g.n-1)
		case g.used[p]:
			c.reuses++
			r.violate("%s spends permit %d of its grant (op #%d) a second time", callString(call), p, g.index)
		default:
			g.used[p] = true
			j = max(j, p)
		}
	}
	j = min(j, g.n-1) // more calls than permits: the ledger reports it
	ready := g.readyAt + j*g.spacing
	if !in.SameTimeBase {
		return
	}
	switch {
	case call.TimeNanos < g.recvAt:
		c.early++
		r.violate("%s before its grant (op #%d) was received at %s", callString(call), g.index, dur(g.recvAt))
	case call.TimeNanos < ready-in.ToleranceNanos && j == 0:
		c.early++
		r.violate("%s before its grant (op #%d) was ready at %s (tolerance %s)", callString(call), g.index, dur(ready), dur(in.ToleranceNanos))
	case call.TimeNanos < ready-in.ToleranceNanos:
		c.early++
		r.violate("%s before permit %d of its grant (op #%d) was ready at %s (wait + %d × spacing %s; tolerance %s)",
			callString(call), j, g.index, dur(ready), j, dur(g.spacing), dur(in.ToleranceNanos))
	}
}
