package fsm

import (
	"container/heap"
	"time"
)

// reservation.go: the reservations that a reserve in the reservation form
// (Reserve.Track) leaves behind, so that its caller can settle the real
// cost afterwards (settle.go) and release in-flight permits early. The
// table is replicated: its records are in snapshots, and every replica
// forgets the same records at the same entry.

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
}

func newReservationTable() reservationTable {
	return reservationTable{byID: make(map[uint64]*reservation)}
}

// len is the number of live reservations.
func (t *reservationTable) len() int { return len(t.byID) }

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
}

// expire forgets every reservation whose final time is <= nowNanos.
func (t *reservationTable) expire(nowNanos int64) {
	for t.heap.Len() > 0 && t.heap.rs[0].finalAtNanos <= nowNanos {
		rv := heap.Pop(&t.heap).(*reservation)
		delete(t.byID, rv.id)
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
