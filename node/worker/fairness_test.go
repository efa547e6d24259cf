package worker

import (
	"math"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

// expectedShares returns the max-min fair share of each group of spec, in
// permits per second, from the true demands.
func expectedShares(t *testing.T, spec fleetSpec, groups []string) map[string]float64 {
	t.Helper()
	return maxMin(t, spec, groups, 1)
}

// reportedShares returns the max-min fair share of each group of spec from
// the demands the workers report: measured plus the 10 % headroom (a group
// that wants less than its fair share is given a little more than it
// spends; the others split the rest).
func reportedShares(t *testing.T, spec fleetSpec, groups []string) map[string]float64 {
	t.Helper()
	return maxMin(t, spec, groups, 1+1.0/demandHeadroomDiv)
}

func maxMin(t *testing.T, spec fleetSpec, groups []string, factor float64) map[string]float64 {
	t.Helper()
	demand := map[string]float64{}
	for _, ws := range spec.workers {
		demand[ws.group] += ws.demand * factor
	}
	claims := make([]fsm.GroupDemand, len(groups))
	for i, g := range groups {
		claims[i] = fsm.GroupDemand{Group: g, Weight: 1, Demand: int64(demand[g])}
	}
	shares, err := fsm.FairShares(int64(spec.rate), claims)
	if err != nil {
		t.Fatalf("FairShares: %v", err)
	}
	out := map[string]float64{}
	for i, g := range groups {
		out[g] = float64(shares[i])
	}
	return out
}

// TestFleetConvergesToMaxMinFairShares: 6 workers in 3 groups whose
// demands are 10 %, 50 % and 200 % of the rate converge, within a few
// renewal periods, to their max-min fair shares: the parts of the fleet's
// spending each group gets are within 5 % of the max-min division of the
// true demands (100, 450 and 450 permits/s), and the shares the register
// gives are within 5 % of the max-min division of the reported demands
// (with 10 % headroom: 110, 445, 445). The fleet
// stays within the over-grant bound, and every permit is spent while its
// grant is live at the register.
//
// (Absolute rates are logged, not asserted within 5 %: on a loaded
// machine the load generators themselves fall behind, which changes the
// total but not the division.)
//
// It runs on the pool of the other tests (C = O = 300, a TTL of permits,
// renewed every 150 ms) and on a tight pool (C = O = 60, TTL 150 ms
// renewed every 50 ms), where the over-grant bound is close to what the
// fleet spends.
func TestFleetConvergesToMaxMinFairShares(t *testing.T) {
	tight := baseSpec()
	tight.burst, tight.maxOut = 60, 60
	tight.ttl, tight.renew = 150*time.Millisecond, 50*time.Millisecond
	for _, tc := range []struct {
		name string
		spec fleetSpec
	}{{"default pool", baseSpec()}, {"tight pool", tight}} {
		t.Run(tc.name, func(t *testing.T) { converges(t, tc.spec) })
	}
}

func converges(t *testing.T, spec fleetSpec) {
	f := startFleet(t, spec)
	f.drive()

	// Converge: every worker renews for 750 ms on measured demands (5
	// renewals at 150 ms), then measure over 1.5 s of renewals.
	warm, measure := uint64(750*time.Millisecond/spec.renew), uint64(1500*time.Millisecond/spec.renew)
	waitFor(t, 5*time.Second, "warm-up renewals", func() bool { return f.minRenewals(all) >= warm })
	from := f.nowNanos()
	startRenewals := f.minRenewals(all)
	// The register's shares follow measured demands, which are noisy at low
	// rates over short periods: average them over the window.
	shares, samples := map[string]float64{}, 0.0
	waitFor(t, 5*time.Second, "measurement renewals", func() bool {
		for g, v := range f.registerShares() {
			shares[g] += v
		}
		samples++
		return f.minRenewals(all) >= startRenewals+measure
	})
	to := f.nowNanos()
	f.stopDrivers()
	for g := range shares {
		shares[g] /= samples
	}

	groups := []string{"A", "B", "C"}
	want := expectedShares(t, spec, groups)
	wantShare := reportedShares(t, spec, groups)
	total := float64(f.spent(all, from, to))
	for _, g := range groups {
		n := float64(f.spent(f.inGroup(g), from, to))
		got, part, wantPart := rate(int64(n), from, to), n/total, want[g]/spec.rate
		t.Logf("group %s: register share %.1f permits/s on average (max-min of reported demands %.0f: %s); spent %.1f permits/s = %.1f%% of the fleet's spending (max-min of true demands %.0f: %s)",
			g, shares[g], wantShare[g], pct(shares[g], wantShare[g]), got, 100*part, want[g], pct(part, wantPart))
		if math.Abs(shares[g]-wantShare[g]) > 0.05*wantShare[g] {
			t.Errorf("group %s has a share of %.1f permits/s, want %.0f within 5%%", g, shares[g], wantShare[g])
		}
		if math.Abs(part-wantPart) > 0.05*wantPart {
			t.Errorf("group %s spent %.1f%% of the fleet's permits, want %.1f%% within 5%%", g, 100*part, 100*wantPart)
		}
	}
	if util := rate(int64(total), from, to) / spec.rate; util < 0.7 {
		t.Errorf("the fleet spent %.0f%% of the rate (want at least 70%%)", 100*util)
	}
	for i, w := range f.workers {
		s := w.Stats()
		t.Logf("%s: share %d milli/s, demand %d milli/s, leased %d, spent %d (stolen %d), stolen in %d out %d, credited %d, expired %d",
			spec.workers[i].name, s.ShareMilliPermitsPerSec, s.DemandMilliPermitsPerSec, s.LeasedPermits, s.SpentPermits,
			s.SpentStolenPermits, s.StolenInPermits, s.StolenOutPermits, s.CreditedPermits, s.ExpiredUnusedPermits)
	}
	f.checkGrants()
	f.checkBound()
}
