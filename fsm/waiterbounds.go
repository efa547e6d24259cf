package fsm

import (
	"fmt"
	"math"

	"github.com/permitd/permitd/bucket"
)

// waiterbounds.go: how many reserves may wait in in-flight caps' queues
// (waiters.go), per limit and per owner.
//
// Without a bound of its own, a cap's queue is bounded only by the table
// of reservations (MaxReservations, shared by every limit and every
// client): one client could fill it, and every other client's reserve on
// that cap would be refused, or would wait behind a queue that its max
// wait can never see the end of. A queue also costs the register time:
// a waiter leaving the queue shifts those behind it, so a queue of n
// costs O(n) per decision and O(n^2) for an entry that grants them all.
// Hence two bounds, both replicated behaviour (every replica refuses the
// same reserves at the same entry; changing them needs a new
// EncodingVersion):
//
//   - MaxWaitersPerLimit reserves wait naming any one limit (a reserve
//     waits in the queue of every limit it names). Far more than a cap's
//     waiters can be served within any sensible max wait: 4096 waiters of
//     a cap of 8 held 1 s each wait over eight minutes.
//   - MaxWaitersPerOwner of them may be one owner's (Reserve.Owner: the
//     API token's name when tokens are on), so that one token fills at
//     most a quarter of a queue and at least four can wait on any cap
//     whatever the others do. Without tokens every reserve has the empty
//     owner, the register cannot tell clients apart, and only the limit's
//     bound applies.
//
// A reserve that would wait beyond a bound is answered Busy, naming the
// bound, with the time until a waiter that counts against it may leave
// the queue without any command (the earliest deadline among them, or
// the next lapse of a hold on a cap one of them names, which may grant
// it); it is not
// recorded (its request ID stays unused: a retry is decided afresh) and
// changes nothing. A reserve whose request ID already waits is answered
// Queued as a replay, as before: it adds no waiter.
const (
	MaxWaitersPerLimit = 1 << 12
	MaxWaitersPerOwner = MaxWaitersPerLimit / 4
)

// waitersFull reports whether reserve r, about to wait at nowNanos,
// would take the queue of a limit it names beyond MaxWaitersPerLimit, or
// its owner's share of it beyond MaxWaitersPerOwner, and if so the Busy
// outcome that answers it.
func (s *state) waitersFull(nowNanos int64, r *Reserve) (outcome, bool) {
	q := &s.waits
	for _, p := range r.Parts() {
		wq := q.byLimit[p.Limit]
		switch {
		case wq == nil:
		case len(wq.ids) >= q.maxPerLimit:
			return outcome{status: Busy, atNanos: s.waiterLeavesAt(nowNanos, p.Limit, ""), detail: boundDetail(fmt.Sprintf(
				"%d reserves wait in the queue of limit %q, the most one limit's queue holds (fsm.MaxWaitersPerLimit, %d): no reserve joins it until one of them is decided",
				len(wq.ids), p.Limit, q.maxPerLimit))}, true
		case r.Owner != "" && wq.owners[r.Owner] >= q.maxPerOwner:
			return outcome{status: Busy, atNanos: s.waiterLeavesAt(nowNanos, p.Limit, r.Owner), detail: boundDetail(fmt.Sprintf(
				"%q has %d reserves waiting in the queue of limit %q, the most one token may (fsm.MaxWaitersPerOwner, %d of the queue's %d): none of its reserves joins it until one of them is decided",
				r.Owner, wq.owners[r.Owner], p.Limit, q.maxPerOwner, q.maxPerLimit))}, true
		}
	}
	return outcome{}, false
}

// waiterLeavesAt is the earliest time after nowNanos at which a
// reservation waiting on limit name (of owner, if not empty) may leave
// its queue without a command: its deadline, or a lapse of a hold on a
// cap it names (which may grant it).
func (s *state) waiterLeavesAt(nowNanos int64, name, owner string) int64 {
	at := int64(math.MaxInt64)
	caps := map[string]bool{}
	for _, id := range s.waits.byLimit[name].ids {
		rv := s.reservations.byID[id]
		if owner != "" && rv.owner != owner {
			continue
		}
		at = min(at, rv.finalAtNanos)
		for _, p := range rv.parts {
			caps[p.limit] = true
		}
	}
	// The minimum does not depend on the order the map is visited in.
	for c := range caps {
		if l, ok := s.limits[c]; ok && isCap(l) {
			if p, ok := l.pacer.(*bucket.ConcurrencyPacer); ok {
				if e, ok := p.NextExpiry(nowNanos); ok {
					at = min(at, e)
				}
			}
		}
	}
	return max(at, nowNanos+1)
}

// withWaiterCaps bounds f's queues by perLimit waiters a limit and
// perOwner an owner (1 <= perOwner <= perLimit, at most the real bounds)
// instead of MaxWaitersPerLimit and MaxWaitersPerOwner, for tests that
// fill them; f must be empty. It returns f.
func (f *FSM) withWaiterCaps(perLimit, perOwner int) *FSM {
	if perOwner < 1 || perLimit < perOwner || perLimit > MaxWaitersPerLimit || perOwner > MaxWaitersPerOwner || f.st.appliedIndex != 0 {
		panic(fmt.Sprintf("fsm: waiter caps %d and %d on an FSM at index %d", perLimit, perOwner, f.st.appliedIndex))
	}
	f.maxWaiters, f.maxOwnerWaiters = perLimit, perOwner
	f.st.waits.maxPerLimit, f.st.waits.maxPerOwner = perLimit, perOwner
	return f
}
