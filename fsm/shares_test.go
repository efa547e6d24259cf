package fsm

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	mrand "math/rand"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/quick"
)

func gd(group string, weight, demand int64) GroupDemand {
	return GroupDemand{Group: group, Weight: weight, Demand: demand}
}

func TestFairSharesTable(t *testing.T) {
	tests := []struct {
		desc     string
		capacity int64
		groups   []GroupDemand
		want     []int64
	}{
		{"no groups", 100, nil, []int64{}},
		{"demand below capacity: everyone gets its demand", 100,
			[]GroupDemand{gd("a", 1, 10), gd("b", 5, 20), gd("c", 1, 0)}, []int64{10, 20, 0}},
		{"demand equal to capacity", 30, []GroupDemand{gd("a", 1, 10), gd("b", 1, 20)}, []int64{10, 20}},
		{"equal weights, equal excess demand", 100, []GroupDemand{gd("a", 1, 500), gd("b", 1, 500)}, []int64{50, 50}},
		{"small group keeps its demand, the rest is split", 100,
			[]GroupDemand{gd("a", 1, 10), gd("b", 1, 500), gd("c", 1, 500)}, []int64{10, 45, 45}},
		{"weights 1:3", 100, []GroupDemand{gd("a", 1, 1000), gd("b", 3, 1000)}, []int64{25, 75}},
		{"weights 1:3, heavy group wants less than 3/4", 100,
			[]GroupDemand{gd("a", 1, 1000), gd("b", 3, 60)}, []int64{40, 60}},
		{"cascade: two groups satisfied one after the other", 100,
			[]GroupDemand{gd("a", 1, 5), gd("b", 1, 30), gd("c", 1, 1000), gd("d", 1, 1000)}, []int64{5, 30, 33, 32}},
		{"leftover goes to the largest fractions, then by name", 10,
			[]GroupDemand{gd("a", 1, 100), gd("b", 1, 100), gd("c", 1, 100)}, []int64{4, 3, 3}},
		{"leftover by fraction: weights 1,2 of 10", 10,
			[]GroupDemand{gd("x", 1, 100), gd("y", 2, 100)}, []int64{3, 7}},
		{"zero capacity", 0, []GroupDemand{gd("a", 1, 5), gd("b", 9, 5)}, []int64{0, 0}},
		{"zero demands", 10, []GroupDemand{gd("a", 1, 0), gd("b", 1, 0)}, []int64{0, 0}},
		{"input order does not matter (names decide ties)", 10,
			[]GroupDemand{gd("c", 1, 100), gd("a", 1, 100), gd("b", 1, 100)}, []int64{3, 4, 3}},
		{"huge numbers use 128-bit products", math.MaxInt64,
			[]GroupDemand{gd("a", math.MaxInt64/2, math.MaxInt64), gd("b", math.MaxInt64/2, math.MaxInt64)},
			[]int64{math.MaxInt64/2 + 1, math.MaxInt64 / 2}},
	}
	for _, tt := range tests {
		got, err := FairShares(tt.capacity, tt.groups)
		if err != nil {
			t.Errorf("%s: FairShares: %v", tt.desc, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: FairShares(%d, %+v) = %v, want %v", tt.desc, tt.capacity, tt.groups, got, tt.want)
		}
	}
}

func TestFairSharesRejects(t *testing.T) {
	tests := []struct {
		desc     string
		capacity int64
		groups   []GroupDemand
		want     string
	}{
		{"negative capacity", -1, nil, "capacity -1"},
		{"zero weight", 10, []GroupDemand{gd("a", 0, 1)}, `group "a" has weight 0`},
		{"negative demand", 10, []GroupDemand{gd("a", 1, -1)}, `group "a" has demand -1`},
		{"repeated group", 10, []GroupDemand{gd("a", 1, 1), gd("a", 1, 1)}, `group "a" appears twice`},
		{"weights overflow", 10, []GroupDemand{gd("a", math.MaxInt64, 1), gd("b", 1, 1)}, "weights add up"},
	}
	for _, tt := range tests {
		got, err := FairShares(tt.capacity, tt.groups)
		if err == nil || !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tt.want) || got != nil {
			t.Errorf("%s: FairShares = %v, %v; want nil and an error containing %q", tt.desc, got, err, tt.want)
		}
	}
}

// TestFairSharesDemandChanges follows a sequence of demand changes, as
// renewals would report them.
func TestFairSharesDemandChanges(t *testing.T) {
	const capacity = 1200
	groups := []GroupDemand{gd("api", 2, 2000), gd("batch", 1, 2000), gd("cron", 1, 50)}
	steps := []struct {
		desc   string
		change func()
		want   []int64
	}{
		{"start: cron keeps 50, api gets twice batch", func() {}, []int64{767, 383, 50}},
		{"cron wants more than its fair share", func() { groups[2].Demand = 1000 }, []int64{600, 300, 300}},
		{"api quiets down", func() { groups[0].Demand = 100 }, []int64{100, 550, 550}},
		{"batch stops (demand 0): its share returns to the others", func() { groups[1].Demand = 0 }, []int64{100, 0, 1000}},
		{"everyone wants little: capacity is left over", func() { groups[2].Demand = 10 }, []int64{100, 0, 10}},
	}
	for _, st := range steps {
		st.change()
		got, err := FairShares(capacity, groups)
		if err != nil {
			t.Fatalf("%s: %v", st.desc, err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: shares %v, want %v", st.desc, got, st.want)
		}
	}
}

// fairInput is a random FairShares input for testing/quick.
type fairInput struct {
	Capacity int64
	Groups   []GroupDemand
}

// Generate draws 0-12 groups with small or huge numbers (testing/quick
// still uses math/rand).
func (fairInput) Generate(rng *mrand.Rand, _ int) reflect.Value {
	in := fairInput{}
	scale := []int64{10, 1000, 1 << 40, math.MaxInt64 / 16}[rng.Intn(4)]
	in.Capacity = rng.Int63n(scale)
	n := rng.Intn(13)
	for i := range n {
		in.Groups = append(in.Groups, gd(fmt.Sprintf("g%02d", i), 1+rng.Int63n([]int64{1, 5, 1000}[rng.Intn(3)]), rng.Int63n(scale)))
	}
	rng.Shuffle(len(in.Groups), func(i, j int) { in.Groups[i], in.Groups[j] = in.Groups[j], in.Groups[i] })
	return reflect.ValueOf(in)
}

func TestFairSharesProperties(t *testing.T) {
	cfg := &quick.Config{MaxCount: 3000, Rand: mrand.New(mrand.NewSource(34))}
	prop := func(in fairInput) bool {
		shares, err := FairShares(in.Capacity, in.Groups)
		if err != nil {
			t.Logf("FairShares(%+v): %v", in, err)
			return false
		}
		var sum, demand, weights big.Int
		for i, g := range in.Groups {
			if shares[i] < 0 || shares[i] > g.Demand {
				t.Logf("%+v: group %s gets %d, outside [0, demand %d]", in, g.Group, shares[i], g.Demand)
				return false
			}
			sum.Add(&sum, big.NewInt(shares[i]))
			demand.Add(&demand, big.NewInt(g.Demand))
			weights.Add(&weights, big.NewInt(g.Weight))
		}
		want := big.NewInt(in.Capacity)
		if demand.Cmp(want) < 0 {
			want = &demand
		}
		if sum.Cmp(want) != 0 {
			t.Logf("%+v: shares %v add up to %v, want min(capacity, demand) = %v", in, shares, &sum, want)
			return false
		}
		for i, g := range in.Groups {
			// Below its equal-split share: gets its demand.
			// demand*sum(weights) <= capacity*weight.
			lhs := new(big.Int).Mul(big.NewInt(g.Demand), &weights)
			rhs := new(big.Int).Mul(big.NewInt(in.Capacity), big.NewInt(g.Weight))
			if lhs.Cmp(rhs) <= 0 && shares[i] != g.Demand {
				t.Logf("%+v: group %s wants %d, below its fair share, and gets %d", in, g.Group, g.Demand, shares[i])
				return false
			}
			if shares[i] == g.Demand {
				continue
			}
			// Unsatisfied: nobody has more per weight, beyond rounding:
			// (share_j - 1) * w_i < (share_i + 1) * w_j.
			for j, h := range in.Groups {
				l := new(big.Int).Mul(big.NewInt(shares[j]-1), big.NewInt(g.Weight))
				r := new(big.Int).Mul(big.NewInt(shares[i]+1), big.NewInt(h.Weight))
				if l.Cmp(r) >= 0 {
					t.Logf("%+v: unsatisfied %s (share %d, weight %d) vs %s (share %d, weight %d)",
						in, g.Group, shares[i], g.Weight, h.Group, shares[j], h.Weight)
					return false
				}
			}
		}
		// Order does not matter.
		perm := slices.Clone(in.Groups)
		slices.Reverse(perm)
		again, err := FairShares(in.Capacity, perm)
		if err != nil {
			return false
		}
		slices.Reverse(again)
		if !slices.Equal(again, shares) {
			t.Logf("%+v: reversed input gives %v, want %v", in, again, shares)
			return false
		}
		return true
	}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
}

// TestFairSharesEqualWeights checks that equal weights and equal demands
// above the fair share give shares within one of each other, and that
// weights are respected in proportion.
func TestFairSharesEqualWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		n := 1 + rng.IntN(20)
		capacity := rng.Int64N(1e6)
		groups := make([]GroupDemand, n)
		w := 1 + rng.Int64N(10)
		for i := range groups {
			groups[i] = gd(fmt.Sprint("g", i), w, capacity+1)
		}
		shares, err := FairShares(capacity, groups)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := slices.Min(shares), slices.Max(shares)
		if hi-lo > 1 {
			t.Fatalf("capacity %d over %d equal groups: shares %v differ by more than 1", capacity, n, shares)
		}
		// Weights k and 1, both unsatisfied: the ratio is k within rounding.
		k := 1 + rng.Int64N(9)
		two, err := FairShares(capacity, []GroupDemand{gd("heavy", k, capacity), gd("light", 1, capacity)})
		if err != nil {
			t.Fatal(err)
		}
		if d := two[0] - k*two[1]; d < -k || d > k {
			t.Fatalf("weights %d:1 of %d: shares %v", k, capacity, two)
		}
	}
}

// TestUnitShareIsWaterFill: for seeded random groups (ties, zeros and
// demands far above the capacity included), unitShare gives every member
// exactly what waterFill gives it with weight 1.
func TestUnitShareIsWaterFill(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 0))
	var scratch []int64
	for iter := range 3000 {
		n := 1 + rng.IntN(40)
		capacity := rng.Int64N(1_000_000) + 1
		if iter%3 == 0 {
			capacity = rng.Int64N(1_000_000_000_000) + 1 // up to 10^9 permits/s in milli
		}
		demands := make([]int64, n)
		cs := make([]claim, n)
		for j := range demands {
			switch rng.IntN(6) {
			case 5:
				demands[j] = rng.Int64N(math.MaxInt64) // overflows demand*left
			case 0:
				demands[j] = 0
			case 1:
				demands[j] = capacity * int64(1+rng.IntN(3)) // far above
			case 2:
				demands[j] = demands[rng.IntN(j+1)] // a tie (or itself: 0)
			default:
				demands[j] = rng.Int64N(2*capacity/int64(n) + 2)
			}
			cs[j] = claim{weight: 1, demand: demands[j]}
		}
		if err := waterFill(capacity, cs); err != nil {
			t.Fatal(err)
		}
		for j := range demands {
			var got int64
			got, scratch = unitShare(capacity, demands, j, scratch)
			if got != cs[j].share {
				t.Fatalf("iteration %d: capacity %d, demands %v: member %d gets %d, waterFill gives %d", iter, capacity, demands, j, got, cs[j].share)
			}
		}
	}
}
