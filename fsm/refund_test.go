package fsm

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// loadedBursty are the bursty limits the late-refund property tests load:
// a middling burst, a tiny one and a large one.
var loadedBursty = []bucket.Spec{
	{Algorithm: bucket.Bursty, Rate: 100, MaxBurstSeconds: 0.5},
	{Algorithm: bucket.Bursty, Rate: 1000, MaxBurstSeconds: 0.02},
	{Algorithm: bucket.Bursty, Rate: 10, MaxBurstSeconds: 3},
}

// TestLateRefundsKeepTheBurstyBound: on loaded Bursty limits, tracked
// reserves are settled at random later times with random real costs, so
// that most refunds come after other grants (late refunds, settle.go).
// Rebuilt from the answers, with each grant counted at what it did not
// get back, every window keeps the Bursty bound; and late refunds do
// give back permits, often in full.
func TestLateRefundsKeepTheBurstyBound(t *testing.T) {
	for _, spec := range loadedBursty {
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
					o := takeRandom(rng, &opens)
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

// TestLateRefundKeepsGrantsInOrder (found in review): 1/s, MaxStored 2 s.
// Grant g takes 2 permits served at 0, grant x 1 permit served at 2 s;
// g's 2 are refunded at 0. Had the refund moved the next free time back
// to now, a grant of 10 would be served at 1 s, before x, and [1 s, 2 s]
// would hold 11 permits against a bound of 4. It stops at x's served
// time; the rest goes to the store.
func TestLateRefundKeepsGrantsInOrder(t *testing.T) {
	cfg := compile(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 2})
	h := newHarness(t)
	h.put(0, "b", cfg)
	var grants []boundGrant
	g := h.reserve1(0, tracked(10*sec, Part{"b", 2}))
	grants = append(grants, boundGrant{atNanos: g.NowNanos + g.WaitNanos, n: 2})
	x := h.reserve1(0, rsv("b", 1, 10*sec, ""))
	grants = append(grants, boundGrant{atNanos: x.NowNanos + x.WaitNanos, n: 1})
	s := h.settleCmd(0, Settle{Reservation: g.ReservationID, Actual: []Part{{"b", 0}}})
	if s.Parts[0].Refunded != 2 {
		t.Fatalf("refund: %+v, want 2", s)
	}
	grants[0].n = 0
	y := h.reserve1(0, rsv("b", 10, 10*sec, ""))
	if y.WaitNanos < x.WaitNanos {
		t.Errorf("the grant of 10 is served at %v, before the grant made before it (%v)", y.WaitNanos, x.WaitNanos)
	}
	grants = append(grants, boundGrant{atNanos: y.NowNanos + y.WaitNanos, n: 10})
	if why := checkLimitBound(cfg, slices.DeleteFunc(grants, func(g boundGrant) bool { return g.n == 0 })); why != "" {
		t.Fatal(why)
	}
}

// TestLateRefundsAmidMultiLimitChargesAndReconfigures (after a review's
// randomized test): bursty limits where a strict limit sets t* for half
// of the reserves, with idle spells that refill the store, charges,
// reconfigurations (which reset the marks), single reserves, settlements
// in any order and snapshot round trips (byte-identical). The bound holds
// over the permits used (grants that kept none dropped; charges left out,
// a subset of what was served).
func TestLateRefundsAmidMultiLimitChargesAndReconfigures(t *testing.T) {
	other := compile(t, bucket.Spec{Algorithm: bucket.Strict, Rate: 7, MaxReserved: 20})
	var late int
	for _, spec := range loadedBursty {
		cfg := compile(t, spec)
		iv := cfg.IntervalNanos
		for seed := range 80 {
			rng := rand.New(rand.NewPCG(uint64(seed), 0xbeef))
			h := newHarness(t)
			now := int64(time.Second)
			h.put(now, "b", cfg)
			h.put(now, "o", other)
			type open struct {
				id    uint64
				index int
				multi bool
			}
			var grants []boundGrant
			var opens []open
			permits := func(k int64) int64 { return 1 + rng.Int64N(k) }
			for range 300 {
				if rng.IntN(20) == 0 {
					now += rng.Int64N(int64(4 * time.Second)) // idle: the store refills
				} else {
					now += rng.Int64N(4 * iv)
				}
				switch p := rng.IntN(20); {
				case p < 9:
					n, multi := permits(10), p >= 6
					r := tracked(rng.Int64N(int64(3*time.Second)), Part{"b", n})
					if multi {
						r = tracked(r.MaxWaitNanos, Part{"o", 1}, Part{"b", n})
					}
					if res := h.reserve1(now, r); res.Status == Granted {
						grants = append(grants, boundGrant{atNanos: res.NowNanos + res.WaitNanos, n: n})
						opens = append(opens, open{res.ReservationID, len(grants) - 1, multi})
					}
				case p < 12:
					n := permits(5)
					if res := h.reserve1(now, rsv("b", n, rng.Int64N(int64(time.Second)), "")); res.Status == Granted {
						grants = append(grants, boundGrant{atNanos: res.NowNanos + res.WaitNanos, n: n})
					}
				case p == 12 && rng.IntN(4) == 0:
					h.put(now, "b", cfg)
				case p == 13:
					b1 := snapshotBytes(t, h.f)
					twin := newHarness(t)
					if err := restore(twin.f, b1); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(b1, snapshotBytes(t, twin.f)) {
						t.Fatalf("%+v seed %d: a restored snapshot re-encodes differently", spec, seed)
					}
				case len(opens) > 0:
					o := takeRandom(rng, &opens)
					g := &grants[o.index]
					actual := rng.Int64N(g.n + 1)
					if rng.IntN(6) == 0 {
						actual = g.n + 1 + rng.Int64N(3) // a charge
					}
					parts := []Part{{"b", actual}}
					if o.multi && rng.IntN(2) == 0 {
						parts = append(parts, Part{"o", 0})
					}
					res := h.settleCmd(now, Settle{Reservation: o.id, Actual: parts})
					for _, sp := range res.Parts {
						if sp.Limit == "b" && sp.Refunded > 0 {
							if sp.Refunded > sp.Reserved-sp.Actual {
								t.Fatalf("%+v seed %d: refunded %d of %d reserved, %d used", spec, seed, sp.Refunded, sp.Reserved, sp.Actual)
							}
							g.n -= sp.Refunded
							late++
						}
					}
				}
			}
			used := slices.DeleteFunc(grants, func(g boundGrant) bool { return g.n == 0 })
			if why := checkLimitBound(cfg, used); why != "" {
				t.Fatalf("%+v seed %d: %s", spec, seed, why)
			}
		}
	}
	if late == 0 {
		t.Error("weak test: no refund")
	}
}

// TestRestoreRefusesAGrantFromItsPacersFuture (found in review): a
// reservation part granted at a change count above its pacer's would find
// no refund mark after it, so no budget; Restore refuses it.
func TestRestoreRefusesAGrantFromItsPacersFuture(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", bursty(t, 10))
	res := h.reserve1(sec, tracked(0, Part{"api", 5}))
	h.reserve1(sec, rsv("api", 1, sec, ""))
	h.f.st.reservations.byID[res.ReservationID].parts[0].seqAfter += 5
	err := restore(New(), snapshotBytes(t, h.f))
	if err == nil || !strings.Contains(err.Error(), "after its pacer's") {
		t.Fatalf("Restore: %v, want a refusal of the part from the future", err)
	}
}

// TestNoExactRefundAcrossAReconfiguration: README "refunded exactly if
// nothing else has touched the limit since the grant (no other grant,
// settlement or reconfiguration)"; after one, strict, warmup and hybrid
// refunds are lost and bursty ones get no late refund (the marks are reset).
func TestNoExactRefundAcrossAReconfiguration(t *testing.T) {
	for _, mk := range []func(rate float64) bucket.Config{
		func(r float64) bucket.Config { return bursty(t, r) },
		func(r float64) bucket.Config {
			return compile(t, bucket.Spec{Algorithm: bucket.WarmingUp, Rate: r, Warmup: time.Second})
		},
		func(r float64) bucket.Config {
			return compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: r, BurstRatio: 100})
		},
	} {
		h := newHarness(t)
		h.put(0, "tpm", mk(100))
		res := h.reserve1(sec, tracked(10*sec, Part{"tpm", 40}))
		if res.Status != Granted {
			t.Fatalf("reserve: %+v", res)
		}
		h.put(sec+1, "tpm", mk(200)) // same algorithm, another rate
		before := pacerState(h, "tpm")
		s := h.settleCmd(sec+2, Settle{Reservation: res.ReservationID, Actual: []Part{{"tpm", 0}}})
		if s.Status != Settled || s.Parts[0].Refunded != 0 || pacerState(h, "tpm") != before {
			t.Errorf("%v: settle after a reconfiguration: %+v, want nothing refunded and the pacer unchanged", mk(1).Spec.Algorithm, s)
		}
	}
}

// TestLateRefundBudgetSurvivesMarkMerging: README "refunded within the
// slack the later grants left: as many as the smallest, over the grants
// and charges made since, of MaxStored minus the store at that grant ...
// A limit keeps at most 32 slack marks; older ones merge, which only makes
// late refunds smaller". E is followed by G, served from a full store
// (slack 0), then by 40 grants of rising slack (more than 32 marks): E
// gets nothing back, however many marks came after.
func TestLateRefundBudgetSurvivesMarkMerging(t *testing.T) {
	h := newHarness(t)
	h.put(0, "tpm", bursty(t, 100)) // I = 10 ms, 1 s of burst
	e := h.reserve1(5*sec, tracked(0, Part{"tpm", 50}))
	g := h.reserve1(10*sec, tracked(0, Part{"tpm", 100})) // empties a full store: slack 0
	if e.Status != Granted || g.Status != Granted || g.WaitNanos != 0 {
		t.Fatalf("E %+v, G %+v", e, g)
	}
	for i := range 40 { // the store refilled to 0.5 s, drained by one permit each
		if r := h.reserve1(10*sec+sec/2, tracked(0, Part{"tpm", 1})); r.Status != Granted {
			t.Fatalf("grant %d: %+v", i, r)
		}
	}
	s := h.settleCmd(10*sec+sec/2, Settle{Reservation: e.ReservationID, Actual: []Part{{"tpm", 0}}})
	if s.Status != Settled || s.Parts[0].Refunded != 0 {
		t.Errorf("late settle of E: %+v, want nothing refunded (G, after it, left no slack)", s)
	}
	// The bursty bound over [10 s, 10.5 s]: floor((W + MaxStored)/I) + n_last
	// = floor((0.5 s + 1 s)/10 ms) + 1 = 151 permits used.
	used := int64(100 + 40)
	for range 200 {
		if r := h.reserve1(10*sec+sec/2, rsv("tpm", 1, 0, "")); r.Status == Granted {
			used++
		}
	}
	if used > 151 {
		t.Errorf("%d permits used in a 0.5 s window, above the bursty bound 151", used)
	}
}

// takeRandom removes one element of *s, drawn with rng, and returns it.
func takeRandom[T any](rng *rand.Rand, s *[]T) T {
	k := rng.IntN(len(*s))
	v := (*s)[k]
	*s = append((*s)[:k], (*s)[k+1:]...)
	return v
}
