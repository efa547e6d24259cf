package fsm

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// shares.go: fair division of a capacity by weighted max-min
// (FairShares), which sizes the leases' shares of a limit's rate
// (leasegrant.go), and the 128-bit comparisons it is computed with.

// GroupDemand is one claimant of a divisible capacity: a group of workers
// (or, inside a group, one lease) with a weight and a demand, both integers
// in the caller's unit (permits per second, milli-permits per second, ...).
type GroupDemand struct {
	// Group names the claimant; names are unique within one call and fix
	// the order in which ties are broken (ascending).
	Group string
	// Weight is the claimant's relative right to the capacity; >= 1.
	Weight int64
	// Demand is how much the claimant wants; >= 0. A claimant never gets
	// more than its demand.
	Demand int64
}

// FairShares divides capacity among groups by weighted max-min fairness
// (water-filling) and returns each group's share, in the order of groups.
//
// If the demands add up to at most capacity, every group gets its demand.
// Otherwise there is a level L such that a group whose demand is at most
// L*Weight gets its demand (it wants less than its fair share, and what it
// leaves is split among the others) and every other group gets L*Weight,
// rounded down to an integer; the units lost to rounding (fewer than the
// number of such groups) go one each to those groups with the largest
// fractional parts, ties broken by group name. Hence:
//
//   - sum(shares) = min(capacity, sum(demands)), exactly;
//   - 0 <= share <= Demand for every group;
//   - a group whose demand is at most capacity*Weight/sum(weights) (its
//     share under an equal split) gets its demand;
//   - two groups that both get less than they want have shares in the
//     ratio of their weights, each within one unit;
//   - the result depends only on the set of (Group, Weight, Demand), not
//     on the order of groups.
//
// The computation is integer (128-bit intermediate products), so it is
// exact and identical on every architecture. It costs O(n log n).
//
// It returns an error, wrapping ErrInvalidCommand, for capacity < 0, a
// weight < 1, a demand < 0, weights whose sum exceeds math.MaxInt64, or a
// repeated group name.
func FairShares(capacity int64, groups []GroupDemand) ([]int64, error) {
	if capacity < 0 {
		return nil, fmt.Errorf("%w: fair shares: capacity %d (allowed: >= 0)", ErrInvalidCommand, capacity)
	}
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(groups[a].Group, groups[b].Group) })
	claims := make([]claim, len(groups))
	for k, i := range order {
		g := groups[i]
		if k > 0 && g.Group == groups[order[k-1]].Group {
			return nil, fmt.Errorf("%w: fair shares: group %q appears twice (allowed: unique names)", ErrInvalidCommand, g.Group)
		}
		if g.Weight < 1 {
			return nil, fmt.Errorf("%w: fair shares: group %q has weight %d (allowed: >= 1)", ErrInvalidCommand, g.Group, g.Weight)
		}
		if g.Demand < 0 {
			return nil, fmt.Errorf("%w: fair shares: group %q has demand %d (allowed: >= 0)", ErrInvalidCommand, g.Group, g.Demand)
		}
		claims[k] = claim{weight: g.Weight, demand: g.Demand}
	}
	if err := waterFill(capacity, claims); err != nil {
		return nil, err
	}
	shares := make([]int64, len(groups))
	for k, i := range order {
		shares[i] = claims[k].share
	}
	return shares, nil
}

// claim is one claimant of waterFill: weight >= 1 and demand >= 0 in, share
// out. Its position in the slice breaks ties.
type claim struct {
	weight, demand, share int64
	// rem is the fractional part of the claimant's level share, as a
	// numerator over the remaining weight (scratch).
	rem uint64
}

// waterFill sets the share of every claim: weighted max-min fairness over
// capacity, exactly as documented on FairShares, with ties broken by
// position in cs. Weights must be >= 1 and demands >= 0; it returns an
// error only if the weights add up to more than math.MaxInt64.
func waterFill(capacity int64, cs []claim) error {
	var weightSum, demandSum uint64
	for i := range cs {
		weightSum += uint64(cs[i].weight)
		if weightSum > math.MaxInt64 {
			return fmt.Errorf("%w: fair shares: weights add up to more than %d", ErrInvalidCommand, int64(math.MaxInt64))
		}
		demandSum = min(demandSum+uint64(cs[i].demand), math.MaxInt64+1) // cannot wrap: both < 2^63+1
	}
	if demandSum <= uint64(capacity) {
		for i := range cs {
			cs[i].share = cs[i].demand
		}
		return nil
	}
	// Visit the claims by demand/weight ascending: a claim is satisfied
	// when its demand is within its weight's part of what remains,
	// demand/weight <= rest/weights, in which case the level can only rise
	// for the others.
	idx := make([]int, len(cs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp128(mul128(cs[a].demand, cs[b].weight), mul128(cs[b].demand, cs[a].weight))
	})
	rest, weights := uint64(capacity), weightSum
	k := 0
	for ; k < len(idx); k++ {
		c := &cs[idx[k]]
		if cmp128(mul128(c.demand, int64(weights)), mul128(int64(rest), c.weight)) > 0 {
			break
		}
		c.share = c.demand
		rest -= uint64(c.demand)
		weights -= uint64(c.weight)
	}
	// Every claim left wants more than rest*weight/weights: it gets the
	// floor of that, and the units lost to rounding (fewer than the claims
	// left, since the fractions add up to less than their count) go one
	// each to the largest fractions. A claim gets +1 only if its demand
	// exceeds its exact level share, so it never exceeds its demand.
	left := idx[k:]
	lost := rest
	for _, i := range left {
		c := &cs[i]
		hi, lo := bits.Mul64(rest, uint64(c.weight))
		q, r := bits.Div64(hi, lo, weights) // q <= rest: hi < weights
		c.share, c.rem = int64(q), r
		lost -= q
	}
	slices.SortStableFunc(left, func(a, b int) int {
		switch ra, rb := cs[a].rem, cs[b].rem; {
		case ra > rb:
			return -1
		case ra < rb:
			return 1
		}
		return a - b
	})
	for _, i := range left[:lost] {
		cs[i].share++
	}
	for i := range cs {
		cs[i].rem = 0
	}
	return nil
}

// u128 is an unsigned 128-bit value.
type u128 struct{ hi, lo uint64 }

// mul128 returns a*b for a, b >= 0.
func mul128(a, b int64) u128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return u128{hi, lo}
}

// cmp128 compares a and b (-1, 0, +1).
func cmp128(a, b u128) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

// unitShare returns what waterFill gives claim i of claims with weight 1
// and the given demands (>= 0), in O(n log n) on the demands alone: the
// share of one member of a group, at every renewal, without sorting
// claims. With weight 1, waterFill satisfies claims in ascending demand
// while demand*(claims left) <= rest, and equal demands pass or fail
// together (after one passes, the next equal one meets the same
// condition), so the satisfied set is every demand up to a value; the
// others get floor(rest/left), and the rest's remainder goes one each to
// the first of them in position order (their fractions are equal).
// scratch is reused for the sorted copy.
func unitShare(capacity int64, demands []int64, i int, scratch []int64) (int64, []int64) {
	sorted := append(scratch[:0], demands...)
	slices.Sort(sorted)
	share := unitShareSorted(capacity, sorted, demands[i], func(threshold int64) uint64 {
		var before uint64
		for j := 0; j < i; j++ {
			if demands[j] >= threshold {
				before++
			}
		}
		return before
	})
	return share, sorted
}

// unitShareSorted is unitShare with the demands given sorted (ascending):
// demand is claim i's, and before(d) counts the claims ahead of i in
// position order whose demand is at least d. A group's sorted demands
// change only when a member joins, leaves or changes its demand, so a
// lease pool keeps them (leaseGroup.sortedDemands) instead of sorting a
// group of a thousand at every renewal.
func unitShareSorted(capacity int64, sorted []int64, demand int64, before func(int64) uint64) int64 {
	rest, left := uint64(capacity), uint64(len(sorted))
	k := 0
	for ; k < len(sorted); k++ {
		// demand*left > rest: this claim and every larger one is capped.
		if hi, lo := bits.Mul64(uint64(sorted[k]), left); hi > 0 || lo > rest {
			break
		}
		rest -= uint64(sorted[k])
		left--
	}
	if k == len(sorted) || demand < sorted[k] {
		return demand // satisfied
	}
	level, extra := rest/left, rest%left
	// Position of i among the capped claims (demand >= sorted[k]).
	if before(sorted[k]) < extra {
		level++
	}
	return int64(level)
}
