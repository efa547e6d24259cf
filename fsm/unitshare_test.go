package fsm

import (
	"math"
	"math/rand/v2"
	"testing"
)

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
