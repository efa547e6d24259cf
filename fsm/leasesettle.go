package fsm

import (
	"slices"
)

// leasesettle.go: settling a reported grant. Every permit of a grant leaves
// outstanding exactly once, so that after every entry
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
