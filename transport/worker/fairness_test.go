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
// fleet spends, with the fake register; and with a real 3-node raft
// register (poolSpecs), where the shares are checked against the max-min
// division of the demands the register was sent.
func TestFleetConvergesToMaxMinFairShares(t *testing.T) {
	for _, tc := range poolSpecs() {
		t.Run(tc.name, func(t *testing.T) { converges(t, tc.spec) })
	}
}

// poolSpecs are the fleets the scenario tests run on: the default pool
// and the tight pool (C = O = 60, TTL 150 ms renewed every 50 ms) on the
// fake register, and a pool with twice the TTL, renewal period and
// C = O = 1200 on a real 3-node register.
func poolSpecs() []struct {
	name string
	spec fleetSpec
} {
	tight := baseSpec()
	tight.burst, tight.maxOut = 60, 60
	tight.ttl, tight.renew = 150*time.Millisecond, 50*time.Millisecond
	// On the cluster a register round trip is a raft commit (perhaps
	// forwarded), tens of milliseconds on a loaded machine, during which a
	// renewing worker spends nothing of its grant: a longer period keeps
	// that gap a small part of it; C = O = two TTLs of permits keeps the
	// pool from binding.
	cluster := baseSpec()
	cluster.register = clusterKind
	cluster.ttl, cluster.renew = 600*time.Millisecond, 300*time.Millisecond
	cluster.burst, cluster.maxOut = 1200, 1200
	return []struct {
		name string
		spec fleetSpec
	}{{"default pool", baseSpec()}, {"tight pool", tight}, {"default pool on a 3-node register", cluster}}
}

func converges(t *testing.T, spec fleetSpec) {
	f := startFleet(t, spec)
	f.drive()

	// Converge: every worker renews for 750 ms on measured demands (5
	// renewals at 150 ms), then measure over 1.5 s of renewals, and over at
	// least 10 renewals. A saturated worker spends each grant as it
	// arrives, so each worker's spending is counted between two of its own
	// register answers (renewalAlignedRates), never across a cut grant.
	warm, measure := uint64(750*time.Millisecond/spec.renew), max(10, uint64(1500*time.Millisecond/spec.renew))
	waitFor(t, 5*time.Second, "warm-up renewals", func() bool { return f.minRenewals(all) >= warm })
	from := f.nowNanos()
	startRenewals := f.minRenewals(all)
	// The register's shares follow measured demands, which are noisy at low
	// rates over short periods: average them over the window. (On the
	// cluster a sample is a linearizable read, a raft barrier: one every
	// 20 ms at most.)
	groups := []string{"A", "B", "C"}
	shares, fairOfReported, samples := map[string]float64{}, map[string]float64{}, 0.0
	lastSample := int64(0)
	waitFor(t, 5*time.Second, "measurement renewals", func() bool {
		if now := f.nowNanos(); spec.register != clusterKind || samples == 0 || now-lastSample >= int64(20*time.Millisecond) {
			lastSample = now
			got, fair := f.registerSharesAndFair(groups)
			for _, g := range groups {
				shares[g] += got[g]
				fairOfReported[g] += fair[g]
			}
			samples++
		}
		return f.minRenewals(all) >= startRenewals+measure
	})
	to := f.nowNanos()
	f.stopDrivers()
	if samples == 0 {
		t.Fatalf("no sample of the register's shares")
	}
	for _, g := range groups {
		shares[g] /= samples
		fairOfReported[g] /= samples
	}

	want := expectedShares(t, spec, groups)
	wantShare := reportedShares(t, spec, groups)
	// On the cluster the load generators share two loaded cores with three
	// raft nodes and fall behind, so the demands the workers measure (and
	// report) are below the nominal ones: the register's shares are
	// compared with the max-min division of the demands it was sent. The
	// spending division is held to 5 % everywhere: the register bounds
	// each lease's net intake by what its share earned (see fsm's grant),
	// so a worker whose first grants came late catches up at its next
	// renewals instead of living on what the others leave.
	shareTol, partTol := 0.05, 0.05
	if spec.register == clusterKind {
		wantShare = fairOfReported
	}
	// A worker spends nothing of a grant whose report is in flight (the
	// register already counts its unspent permits as credited), so a group
	// that wants less than its fair share loses the asks that arrive while
	// its renewal is in flight: at most the slowest round trip per renewal
	// period. Saturated groups make it up by pacing catch-up; unsaturated
	// ones are allowed that much less.
	var slowest int64
	for _, l := range f.links {
		slowest = max(slowest, l.slowestNanos.Load())
	}
	gapFraction := float64(slowest) / float64(spec.renew)
	demandOf := map[string]float64{}
	for _, ws := range spec.workers {
		demandOf[ws.group] += ws.demand
	}
	rates := f.renewalAlignedRates(from, to)
	var total float64
	for _, r := range rates {
		total += r
	}
	for _, g := range groups {
		var got float64
		for i, r := range rates {
			if f.inGroup(g)(i) {
				got += r
			}
		}
		part, wantPart := got/total, want[g]/spec.rate
		t.Logf("group %s: register share %.1f permits/s on average (max-min of reported demands %.0f: %s); spent %.1f permits/s = %.1f%% of the fleet's spending (max-min of true demands %.0f: %s)",
			g, shares[g], wantShare[g], pct(shares[g], wantShare[g]), got, 100*part, want[g], pct(part, wantPart))
		if math.Abs(shares[g]-wantShare[g]) > shareTol*wantShare[g] {
			t.Errorf("group %s has a share of %.1f permits/s, want %.0f within %.0f%%", g, shares[g], wantShare[g], 100*shareTol)
		}
		low := partTol
		if want[g] >= demandOf[g] { // unsaturated: it gets all it asks for
			low += gapFraction
		}
		if part > wantPart*(1+partTol) || part < wantPart*(1-low) {
			t.Errorf("group %s spent %.1f%% of the fleet's permits, want %.1f%% within +%.0f%%/-%.0f%% (renewals in flight %.0f%% of the time)",
				g, 100*part, 100*wantPart, 100*partTol, 100*low, 100*gapFraction)
		}
	}
	if util := total / spec.rate; util < 0.7 {
		if spec.register == clusterKind {
			t.Logf("the fleet spent %.0f%% of the rate (the load generators fell behind)", 100*util)
		} else {
			t.Errorf("the fleet spent %.0f%% of the rate (want at least 70%%)", 100*util)
		}
	}
	for i, w := range f.workers {
		s := w.Stats()
		t.Logf("%s: share %d milli/s, demand %d milli/s, leased %d, spent %d (stolen %d), stolen in %d out %d, credited %d, expired %d; leases %d, renewals %d, fenced %d, failed calls %d",
			spec.workers[i].name, s.ShareMilliPermitsPerSec, s.DemandMilliPermitsPerSec, s.LeasedPermits, s.SpentPermits,
			s.SpentStolenPermits, s.StolenInPermits, s.StolenOutPermits, s.CreditedPermits, s.ExpiredUnusedPermits,
			s.Leases, s.Renewals, s.Fenced, s.RegisterFails)
	}
	t.Logf("slowest register round trip: %v", time.Duration(slowest))
	f.checkGrants()
	f.checkBound()
}

// renewalAlignedRates returns each worker's spending, in permits per
// second, between the first and the last answer its register link
// delivered within [from, to). A saturated worker spends each grant as it
// arrives, so a window cut at the same times for every worker counts one
// grant more or less for some of them: over 10 renewals up to a tenth of
// a worker's spending, which moved a group's part of the fleet's by 6 %
// in a CI run. Between two of its own answers a window holds exactly the
// grants of the renewals inside it.
func (f *fleet) renewalAlignedRates(from, to int64) []float64 {
	f.t.Helper()
	rates := make([]float64, len(f.workers))
	for i, l := range f.links {
		at := l.answersWithin(f.base.Add(time.Duration(from)), f.base.Add(time.Duration(to)))
		if len(at) < 2 {
			f.t.Fatalf("%s: %d register answers in the measurement window, want 2 or more", f.spec.workers[i].name, len(at))
		}
		first, last := int64(at[0].Sub(f.base)), int64(at[len(at)-1].Sub(f.base))
		rates[i] = rate(f.spent(func(j int) bool { return j == i }, first, last), first, last)
	}
	return rates
}
