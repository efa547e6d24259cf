package fsm

import (
	"container/heap"
	"math"
	"slices"
)

// leaseexpiry.go: what happens to leases by the passage of cluster time
// alone. A grant whose expiry has come is settled as expired and its lease
// closes; lingering permits whose grant has expired are settled as stolen.
// One heap over every lease of every limit, ordered by its next event,
// finds what is due in O(log n) per entry.

// nextEventNanos is when l next changes by itself: its grant's expiry (if
// active) or the end of its earliest lingering permits.
func (l *lease) nextEventNanos() int64 {
	t := int64(math.MaxInt64)
	if l.active {
		t = l.expiresAtNanos
	}
	if len(l.linger) > 0 {
		t = min(t, l.linger[0].untilNanos)
	}
	return t
}

// expire applies to l what is due at nowNanos: an active grant whose
// expiry has come is settled as expired (its unreported permits are never
// credited back) and the lease closes; lingering permits whose grant has
// expired are settled as stolen.
func (p *leasePool) expire(nowNanos int64, l *lease) {
	if l.active && l.expiresAtNanos <= nowNanos {
		p.expired += l.permits
		p.outstanding -= l.permits
		p.expirations++
		p.deactivate(l)
	}
	n := 0
	for n < len(l.linger) && l.linger[n].untilNanos <= nowNanos {
		p.stolen += l.linger[n].permits
		p.outstanding -= l.linger[n].permits
		n++
	}
	l.linger = slices.Delete(l.linger, 0, n)
}

// earliestEventNanos is the earliest nextEventNanos of the pool's leases
// (math.MaxInt64 if none).
func (p *leasePool) earliestEventNanos() int64 {
	t := int64(math.MaxInt64)
	for _, l := range p.leases {
		t = min(t, l.nextEventNanos())
	}
	return t
}

// leaseHeap orders all leases of all limits by nextEventNanos (ties by
// ID, unique), so that Apply finds what is due in O(log n).
type leaseHeap []*lease

func (h leaseHeap) Len() int { return len(h) }

func (h leaseHeap) Less(i, j int) bool {
	a, b := h[i].nextEventNanos(), h[j].nextEventNanos()
	if a != b {
		return a < b
	}
	return h[i].id < h[j].id
}

func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}

func (h *leaseHeap) Push(x any) {
	l := x.(*lease)
	l.heapIndex = len(*h)
	*h = append(*h, l)
}

func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.heapIndex = -1
	return l
}

// expireLeases applies everything due at nowNanos to every lease of every
// limit: grants whose expiry is <= now close, lingering permits whose grant
// has expired are settled. Each lease's changes touch only its own pool's
// sums, so the result does not depend on the order in which leases are
// visited.
func (s *state) expireLeases(nowNanos int64) {
	for len(s.expiries) > 0 {
		l := s.expiries[0]
		if l.nextEventNanos() > nowNanos {
			return
		}
		l.pool.expire(nowNanos, l)
		if !l.active && len(l.linger) == 0 {
			heap.Pop(&s.expiries)
			l.pool.removeLease(l)
		} else {
			heap.Fix(&s.expiries, 0)
		}
	}
}

// dropPool forgets a limit's lease book (the limit is being deleted).
func (s *state) dropPool(p *leasePool) {
	for _, l := range p.leases {
		heap.Remove(&s.expiries, l.heapIndex)
	}
}
