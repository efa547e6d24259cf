package fsm

import (
	"container/heap"
	"math"
	"slices"
	"strings"
	"time"
)

// leasebook.go: the lease book, the register side of the leased path (see
// doc.go, "Leases", for the model and the bound). This file owns the book's
// state and how it changes: the pools and leases, their indexes, minting,
// the settlement of a reported grant, and expiry by the passage of cluster
// time. The size of a grant is in leasegrant.go, the commands as Apply
// decides them in leaseops.go, the vocabulary and views in lease.go, the
// encodings in leasecodec.go (log entries) and leasesnapshot.go.

// leasePool is the lease book of one leased limit.
//
// Accounts, all in whole permits: minted = free + outstanding + settled
// (settled = spent + stolen + expired) after every entry. outstanding is
// the sum of the active grants and of the lingering stolen permits of its
// leases.
type leasePool struct {
	// burstSpec and maxOutSpec are the policy's C and O (0 = default).
	burstSpec, maxOutSpec int64
	// accruedToNanos is the cluster time up to which minting has been
	// accounted: the next permit is minted at accruedToNanos + interval.
	accruedToNanos int64

	minted, free, outstanding int64
	spent, stolen, expired    int64
	stolenIn                  int64

	opened, renewals, returns, expirations, fenced uint64

	// leases holds every lease, active or lingering, by ID ascending (IDs
	// come from a global counter, so a new lease is appended).
	leases []*lease

	// Derived from leases (rebuilt by Restore): the active lease of each
	// holder, and the groups of active leases by name.
	byHolder map[string]*lease
	groups   []*leaseGroup
}

// leaseGroup aggregates the active leases of one group.
type leaseGroup struct {
	name string
	// demand is the sum of its leases' demands (at most MaxLeasesPerLimit *
	// MaxDemandMilliPermitsPerSec, far from overflowing).
	demand int64
	// leases are its active leases by ID ascending; the last one (the
	// newest) sets the group's weight.
	leases []*lease
	// sorted are the leases' demands, ascending, when sortedOK (derived:
	// never in a snapshot; reset by every change of the group's members
	// or of a member's demand: the indexes below).
	sorted   []int64
	sortedOK bool
}

func (g *leaseGroup) weight() int64 { return g.leases[len(g.leases)-1].weight }

// sortedDemands returns the group's demands in ascending order, sorting
// them only after they changed.
func (g *leaseGroup) sortedDemands() []int64 {
	if !g.sortedOK {
		g.sorted = g.sorted[:0]
		for _, m := range g.leases {
			g.sorted = append(g.sorted, m.demand)
		}
		slices.Sort(g.sorted)
		g.sortedOK = true
	}
	return g.sorted
}

// lease is one lease. Inactive leases (returned or expired) hold nothing
// but lingering permits and are dropped when those have lingered out.
type lease struct {
	limit string
	pool  *leasePool
	id    uint64
	epoch uint64

	active bool
	holder string
	group  string
	weight int64
	demand int64
	share  int64
	// permits is the current grant; carry the fraction of a permit the
	// holder's share earned but no grant has paid yet, as a numerator over
	// capacity*interval (see grant).
	permits int64
	carry   int64
	// entitled is what the lease may still take from the pool, net of
	// what it credits back, as of the moment the pool had minted mintMark
	// permits in all: its share's fraction of every minted permit accrues
	// into it (entitledRem is the fraction of a permit, a numerator over
	// the capacity r), its grants' net intake is taken out of it, and it
	// never exceeds the lease's fair grant (see entitlementAt).
	entitled    int64
	entitledRem int64
	mintMark    int64

	grantedAtNanos, expiresAtNanos int64
	stolenIn                       int64

	// linger holds permits of earlier grants given to other holders, by
	// untilNanos strictly ascending, at most maxLingerGrants entries.
	linger []lingerGrant

	heapIndex int

	// capMemo caches the lease's entitlement cap (derived: never in a
	// snapshot, recomputed whenever an input differs).
	capMemo capMemo
}

// capMemo is an entitlement cap and the inputs it was computed from: the
// lease's share and grant span, and the limit's interval, O and capacity.
// A grant walks every other lease's entitlement, and the cap costs two of
// an entitlement's three 128-bit divisions; its inputs change only at the
// lease's own grants and at a change of the limit.
type capMemo struct {
	set                                          bool
	share, spanNanos, intervalNanos, o, capacity int64
	value                                        int64
}

// lingerGrant is a number of stolen-out permits that other holders may
// spend until untilNanos (the expiry of the grant they came from).
type lingerGrant struct {
	untilNanos, permits int64
}

// maxLingerGrants bounds a lease's linger list. An overflow merges the two
// earliest entries into the later one, which only keeps permits counted as
// outstanding for longer: safe.
const maxLingerGrants = 4

// Indexes. leases is by ID; byHolder and groups index the active leases
// and are derived from leases (Restore rebuilds them), so every change to a
// lease's activity or demand goes through these functions.

// find returns the lease with that ID, or nil.
func (p *leasePool) find(id uint64) *lease {
	i, ok := slices.BinarySearchFunc(p.leases, id, func(l *lease, id uint64) int { return cmpUint64(l.id, id) })
	if !ok {
		return nil
	}
	return p.leases[i]
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// addLease records a new active lease (its ID is the largest yet).
func (p *leasePool) addLease(l *lease) {
	p.leases = append(p.leases, l)
	p.activate(l)
}

// activate adds an active lease to the derived indexes.
func (p *leasePool) activate(l *lease) {
	p.byHolder[l.holder] = l
	i, ok := slices.BinarySearchFunc(p.groups, l.group, func(g *leaseGroup, name string) int { return strings.Compare(g.name, name) })
	if !ok {
		p.groups = slices.Insert(p.groups, i, &leaseGroup{name: l.group})
	}
	g := p.groups[i]
	j, _ := slices.BinarySearchFunc(g.leases, l.id, func(m *lease, id uint64) int { return cmpUint64(m.id, id) })
	g.leases = slices.Insert(g.leases, j, l)
	g.demand += l.demand
	g.sortedOK = false
}

// deactivate closes an active lease: it leaves the indexes and keeps only
// its identity and lingering permits. Its grant must have been settled.
func (p *leasePool) deactivate(l *lease) {
	delete(p.byHolder, l.holder)
	i, _ := slices.BinarySearchFunc(p.groups, l.group, func(g *leaseGroup, name string) int { return strings.Compare(g.name, name) })
	g := p.groups[i]
	j, _ := slices.BinarySearchFunc(g.leases, l.id, func(m *lease, id uint64) int { return cmpUint64(m.id, id) })
	g.leases = slices.Delete(g.leases, j, j+1)
	g.demand -= l.demand
	g.sortedOK = false
	if len(g.leases) == 0 {
		p.groups = slices.Delete(p.groups, i, i+1)
	}
	l.active = false
	l.weight, l.demand, l.share, l.permits, l.carry = 0, 0, 0, 0, 0
	l.entitled, l.entitledRem = 0, 0
}

// removeLease drops an inactive lease with nothing lingering.
func (p *leasePool) removeLease(l *lease) {
	if i, ok := slices.BinarySearchFunc(p.leases, l.id, func(m *lease, id uint64) int { return cmpUint64(m.id, id) }); ok {
		p.leases = slices.Delete(p.leases, i, i+1)
	}
}

// setDemand updates an active lease's demand and its group's sum.
func (p *leasePool) setDemand(l *lease, demand int64) {
	i, _ := slices.BinarySearchFunc(p.groups, l.group, func(g *leaseGroup, name string) int { return strings.Compare(g.name, name) })
	g := p.groups[i]
	g.demand += demand - l.demand
	if demand != l.demand {
		g.sortedOK = false
	}
	l.demand = demand
}

// Minting, the lease pool's only source of permits.
//
//	free += (now - accruedTo) / I, while free < C
//
// C and O default to one second of permits at the limit's interval I.

// defaultPoolPermits is the default of C and O: one second of permits at
// the given interval, at least 1.
func defaultPoolPermits(intervalNanos int64) int64 {
	return max(1, int64(time.Second)/intervalNanos)
}

func (p *leasePool) burst(intervalNanos int64) int64 {
	if p.burstSpec != 0 {
		return p.burstSpec
	}
	return defaultPoolPermits(intervalNanos)
}

func (p *leasePool) maxOutstanding(intervalNanos int64) int64 {
	if p.maxOutSpec != 0 {
		return p.maxOutSpec
	}
	return defaultPoolPermits(intervalNanos)
}

// accrue mints the permits due at nowNanos: one per interval since
// accruedToNanos, while free < C. Permits that would take free above C
// are not minted (and not counted): the clock restarts at now. The result
// does not depend on how often accrue is called between two other changes
// of the pool.
func (p *leasePool) accrue(nowNanos, intervalNanos int64) {
	if nowNanos <= p.accruedToNanos {
		return
	}
	c := p.burst(intervalNanos)
	if p.free >= c {
		p.accruedToNanos = nowNanos
		return
	}
	k := (nowNanos - p.accruedToNanos) / intervalNanos // both >= 0: no overflow
	if room := c - p.free; k >= room {
		p.minted += room
		p.free = c
		p.accruedToNanos = nowNanos
		return
	}
	p.minted += k
	p.free += k
	p.accruedToNanos += k * intervalNanos
}

// Settling a reported grant. Every permit of a grant leaves outstanding
// exactly once, so that after every entry
//
//	minted = free + outstanding + spent + stolen + expired
//
// spent permits are settled at once, stolen-out ones linger (still
// outstanding) until the grant's expiry, kept ones (a renewal's in-flight
// allowance) stay outstanding as the first permits of the next grant, and
// the rest is credited to free.

// settleReport settles active lease l's current grant as its holder
// reports it: spent permits are settled, stolen-out permits linger until
// the grant's expiry, kept permits stay outstanding (the caller puts them
// in the next grant), the rest goes back to free. It returns the permits
// credited to free. spent+out+kept <= l.permits.
func (p *leasePool) settleReport(l *lease, r Report, kept int64) int64 {
	spent, out, in := r.SpentPermits, r.StolenOutPermits, r.StolenInPermits
	credit := l.permits - spent - out - kept
	p.spent += spent
	p.free += credit
	p.outstanding -= l.permits - out - kept // out stays outstanding, now lingering; kept, for the next grant
	p.stolenIn += in
	l.stolenIn += in
	l.permits = 0
	if out > 0 {
		l.addLinger(lingerGrant{untilNanos: l.expiresAtNanos, permits: out})
	}
	return credit
}

// addLinger inserts g into l's linger list (merging equal expiries, and
// the two earliest entries on overflow).
func (l *lease) addLinger(g lingerGrant) {
	i, ok := slices.BinarySearchFunc(l.linger, g.untilNanos, func(e lingerGrant, t int64) int {
		switch {
		case e.untilNanos < t:
			return -1
		case e.untilNanos > t:
			return 1
		}
		return 0
	})
	if ok {
		l.linger[i].permits += g.permits
		return
	}
	l.linger = slices.Insert(l.linger, i, g)
	if len(l.linger) > maxLingerGrants {
		l.linger[1].permits += l.linger[0].permits
		l.linger = slices.Delete(l.linger, 0, 1)
	}
}

// lingeringPermits is the sum of l's lingering permits.
func (l *lease) lingeringPermits() int64 {
	var n int64
	for _, g := range l.linger {
		n += g.permits
	}
	return n
}

// Expiry: what happens to leases by the passage of cluster time
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
