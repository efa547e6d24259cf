package fsm

import (
	"slices"
	"testing"
)

// checkSurplusFloor: for every active lease of every leased limit of f,
// and floors from below 0 to above the pool, the walk that stops once the
// others' claims bring the surplus to the floor gives the grant what the
// full walk gives: max(floor, walk stopped at floor) = max(floor, full
// walk). (A floor of -1 is the full walk: it stops only at a claim past
// zero, where the result is 0 either way.)
func checkSurplusFloor(t *testing.T, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := &f.st
	for _, name := range s.names {
		lim := s.limits[name]
		p := lim.pool
		if p == nil {
			continue
		}
		interval := lim.cfg.IntervalNanos
		if interval <= 0 || interval > MaxLeasedIntervalNanos {
			continue
		}
		capacity := milliPermitsPerSecNanos / interval
		o := p.maxOutstanding(interval)
		for _, g := range p.groups {
			if g.sortedOK {
				want := make([]int64, 0, len(g.leases))
				for _, m := range g.leases {
					want = append(want, m.demand)
				}
				slices.Sort(want)
				if !slices.Equal(g.sorted, want) {
					t.Fatalf("limit %q group %q: kept sorted demands %v, the members' %v", name, g.name, g.sorted, want)
				}
			}
			for _, l := range g.leases {
				want := entitlementCap(l.share, grantHorizon(l.expiresAtNanos-l.grantedAtNanos, interval, o), uint64(capacity)*uint64(interval))
				if got := l.entitlementLimit(capacity, interval, o); got != want {
					t.Fatalf("limit %q lease %d: memoised entitlement cap %d, computed %d (memo %+v)", name, l.id, got, want, l.capMemo)
				}
				for _, credit := range []int64{0, 1, p.free / 2, p.free} {
					full := p.surplusFor(l, credit, -1, capacity, interval, o)
					for _, floor := range []int64{0, 1, l.entitled, full - 1, full, full + 1, p.free} {
						if got := max(floor, p.surplusFor(l, credit, floor, capacity, interval, o)); got != max(floor, full) {
							t.Fatalf("limit %q lease %d, credit %d, floor %d: the stopped walk gives %d, the full walk %d", name, l.id, credit, floor, got, max(floor, full))
						}
					}
				}
			}
		}
	}
}

// TestSurplusFloorChangesNoGrant walks reachable states (the reachable-
// state walk's commands: changes of rate and algorithm, deletes and time
// jumps included) and checks checkSurplusFloor after every step, and
// that every lease's memoised entitlement cap is the one its inputs give
// now and every group's kept sorted demands are its members' now (the
// grants after each step have just used them).
func TestSurplusFloorChangesNoGrant(t *testing.T) {
	for seed := range uint64(8) {
		w := newWalker(t, seed)
		for step := range 400 {
			kind := w.step()[0]
			checkSurplusFloor(t, w.f)
			if t.Failed() {
				t.Fatalf("seed %d step %d (%s)", seed, step, kind)
			}
		}
	}
}
