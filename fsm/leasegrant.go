package fsm

import (
	"math/bits"
)

// leasegrant.go: the size of a grant (formula and reasons in grant's doc).
//
//	permits = min(free, O - outstanding, fair, credit + avail)
//
// fair is the lease's weighted max-min share (shareOf) of the permits minted
// over the grant's horizon; avail is its entitlement, or the free pool
// beyond the other leases' entitlements if that is more.

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
	// Within the group every member weighs 1: unitShare is waterFill's
	// answer for l without sorting the members' claims, here on the
	// group's kept sorted demands.
	g := p.groups[gi]
	return unitShareSorted(groups[gi].share, g.sortedDemands(), l.demand, func(threshold int64) uint64 {
		var before uint64
		for _, m := range g.leases {
			if m == l {
				break
			}
			if m.demand >= threshold {
				before++
			}
		}
		return before
	})
}

// grant issues a new grant to active lease l at nowNanos for ttlNanos;
// credit is what l's report on its previous grant just put back in free
// and kept what it kept of it, still outstanding (both 0 for a new
// lease):
//
//	share   = l's fair share (shareOf) of the rate r = 10^12/I milli-permits/s
//	horizon = min(ttl, O*I)
//	fair    = floor((share*horizon + carry) / (r*I)), the remainder is the new carry
//	claims  = sum of entitlementAt(minted) over the other active leases
//	avail   = max(entitled_l, (free - credit) - claims)
//	draw    = max(0, min(free, O - outstanding, fair - kept, credit + avail))
//	permits = kept + draw
//
// Kept permits are treated as if the report had credited them and the
// grant had taken them back first: the grant holds them whatever else it
// holds (the holder may have spent them already), and draws from free
// only what brings it to the same size as without them. So the in-flight
// allowance changes no share and no grant size; it only keeps a renewing
// holder's permits spendable across the renewal.
//
// share/r is l's fraction of the rate and horizon/I the permits minted in
// the horizon, so fair is l's fraction of them; capping the horizon at O*I
// makes the fair grants of all leases add up to at most O, so that an early
// renewer cannot take the others' part of O. The carry lets a share worth
// less than a permit per grant earn one every few grants.
//
// The entitlement makes the division of a scarce pool follow the shares,
// whatever the order and the phase of the renewals: l's net intake
// (draw - credit) is at most what it is entitled to, unless the pool
// holds more than every other active lease's entitlement, in which case l
// may take that excess (capacity nobody claims is not stranded). A lease
// is entitled to its share's fraction of every permit the pool MINTS (not
// of the time that passes) while it is active, up to its fair grant
// rounded up; its net intakes are taken out. So the entitlements of the
// leases together never hold more than was minted for them, and when the
// pool is scarce (the fleet renews more slowly than min(C, O)*I, and the
// pool stops minting at C between renewals) every lease still finds its
// fraction of what was minted, whether it renews first or last. (Accrued
// over time instead, every entitlement reached its cap in such a fleet,
// the claims exceeded the pool, and the first renewers took the part of
// the last: 64/33/3 % for three equal groups renewing in a fixed order.)
// A lease whose holder went silent keeps its claim, at most its fair
// grant, until it expires. Without entitlements a grant was first come,
// first served: which lease got the permits minted since the previous
// renewal depended on the order of the renewals, not on the shares, and
// a lease that fell behind (a late first grant, renewals reordered by the
// network) could take many periods to catch up. The net intake is taken
// out of the entitlement, which is kept within [0, cap] (see
// entitlementAt).
func (p *leasePool) grant(nowNanos int64, l *lease, ttlNanos, intervalNanos, credit, kept int64) {
	capacity := milliPermitsPerSecNanos / intervalNanos // >= 16: interval <= MaxLeasedIntervalNanos
	o := p.maxOutstanding(intervalNanos)
	joining := l.share == 0 // a new lease, or one whose share was 0: nothing accrued
	l.entitled, l.entitledRem = l.entitlementAt(p.minted, capacity, intervalNanos, o)
	l.mintMark = p.minted
	share := p.shareOf(l, capacity)
	horizon := grantHorizon(ttlNanos, intervalNanos, o)
	if joining && share > 0 {
		l.entitled = min(p.cedeTo(l, share, capacity, intervalNanos, o), entitlementCap(share, horizon, uint64(capacity)*uint64(intervalNanos)))
	}
	hi, lo := bits.Mul64(uint64(share), uint64(horizon))
	lo, c := bits.Add64(lo, uint64(l.carry), 0)
	hi += c
	den := uint64(capacity) * uint64(intervalNanos) // <= 10^12
	// The quotient is at most horizon/interval + 1 < 2^63, so hi < den.
	fair, carry := bits.Div64(hi, lo, den)
	// fair < 2^63 and kept <= a grant: no overflow.
	room := min(p.free, o-p.outstanding, int64(fair)-kept)
	avail := l.entitled
	if credit+avail < room { // else the surplus cannot change the draw: skip the walk
		avail = max(avail, p.surplusFor(l, credit, avail, capacity, intervalNanos, o))
	}
	draw := max(0, min(room, credit+avail))
	p.free -= draw
	p.outstanding += draw
	l.permits, l.share, l.carry = kept+draw, share, int64(carry)
	l.grantedAtNanos, l.expiresAtNanos = nowNanos, nowNanos+ttlNanos
	// Take the net intake out of the entitlement, within [0, cap] at the
	// new share and TTL (a net intake above the entitlement came out of
	// the excess; a negative one, a credit larger than the new grant, is
	// permits given back unspent).
	e := l.entitled - (draw - credit)
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

// entitlementAt returns active lease l's entitlement once the pool has
// minted mintedTotal permits in all, and its remainder: the entitlement
// as of its last grant plus its share's fraction of the permits minted
// since, floor((share*(mintedTotal - mintMark) + entitledRem) / r), at
// most entitlementCap at its share and the horizon of its grant (the
// remainder is then 0). A new lease (share 0) is entitled to nothing.
func (l *lease) entitlementAt(mintedTotal, capacity, intervalNanos, o int64) (entitled, rem int64) {
	if l.share == 0 {
		return l.entitled, l.entitledRem
	}
	limit := l.entitlementLimit(capacity, intervalNanos, o)
	hi, lo := bits.Mul64(uint64(l.share), uint64(mintedTotal-l.mintMark))
	lo, c := bits.Add64(lo, uint64(l.entitledRem), 0)
	hi += c
	if hi >= uint64(capacity) {
		return limit, 0 // the quotient is at least 2^64: far above the cap
	}
	earned, r := bits.Div64(hi, lo, uint64(capacity))
	if earned < uint64(limit) {
		if e := l.entitled + int64(earned); e < limit {
			return e, int64(r)
		}
	}
	return limit, 0
}

// entitlementLimit is entitlementCap at l's share over its grant's
// horizon, from l.capMemo when its inputs are the same.
func (l *lease) entitlementLimit(capacity, intervalNanos, o int64) int64 {
	span := l.expiresAtNanos - l.grantedAtNanos
	m := &l.capMemo
	if m.set && m.share == l.share && m.spanNanos == span && m.intervalNanos == intervalNanos && m.o == o && m.capacity == capacity {
		return m.value
	}
	v := entitlementCap(l.share, grantHorizon(span, intervalNanos, o), uint64(capacity)*uint64(intervalNanos))
	*m = capMemo{set: true, share: l.share, spanNanos: span, intervalNanos: intervalNanos, o: o, capacity: capacity, value: v}
	return v
}

// surplusFor is what lease l may take beyond its own entitlement: the
// free pool without l's just-credited permits, minus the entitlements of
// every other active lease, or 0 if they claim it all. Its caller takes
// the larger of it and l's entitlement, floor: once the others' claims
// bring it to floor or below, the rest of the walk cannot make it count,
// and it returns what it has (at most floor). Each entitlement
// is at most its lease's horizon in nanoseconds (< 2^36) and a limit
// holds at most MaxLeasesPerLimit leases: the sum cannot overflow.
func (p *leasePool) surplusFor(l *lease, credit, floor, capacity, intervalNanos, o int64) int64 {
	unclaimed := p.free - credit
	for _, g := range p.groups {
		for _, m := range g.leases {
			if unclaimed <= floor {
				return max(0, unclaimed) // claimed down to floor: the rest cannot raise it
			}
			if m != l {
				e, _ := m.entitlementAt(p.minted, capacity, intervalNanos, o)
				unclaimed -= e
			}
		}
	}
	return max(0, unclaimed)
}

// cedeTo moves to joining lease l its share's fraction of every other
// active lease's entitlement (each cedes floor(e*share/capacity)) and
// returns the sum. So a worker that joins a saturated fleet, or comes back
// after a partition, is entitled at once to its part of what the others
// claim, instead of getting nothing until its first renewal, and the
// claims together stay what they were (they never hold more than was
// minted for them: the order of renewals still does not matter). It runs
// only when a lease joins; the others' entitlements are brought up to the
// pool's minted count first.
//
// Each other lease's share, the rate at which its entitlement accrues
// until it renews, shrinks by the same fraction (to at least 1 milli-
// permit/s): l's part of future minting comes out of theirs. Without it a
// fleet that starts together accrued at stale shares (the first lease at
// the whole rate, alone when it was granted) that added up to more than
// the minting, and the last to renew found the pool claimed: 1 permit of
// 400 for the third of three groups at a 4 s TTL. Shares still grow back
// only at renewals (a renewal's share is its max-min share then), so the
// shares of the active leases add up to at most the rate after a join if
// they did before it; a share that grows at a renewal before the others
// shrink can overshoot the rate until they renew, which costs fairness
// for a period, never the bound (entitlements only divide what is free).
func (p *leasePool) cedeTo(l *lease, share, capacity, intervalNanos, o int64) int64 {
	f := uint64(min(share, capacity))
	var taken int64
	for _, g := range p.groups {
		for _, m := range g.leases {
			if m == l {
				continue
			}
			e, rem := m.entitlementAt(p.minted, capacity, intervalNanos, o)
			hi, lo := bits.Mul64(uint64(e), f)
			q, _ := bits.Div64(hi, lo, uint64(capacity)) // <= e: hi < capacity
			m.entitled, m.entitledRem, m.mintMark = e-int64(q), rem, p.minted
			taken += int64(q)
			if m.share > 0 { // a share of 0 accrues nothing: it stays 0
				// m.share <= 10^12 and f <= capacity: hi < capacity.
				hi, lo = bits.Mul64(uint64(m.share), f)
				d, _ := bits.Div64(hi, lo, uint64(capacity))
				m.share = max(1, m.share-int64(d))
			}
		}
	}
	return taken
}
