package fsm

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// TestLateRefundsKeepTheBurstyBound: on loaded Bursty limits, tracked
// reserves are settled at random later times with random real costs, so
// that most refunds come after other grants (late refunds, refund.go).
// Rebuilt from the answers, with each grant counted at what it did not
// get back, every window keeps the Bursty bound; and late refunds do
// give back permits, often in full.
func TestLateRefundsKeepTheBurstyBound(t *testing.T) {
	for _, spec := range []bucket.Spec{
		{Algorithm: bucket.Bursty, Rate: 100, MaxBurstSeconds: 0.5},
		{Algorithm: bucket.Bursty, Rate: 1000, MaxBurstSeconds: 0.02},
		{Algorithm: bucket.Bursty, Rate: 10, MaxBurstSeconds: 3},
	} {
		cfg := compile(t, spec)
		iv := cfg.IntervalNanos
		var late, lateFull, lost int
		for seed := range 60 {
			rng := rand.New(rand.NewPCG(uint64(seed), 0x1a7e))
			h := newHarness(t)
			now := int64(time.Second)
			h.put(now, "b", cfg)
			type open struct {
				id          uint64
				index       int // into grants
				grantsAfter int // len(grants) when it was granted
			}
			var grants []boundGrant
			var opens []open
			for range 400 {
				now += rng.Int64N(8 * iv)
				switch p := rng.IntN(10); {
				case p < 5:
					n := 1 + rng.Int64N(10)
					res := h.reserve1(now, tracked(rng.Int64N(int64(2*time.Second)), Part{"b", n}))
					if res.Status == Granted {
						grants = append(grants, boundGrant{atNanos: res.NowNanos + res.WaitNanos, n: n})
						opens = append(opens, open{res.ReservationID, len(grants) - 1, len(grants)})
					}
				case p < 7:
					n := 1 + rng.Int64N(5)
					if res := h.reserve1(now, rsv("b", n, rng.Int64N(int64(time.Second)), "")); res.Status == Granted {
						grants = append(grants, boundGrant{atNanos: res.NowNanos + res.WaitNanos, n: n})
					}
				case len(opens) > 0:
					k := rng.IntN(len(opens))
					o := opens[k]
					opens = append(opens[:k], opens[k+1:]...)
					g := &grants[o.index]
					actual := rng.Int64N(g.n + 1)
					res := h.settleCmd(now, Settle{Reservation: o.id, Actual: []Part{{"b", actual}}})
					if res.Status != Settled {
						continue // final: its settle window ended
					}
					sp := res.Parts[0]
					if sp.Refunded > sp.Reserved-sp.Actual {
						t.Fatalf("%+v seed %d: refunded %d of %d reserved, %d used", spec, seed, sp.Refunded, sp.Reserved, sp.Actual)
					}
					if len(grants) > o.grantsAfter && actual < g.n {
						switch {
						case sp.Refunded == 0:
							lost++
						case sp.Refunded == sp.Reserved-sp.Actual:
							late++
							lateFull++
						default:
							late++
						}
					}
					g.n -= sp.Refunded
				}
			}
			if why := checkLimitBound(cfg, grants); why != "" {
				t.Fatalf("%+v seed %d: %s", spec, seed, why)
			}
		}
		t.Logf("%+v: %d late refunds (%d in full), %d lost", spec, late, lateFull, lost)
		if late == 0 || lateFull == 0 {
			t.Errorf("%+v: weak test: %d late refunds, %d in full", spec, late, lateFull)
		}
	}
}
