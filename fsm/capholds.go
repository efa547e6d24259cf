package fsm

import (
	"maps"
	"slices"

	"github.com/permitd/permitd/bucket"
)

// capholds.go: an in-flight cap's holds belong to the reservations that
// took them, not to the limit's current configuration.
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
	if !ok {
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
