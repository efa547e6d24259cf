package main

import (
	"fmt"
	"math"
	"slices"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/client"
)

// The pure part of the measurement: fair shares, fairness errors,
// convergence and growth exponents. Everything here works on values (a
// register's lease view, demands), never on a cluster.

// groupView is one group as the register sees it: the sum of its active
// leases' last reported demands and current shares, in milli-permits per
// second, and its weight.
type groupView struct {
	Group          string
	Weight         int64
	DemandMilli    int64
	ShareMilli     int64
	ActiveLeases   int
	HoldersInGroup []string
}

// groupsOf sums the active leases of a lease view by group (sorted by
// group name). A group's weight is the largest of its leases' (the fleet
// gives every lease of a group the same weight).
func groupsOf(leases []client.LeaseState) []groupView {
	by := map[string]*groupView{}
	for _, l := range leases {
		if !l.Active {
			continue
		}
		g := by[l.Group]
		if g == nil {
			g = &groupView{Group: l.Group}
			by[l.Group] = g
		}
		g.Weight = max(g.Weight, l.Weight, 1)
		g.DemandMilli += l.DemandMilliPerSec
		g.ShareMilli += l.ShareMilliPerSec
		g.ActiveLeases++
		g.HoldersInGroup = append(g.HoldersInGroup, l.Holder)
	}
	out := make([]groupView, 0, len(by))
	for _, g := range by {
		slices.Sort(g.HoldersInGroup)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b groupView) int {
		switch {
		case a.Group < b.Group:
			return -1
		case a.Group > b.Group:
			return 1
		}
		return 0
	})
	return out
}

// fairShares is the register's own division (fsm.FairShares, weighted
// max-min over groups) of rateMilli among the given group demands, by
// group name.
func fairShares(rateMilli int64, demands map[string]int64, weights map[string]int64) (map[string]int64, error) {
	names := make([]string, 0, len(demands))
	for g := range demands {
		names = append(names, g)
	}
	slices.Sort(names)
	claims := make([]fsm.GroupDemand, len(names))
	for i, g := range names {
		w := weights[g]
		if w < 1 {
			w = 1
		}
		claims[i] = fsm.GroupDemand{Group: g, Weight: w, Demand: demands[g]}
	}
	shares, err := fsm.FairShares(rateMilli, claims)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(names))
	for i, g := range names {
		out[g] = shares[i]
	}
	return out, nil
}

// fairnessError is the largest, over the groups of fair, of
// |share - fair| / fair, where share is the sum of the group's active
// leases' shares in the view (0 for a group without one). A group of the
// view missing from fair (it should have no share) counts share/rate.
// Groups whose fair share is 0 count |share| / rate. It also returns the
// group with the largest error.
func fairnessError(view []groupView, fair map[string]int64, rateMilli int64) (float64, string) {
	got := map[string]int64{}
	for _, g := range view {
		got[g.Group] = g.ShareMilli
	}
	worst, at := 0.0, ""
	consider := func(g string, e float64) {
		if e > worst || (e == worst && at == "") {
			worst, at = e, g
		}
	}
	for g, f := range fair {
		s := got[g]
		if f > 0 {
			consider(g, math.Abs(float64(s-f))/float64(f))
		} else if rateMilli > 0 {
			consider(g, math.Abs(float64(s))/float64(rateMilli))
		}
	}
	for g, s := range got {
		if _, ok := fair[g]; !ok && rateMilli > 0 {
			consider(g, float64(s)/float64(rateMilli))
		}
	}
	return worst, at
}

// registerFairnessError is the fairness error of a lease view against the
// max-min division of the demands the register itself holds (its leases'
// last reported demands): how far the shares it handed out at each
// lease's last renewal are from its own division now.
func registerFairnessError(view []groupView, rateMilli int64) (float64, string, error) {
	demands, weights := map[string]int64{}, map[string]int64{}
	for _, g := range view {
		demands[g.Group], weights[g.Group] = g.DemandMilli, g.Weight
	}
	fair, err := fairShares(rateMilli, demands, weights)
	if err != nil {
		return 0, "", err
	}
	e, at := fairnessError(view, fair, rateMilli)
	return e, at, nil
}

// sample is one reading of the register's lease view during a phase.
type sample struct {
	// AtNanos is when the reading was taken, since the phase's event.
	AtNanos int64
	// Err is the fairness error against the phase's target division.
	Err float64
	// Members reports whether the active leases' holders were exactly
	// the workers that should hold one (joined ones in, stopped and cut
	// off ones out).
	Members bool
}

// convergedAt returns the time of the first sample from which the
// fleet stays converged, that is, every later sample too has Members and
// an error within tol, provided the last `hold` samples are all converged
// (so that a run that ends in a converged stretch counts only if that
// stretch lasted hold samples). It returns -1 when there is none.
func convergedAt(samples []sample, tol float64, hold int) int64 {
	ok := func(s sample) bool { return s.Members && s.Err <= tol }
	first := -1
	for i, s := range samples {
		if !ok(s) {
			first = -1
			continue
		}
		if first < 0 {
			first = i
		}
	}
	if first < 0 || len(samples)-first < hold {
		return -1
	}
	return samples[first].AtNanos
}

// sameSet reports whether the sorted lists a and b hold the same names.
func sameSet(a, b []string) bool { return slices.Equal(a, b) }

// growthExponent fits y = c * x^k by least squares on log-log axes over
// the points with x > 0 and y > 0 and returns k (NaN with fewer than two
// such points with distinct x).
func growthExponent(xs, ys []float64) float64 {
	var lx, ly []float64
	for i := range xs {
		if i < len(ys) && xs[i] > 0 && ys[i] > 0 && !math.IsNaN(ys[i]) && !math.IsInf(ys[i], 0) {
			lx, ly = append(lx, math.Log(xs[i])), append(ly, math.Log(ys[i]))
		}
	}
	if len(lx) < 2 {
		return math.NaN()
	}
	var mx, my float64
	for i := range lx {
		mx += lx[i]
		my += ly[i]
	}
	mx /= float64(len(lx))
	my /= float64(len(ly))
	var sxy, sxx float64
	for i := range lx {
		sxy += (lx[i] - mx) * (ly[i] - my)
		sxx += (lx[i] - mx) * (lx[i] - mx)
	}
	if sxx == 0 {
		return math.NaN()
	}
	return sxy / sxx
}

// groupDemands is the offered load of a fleet: group g of G (0-based)
// offers total * (g+1) / (1+2+...+G) permits per second, split evenly
// among its workers; so with several groups the small ones want less than
// an equal split and the large ones more, and max-min fairness has to cap
// some groups and satisfy others.
func groupDemands(total float64, groups int) []float64 {
	out := make([]float64, groups)
	sum := float64(groups*(groups+1)) / 2
	for g := range out {
		out[g] = total * float64(g+1) / sum
	}
	return out
}

// groupName is the name of group g.
func groupName(g int) string { return fmt.Sprintf("g%02d", g) }
