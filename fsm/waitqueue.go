package fsm

import (
	"container/heap"
	"fmt"
	"math"
	"slices"

	"github.com/permitd/permitd/bucket"
)

// waitqueue.go: the queues of the reserves that wait for an in-flight cap:
// how the waiting reservations are kept (per limit in arrival order, by
// deadline, by request ID) and how many may wait, per limit and per owner.
// How they are decided is in waiters.go.

// waiting is what a reservation in the waiting state keeps beyond its
// parts: the reserve's request ID (may be empty), its settle window, and
// its index in the deadline heap. Its deadline is the record's
// finalAtNanos, its arrival decidedAtNanos.
type waiting struct {
	requestID         string
	settleWithinNanos int64
	// retriedAtNanos is the cluster time of the latest retry of its
	// request ID (a replay answered Queued), 0 if none: a withdrawal with
	// a grace spares a reserve retried within it (Withdraw).
	retriedAtNanos int64
	heapIndex      int
}

// waitQueues indexes the waiting reservations (derived from the
// reservation table; Restore rebuilds it).
type waitQueues struct {
	// byLimit holds, per limit name, the queue of the waiting
	// reservations that name it.
	byLimit map[string]*waitQueue
	// deadlines orders the waiting reservations by (deadline, id).
	deadlines reservationHeap
	// byRequestID finds a waiting reservation by its reserve's request ID.
	byRequestID map[string]uint64
	// maxPerLimit and maxPerOwner bound the queues (see below):
	// MaxWaitersPerLimit and MaxWaitersPerOwner but in tests.
	maxPerLimit, maxPerOwner int
}

// waitQueue is the queue of one limit: the IDs of the waiting
// reservations that name it, ascending (arrival order), and how many of
// its permits those before each one ask for.
type waitQueue struct {
	ids []uint64
	// ahead[i] is the sum of the permits the reservations ids[:i] ask of
	// the limit; total the sum over all of them.
	ahead []int64
	total int64
	// owners counts the reservations in the queue by owner (not the
	// empty one).
	owners map[string]int
}

func newWaitQueues() waitQueues {
	return waitQueues{byLimit: map[string]*waitQueue{}, byRequestID: map[string]uint64{}, deadlines: reservationHeap{waiting: true},
		maxPerLimit: MaxWaitersPerLimit, maxPerOwner: MaxWaitersPerOwner}
}

// len is the number of waiting reservations.
func (q *waitQueues) len() int { return q.deadlines.Len() }

// add indexes a waiting reservation whose ID is above every indexed one.
func (q *waitQueues) add(rv *reservation) {
	for _, p := range rv.parts {
		wq := q.byLimit[p.limit]
		if wq == nil {
			wq = &waitQueue{owners: map[string]int{}}
			q.byLimit[p.limit] = wq
		}
		wq.ids = append(wq.ids, rv.id)
		wq.ahead = append(wq.ahead, wq.total)
		wq.total += p.permits
		if rv.owner != "" {
			wq.owners[rv.owner]++
		}
	}
	heap.Push(&q.deadlines, rv)
	if id := rv.wait.requestID; id != "" {
		q.byRequestID[id] = rv.id
	}
}

// remove unindexes a waiting reservation.
func (q *waitQueues) remove(rv *reservation) {
	for _, p := range rv.parts {
		wq := q.byLimit[p.limit]
		i, ok := slices.BinarySearch(wq.ids, rv.id)
		if !ok {
			continue
		}
		wq.ids = slices.Delete(wq.ids, i, i+1)
		wq.ahead = slices.Delete(wq.ahead, i, i+1)
		for j := i; j < len(wq.ahead); j++ {
			wq.ahead[j] -= p.permits
		}
		wq.total -= p.permits
		if rv.owner != "" {
			if wq.owners[rv.owner]--; wq.owners[rv.owner] == 0 {
				delete(wq.owners, rv.owner)
			}
		}
		if len(wq.ids) == 0 {
			delete(q.byLimit, p.limit)
		}
	}
	heap.Remove(&q.deadlines, rv.wait.heapIndex)
	delete(q.byRequestID, rv.wait.requestID)
}

// ahead returns the permits of limit that the reservations waiting before
// reservation id ask for (id 0, a reserve arriving now: all of them).
func (q *waitQueues) ahead(limit string, id uint64) int64 {
	wq := q.byLimit[limit]
	switch {
	case wq == nil:
		return 0
	case id == 0:
		return wq.total
	}
	i, _ := slices.BinarySearch(wq.ids, id)
	if i == len(wq.ids) {
		return wq.total
	}
	return wq.ahead[i]
}

// The bounds of the queues: how many reserves may wait in in-flight caps'
// queues, per limit and per owner.
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
// it); it is not recorded (its request ID stays unused: a retry is decided
// afresh) and changes nothing. A reserve whose request ID already waits is answered
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
