package fsm

import (
	"container/heap"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
)

// The lease book: the register side of the leased path. See doc.go
// ("Leases") for the model and the bound; this file holds the state and the
// arithmetic.

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
}

func (g *leaseGroup) weight() int64 { return g.leases[len(g.leases)-1].weight }

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
	// what it credits back, as of grantedAtNanos: its share accrues into
	// it (entitledRem is the fraction of a permit, a numerator over
	// capacity*interval), its grants' net intake is taken out of it, and
	// it never exceeds the lease's fair grant (see entitlementAt).
	entitled    int64
	entitledRem int64

	grantedAtNanos, expiresAtNanos int64
	stolenIn                       int64

	// linger holds permits of earlier grants given to other holders, by
	// untilNanos strictly ascending, at most maxLingerGrants entries.
	linger []lingerGrant

	heapIndex int
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
	p.groups[i].demand += demand - l.demand
	l.demand = demand
}

// shareOf is the fair share of active lease l, in milli-permits per
// second, of a rate of capacity milli-permits per second: weighted max-min
// over the groups' demands, then max-min with equal weights over the
// demands of the leases of l's group.
func (p *leasePool) shareOf(l *lease, capacity int64) int64 {
	groups := make([]claim, len(p.groups))
	gi := 0
	for i, g := range p.groups {
		groups[i] = claim{weight: g.weight(), demand: g.demand}
		if g.name == l.group {
			gi = i
		}
	}
	// Weights are at most MaxLeaseWeight*MaxLeasesPerLimit in total:
	// waterFill cannot fail.
	_ = waterFill(capacity, groups)
	g := p.groups[gi]
	members := make([]claim, len(g.leases))
	li := 0
	for i, m := range g.leases {
		members[i] = claim{weight: 1, demand: m.demand}
		if m == l {
			li = i
		}
	}
	_ = waterFill(groups[gi].share, members)
	return members[li].share
}

// grant issues a new grant to active lease l at nowNanos for ttlNanos;
// credit is what l's report on its previous grant just put back in free
// (0 for a new lease):
//
//	share   = l's fair share (shareOf) of the rate r = 10^12/I milli-permits/s
//	horizon = min(ttl, O*I)
//	fair    = floor((share*horizon + carry) / (r*I)), the remainder is the new carry
//	claims  = min(sum of entitlementAt(now) over the other active leases, floor(C/2))
//	avail   = max(entitled_l, (free - credit) - claims)
//	permits = min(free, O - outstanding, fair, credit + avail)
//
// share/r is l's fraction of the rate and horizon/I the permits minted in
// the horizon, so fair is l's fraction of them; capping the horizon at O*I
// makes the fair grants of all leases add up to at most O, so that an early
// renewer cannot take the others' part of O. The carry lets a share worth
// less than a permit per grant earn one every few grants.
//
// The entitlement makes the division of a scarce pool follow the shares:
// l's net intake (permits - credit) is at most what its share earned since
// its previous grant and has not taken yet (entitled), unless the pool
// holds more than the other leases' entitlements, in which case l may
// take that excess (the pool is not scarce: capacity nobody claims is
// not stranded). At most half of C is held for the others' claims, so that
// claims of leases that do not come for them (a holder that went silent,
// one that renews without spending) cannot keep the pool full, and
// minting stopped, while a renewer is refused. Without the entitlement a
// grant was first come, first served: when
// the rate is saturated the free pool holds only what was minted since
// the previous renewal, so which lease got it depended on the order of the
// renewals, not on the shares, and a lease that fell behind (a late first
// grant, renewals reordered by the network) could take many periods to
// catch up. The net intake is then taken out of the entitlement, which is
// kept within [0, cap] (see entitlementAt).
func (p *leasePool) grant(nowNanos int64, l *lease, ttlNanos, intervalNanos, credit int64) {
	capacity := milliPermitsPerSecNanos / intervalNanos // >= 16: interval <= MaxLeasedIntervalNanos
	o := p.maxOutstanding(intervalNanos)
	l.entitled, l.entitledRem = l.entitlementAt(nowNanos, capacity, intervalNanos, o)
	share := p.shareOf(l, capacity)
	horizon := grantHorizon(ttlNanos, intervalNanos, o)
	hi, lo := bits.Mul64(uint64(share), uint64(horizon))
	lo, c := bits.Add64(lo, uint64(l.carry), 0)
	hi += c
	den := uint64(capacity) * uint64(intervalNanos) // <= 10^12
	// The quotient is at most horizon/interval + 1 < 2^63, so hi < den.
	fair, carry := bits.Div64(hi, lo, den)
	avail := l.entitled
	if surplus := p.surplusFor(nowNanos, l, credit, capacity, intervalNanos, o); surplus > avail {
		avail = surplus
	}
	permits := min(p.free, max(0, o-p.outstanding), int64(fair), credit+avail)
	p.free -= permits
	p.outstanding += permits
	l.permits, l.share, l.carry = permits, share, int64(carry)
	l.grantedAtNanos, l.expiresAtNanos = nowNanos, nowNanos+ttlNanos
	// Take the net intake out of the entitlement, within [0, cap] at the
	// new share and TTL (a net intake above the entitlement came out of
	// the excess; a negative one, a credit larger than the new grant, is
	// permits given back unspent).
	e := l.entitled - (permits - credit)
	if limit := entitlementCap(share, horizon, den); e >= limit {
		e, l.entitledRem = limit, 0
	}
	l.entitled = max(0, e)
}

// grantHorizon is min(ttl, O*I): the span of minting a fair grant is a
// fraction of.
func grantHorizon(ttlNanos, intervalNanos, o int64) int64 {
	if o <= (ttlNanos-1)/intervalNanos {
		return o * intervalNanos // < ttl: no overflow
	}
	return ttlNanos
}

// entitlementCap is the most a lease's entitlement holds: its fair grant
// at share over horizon, rounded up (so that a share worth less than a
// permit per grant can still be entitled to one), and at most horizon (a
// number of nanoseconds: far above ceil(horizon/I) for a current share;
// the bound Restore checks).
func entitlementCap(share, horizon int64, den uint64) int64 {
	hi, lo := bits.Mul64(uint64(share), uint64(horizon))
	lo, c := bits.Add64(lo, den-1, 0)
	hi += c
	// share <= 10^12 (a share from before a change of I may exceed the
	// current capacity), horizon <= 60 s and den > 9*10^11: q < 2^37.
	q, _ := bits.Div64(hi, lo, den)
	return min(int64(q), horizon)
}

// entitlementAt returns active lease l's entitlement at nowNanos (>= its
// grant time), and its remainder: the entitlement as of its grant plus
// what its share earned since, floor((share*(now - grantedAt) +
// entitledRem) / (r*I)), at most entitlementCap at its share and the
// horizon of its grant (the remainder is then 0). A new lease (share 0)
// is entitled to nothing.
func (l *lease) entitlementAt(nowNanos, capacity, intervalNanos, o int64) (entitled, rem int64) {
	if l.share == 0 {
		return l.entitled, l.entitledRem
	}
	den := uint64(capacity) * uint64(intervalNanos)
	// now - grantedAt < the grant's TTL <= MaxLeaseTTLNanos (an active
	// lease is unexpired) and share <= 10^12: the quotient is below 2^37.
	hi, lo := bits.Mul64(uint64(l.share), uint64(nowNanos-l.grantedAtNanos))
	lo, c := bits.Add64(lo, uint64(l.entitledRem), 0)
	hi += c
	earned, r := bits.Div64(hi, lo, den)
	limit := entitlementCap(l.share, grantHorizon(l.expiresAtNanos-l.grantedAtNanos, intervalNanos, o), den)
	if e := l.entitled + int64(earned); e < limit {
		return e, int64(r)
	}
	return limit, 0
}

// surplusFor is what lease l may take beyond its own entitlement at
// nowNanos: the free pool without l's just-credited permits, minus the
// entitlements of every other active lease (at most floor(C/2) in all),
// or 0 if they claim it all.
func (p *leasePool) surplusFor(nowNanos int64, l *lease, credit, capacity, intervalNanos, o int64) int64 {
	reserve := p.burst(intervalNanos) / 2
	var claims int64
	for _, g := range p.groups {
		for _, m := range g.leases {
			if m == l {
				continue
			}
			e, _ := m.entitlementAt(nowNanos, capacity, intervalNanos, o)
			if claims += e; claims >= reserve {
				return max(0, p.free-credit-reserve)
			}
		}
	}
	return max(0, p.free-credit-claims)
}

// settleReport settles active lease l's current grant as its holder
// reports it: spent permits are settled, stolen-out permits linger until
// the grant's expiry, the rest goes back to free. It returns the permits
// credited to free. spent+out <= l.permits.
func (p *leasePool) settleReport(l *lease, r Report) int64 {
	spent, out, in := r.SpentPermits, r.StolenOutPermits, r.StolenInPermits
	credit := l.permits - spent - out
	p.spent += spent
	p.free += credit
	p.outstanding -= l.permits - out // out stays outstanding, now lingering
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

// info returns the view of l.
func (l *lease) info() LeaseInfo {
	return LeaseInfo{
		ID: l.id, Epoch: l.epoch, Active: l.active, Holder: l.holder, Group: l.group, Weight: l.weight,
		DemandMilliPermitsPerSec: l.demand, ShareMilliPermitsPerSec: l.share,
		Permits: l.permits, LingeringPermits: l.lingeringPermits(),
		GrantedAtNanos: l.grantedAtNanos, ExpiresAtNanos: l.expiresAtNanos, StolenInPermits: l.stolenIn,
	}
}

// info returns the view of p with minting brought up to nowNanos (without
// changing p).
func (p *leasePool) info(name string, nowNanos, intervalNanos int64) LeasePoolInfo {
	v := *p
	v.accrue(nowNanos, intervalNanos)
	active := len(p.byHolder)
	return LeasePoolInfo{
		Limit:                 name,
		BurstPermits:          p.burst(intervalNanos),
		MaxOutstandingPermits: p.maxOutstanding(intervalNanos),
		BurstSpec:             p.burstSpec,
		MaxOutstandingSpec:    p.maxOutSpec,
		IntervalNanos:         intervalNanos,
		MintedPermits:         v.minted,
		FreePermits:           v.free,
		OutstandingPermits:    v.outstanding,
		SettledPermits:        v.spent + v.stolen + v.expired,
		SpentPermits:          v.spent,
		StolenPermits:         v.stolen,
		ExpiredPermits:        v.expired,
		StolenInPermits:       v.stolenIn,
		ActiveLeases:          active,
		LingeringLeases:       len(p.leases) - active,
		LeasesOpened:          p.opened,
		Renewals:              p.renewals,
		Returns:               p.returns,
		Expirations:           p.expirations,
		Fenced:                p.fenced,
	}
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
