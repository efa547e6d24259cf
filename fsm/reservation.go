package fsm

import (
	"container/heap"
	"maps"
	"slices"
	"time"

	"github.com/permitd/permitd/bucket"
)

// reservation.go: the reservations that a reserve in the reservation form
// (Reserve.Track) leaves behind, so that its caller can settle the real
// cost afterwards (settle.go) and release in-flight permits early, and the
// in-flight holds they own. The table is replicated: its records are in
// snapshots (reservationsnapshot.go), and every replica forgets the same
// records at the same entry. How such a reserve is decided is in multi.go.

// Bounds and defaults of reservations. They are part of the replicated
// behaviour (Decode rejects what exceeds them).
const (
	// MaxReserveParts is the most limits one reserve may name (the
	// reserve's own limit and Reserve.Also together).
	MaxReserveParts = 8
	// DefaultSettleWindowNanos is how long after its grant's time a
	// reservation can be settled when the reserve does not say.
	DefaultSettleWindowNanos = int64(time.Minute)
	// MaxSettleWindowNanos is the longest settle window a reserve may ask
	// for.
	MaxSettleWindowNanos = int64(10 * time.Minute)
	// MaxReservations is the most reservations kept at once. When the
	// table is full a reserve in the reservation form is answered Busy
	// (nothing reserved) until the oldest reservation becomes final.
	MaxReservations = 1 << 18
	// MaxOwnerLen is the longest owner name a reservation records, in
	// bytes.
	MaxOwnerLen = 128
)

// Part is one limit of a multi-limit reserve (the permits reserved on it),
// or one limit's actual use in a settlement.
type Part struct {
	Limit   string
	Permits int64
}

// reservation is what a granted reserve in the reservation form leaves:
// the parts it reserved, at which times, and what has been settled and
// released since.
type reservation struct {
	id    uint64
	owner string
	// decidedAtNanos is the cluster time it was decided at, servedAtNanos
	// the time its permits were served at (>= decided), finalAtNanos the
	// time it stops being settleable or releasable and is forgotten.
	decidedAtNanos, servedAtNanos, finalAtNanos int64
	parts                                       []reservedPart
	// settled: a settlement was applied; settleID is its request ID (""
	// if it had none) and settleParts its result, replayed to a retry.
	settled     bool
	settleID    string
	settleParts []SettledPart
	// released: a release was applied.
	released bool
	// wait is not nil while the reservation waits in an in-flight cap's
	// queue for its grant (waiters.go): then decidedAtNanos is its arrival,
	// finalAtNanos its deadline, and its parts hold only their limits and
	// permits.
	wait *waiting
	// heapIndex is the record's position in the table's heap.
	heapIndex int
}

// granted reports that the reservation holds what it was granted (it is
// not waiting in an in-flight cap's queue).
func (rv *reservation) granted() bool { return rv.wait == nil }

// openAt reports whether the reservation counts as open at nowNanos:
// granted, not settled, and not final (a released one still awaits its
// settlement).
func (rv *reservation) openAt(nowNanos int64) bool {
	return rv.granted() && !rv.settled && rv.finalAtNanos > nowNanos
}

// reservedPart is one limit's part of a reservation.
type reservedPart struct {
	limit   string
	permits int64
	// bornIndex and seqAfter identify the pacer state the grant left: the
	// raft index that created the limit's pacer and the pacer's change
	// count just after the grant. While both still match, no other change
	// has touched the pacer, and a refund can restore pre, the state
	// before the grant, exactly.
	bornIndex, seqAfter uint64
	pre                 []byte
	// holdExpiresAtNanos (Concurrency) is when the part's hold expires;
	// releasedPermits how many of its permits were released early.
	holdExpiresAtNanos int64
	releasedPermits    int64
	// shadow: the limit was in shadow mode when the part was granted (its
	// decision was only counted; nothing is refunded or charged).
	shadow bool
}

// reservationTable holds the live reservations by ID and orders them by
// (finalAtNanos, id) for expiry.
type reservationTable struct {
	byID map[uint64]*reservation
	heap reservationHeap
	// lastID is the ID of the latest reservation (0 if none): IDs are 1,
	// 2, 3, ..., never reused.
	lastID uint64
	// pins counts, per limit name, the live reservations (waiting ones
	// included) that name it: a templated key they name is never dropped
	// (template.go). Derived from byID.
	pins map[string]int32
}

func newReservationTable() reservationTable {
	return reservationTable{byID: make(map[uint64]*reservation), pins: make(map[string]int32)}
}

// pin counts rv's names as named by one more live reservation (d = 1) or
// one fewer (d = -1).
func (t *reservationTable) pin(rv *reservation, d int32) {
	for i := range rv.parts {
		name := rv.parts[i].limit
		if n := t.pins[name] + d; n > 0 {
			t.pins[name] = n
		} else {
			delete(t.pins, name)
		}
	}
}

// remove forgets rv.
func (t *reservationTable) remove(rv *reservation) {
	heap.Remove(&t.heap, rv.heapIndex)
	delete(t.byID, rv.id)
	t.pin(rv, -1)
}

// len is the number of live reservations.
func (t *reservationTable) len() int { return len(t.byID) }

// open counts, per limit name, the reservations that name it, were
// granted, and are neither settled nor final at nowNanos (a released one
// still awaits its settlement) (LimitInfo.OpenReservations); nil when
// there are none.
func (t *reservationTable) open(nowNanos int64) map[string]int {
	var n map[string]int
	for _, rv := range t.byID {
		if !rv.openAt(nowNanos) {
			continue
		}
		for i := range rv.parts {
			if n == nil {
				n = make(map[string]int)
			}
			n[rv.parts[i].limit]++
		}
	}
	return n
}

// openOf is open's count for the limit called name alone.
func (t *reservationTable) openOf(name string, nowNanos int64) int {
	n := 0
	for _, rv := range t.byID {
		if !rv.openAt(nowNanos) {
			continue
		}
		for i := range rv.parts {
			if rv.parts[i].limit == name {
				n++
			}
		}
	}
	return n
}

// full reports that the table cannot take another reservation.
func (t *reservationTable) full() bool { return len(t.byID) >= MaxReservations }

// oldestFinalNanos is the earliest final time (only for a non-empty table).
func (t *reservationTable) oldestFinalNanos() int64 { return t.heap.rs[0].finalAtNanos }

// add inserts a new reservation, giving it the next ID.
func (t *reservationTable) add(rv *reservation) {
	t.lastID++
	rv.id = t.lastID
	t.insert(rv)
}

// insert adds a reservation that already has its ID (Restore).
func (t *reservationTable) insert(rv *reservation) {
	t.byID[rv.id] = rv
	heap.Push(&t.heap, rv)
	t.pin(rv, 1)
}

// expire forgets every reservation whose final time is <= nowNanos.
func (t *reservationTable) expire(nowNanos int64) {
	for t.heap.Len() > 0 && t.heap.rs[0].finalAtNanos <= nowNanos {
		rv := heap.Pop(&t.heap).(*reservation)
		delete(t.byID, rv.id)
		t.pin(rv, -1)
	}
}

// reservationHeap is a min-heap of reservations by (finalAtNanos, id). It
// keeps each one's position up to date: in its heapIndex for the table's
// heap, in its wait.heapIndex for the heap of waiting reservations (whose
// finalAtNanos is their deadline: waiters.go).
type reservationHeap struct {
	rs      []*reservation
	waiting bool
}

// pos is where h keeps rv's position.
func (h *reservationHeap) pos(rv *reservation) *int {
	if h.waiting {
		return &rv.wait.heapIndex
	}
	return &rv.heapIndex
}

func (h *reservationHeap) Len() int { return len(h.rs) }
func (h *reservationHeap) Less(i, j int) bool {
	if h.rs[i].finalAtNanos != h.rs[j].finalAtNanos {
		return h.rs[i].finalAtNanos < h.rs[j].finalAtNanos
	}
	return h.rs[i].id < h.rs[j].id
}
func (h *reservationHeap) Swap(i, j int) {
	h.rs[i], h.rs[j] = h.rs[j], h.rs[i]
	*h.pos(h.rs[i]), *h.pos(h.rs[j]) = i, j
}
func (h *reservationHeap) Push(x any) {
	rv := x.(*reservation)
	*h.pos(rv) = len(h.rs)
	h.rs = append(h.rs, rv)
}
func (h *reservationHeap) Pop() any {
	rv := h.rs[len(h.rs)-1]
	h.rs[len(h.rs)-1] = nil
	h.rs = h.rs[:len(h.rs)-1]
	return rv
}

// ReservationInfo is a read-only view of one reservation.
type ReservationInfo struct {
	ID    uint64
	Owner string
	// Times in cluster nanoseconds.
	DecidedAtNanos, ServedAtNanos, FinalAtNanos int64
	Parts                                       []Part
	Settled, Released                           bool
}

// Reservation returns a view of the live reservation id.
func (f *FSM) Reservation(id uint64) (ReservationInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	rv, ok := f.st.reservations.byID[id]
	if !ok {
		return ReservationInfo{}, false
	}
	info := ReservationInfo{ID: rv.id, Owner: rv.owner, DecidedAtNanos: rv.decidedAtNanos,
		ServedAtNanos: rv.servedAtNanos, FinalAtNanos: rv.finalAtNanos, Settled: rv.settled, Released: rv.released}
	for _, p := range rv.parts {
		info.Parts = append(info.Parts, Part{Limit: p.limit, Permits: p.permits})
	}
	return info, true
}

// Reservations returns how many reservations are live.
func (f *FSM) Reservations() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.reservations.len()
}

// Holds. An in-flight cap's holds belong to the reservations that took
// them, not to the limit's current configuration.
//
// A hold is a caller that may still be running against the resource the
// cap protects: it is held from its grant until it is released or its
// hold expires, whatever happens to the limit meanwhile. So the register
// counts every live hold against the limit of its name whenever that limit
// is an in-flight cap:
//
//   - a put that keeps the algorithm reconfigures the pacer, which keeps
//     its holds (bucket.ConcurrencyPacer.Reconfigure);
//   - a put that makes the limit an in-flight cap with a fresh pacer (a
//     new limit, a re-creation after a delete, a change from another
//     algorithm) carries over every live hold of a reservation on that
//     name (carryHolds): the live reservations are the record of who
//     holds what, and they outlive their limit (a reservation stays until
//     its last hold expires);
//   - a release or a settlement frees a hold in the reservation's record
//     whatever the limit is now, and in the pacer when the limit is an
//     in-flight cap (freeHold), so that a hold released while its limit
//     was something else is not carried over later.
//
// Hence the invariant the reachable-state walk checks
// (TestReachableStateWalk, capBound): for every name, at every instant
// a grant on it is decided, the enforced permits held by all live
// reservations of that name, whatever incarnation of the limit granted
// them, number at most the MaxInFlight of the grant. While the limit is
// not an in-flight cap (or does not exist) its holds cap nothing; they
// count again as soon as it is one. A put that lowers MaxInFlight below
// the permits held only makes new grants wait, as it always did.
//
// Carrying is a sum per expiry (bucket.ConcurrencyPacer.Carry merges
// holds of one expiry); the reservations are visited in ID order all the
// same, so that a state that carries more than the pacer can represent
// (only a restored snapshot that no log produced) stops at the same hold
// on every replica.

// carryHolds counts, in l's fresh concurrency pacer, every live hold of a
// reservation on l's name at nowNanos. A shadow part's hold is carried
// too: a pacer kept across a shadow switch keeps it as well.
func (s *state) carryHolds(l *limit, nowNanos int64) {
	c, ok := l.pacer.(*bucket.ConcurrencyPacer)
	if !ok || s.reservations.pins[l.name] == 0 {
		// No live reservation names it (a new templated key, most often):
		// nothing to carry, and no walk of the table inside Apply.
		return
	}
	for _, id := range slices.Sorted(maps.Keys(s.reservations.byID)) {
		rv := s.reservations.byID[id]
		for i := range rv.parts {
			p := &rv.parts[i]
			if p.limit != l.name || p.holdExpiresAtNanos <= nowNanos {
				continue
			}
			// Every live hold of a name was once in one pacer, which kept
			// them within MaxInFlightLimit in all: only a restored
			// snapshot that no log produced carries more, and stops here.
			if c.Carry(nowNanos, p.holdExpiresAtNanos, p.permits-p.releasedPermits) != nil {
				return
			}
		}
	}
}

// freeHold frees up to k permits of hold part p at nowNanos and returns
// how many it freed: none if the hold has expired, else k, taken out of
// the record and, when the limit of p's name is an in-flight cap now, out
// of its pacer (which holds them: carryHolds). A limit that is something
// else, or is gone, holds nothing to free, but the record still lets the
// permits go, so that a later incarnation does not carry them.
func (s *state) freeHold(nowNanos int64, p *reservedPart, k int64) int64 {
	k = min(k, p.permits-p.releasedPermits)
	if k <= 0 || p.holdExpiresAtNanos <= nowNanos {
		return 0
	}
	if l, ok := s.limits[p.limit]; ok {
		if rel, isHold := l.pacer.(bucket.Releaser); isHold {
			// A restored snapshot may hold fewer than its records say:
			// free what the pacer held.
			k = rel.Release(nowNanos, p.holdExpiresAtNanos, k)
			if k > 0 {
				l.seq++
			}
		}
	}
	p.releasedPermits += k
	return k
}
