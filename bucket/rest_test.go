package bucket

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRestedPacerDecidesLikeAnyRestedOne: after a random history, a pacer
// left alone until RestAtNanos decides a random sequence of later calls
// exactly as NewRestedPacer created then; RestAtNanos of a pacer at rest
// is now. Configs that never rest (Hybrid with a burst pool) say so.
func TestRestedPacerDecidesLikeAnyRestedOne(t *testing.T) {
	for _, a := range []Algorithm{Strict, Bursty, WarmingUp, Hybrid, Concurrency} {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(a), 41))
			checked := 0
			for trial := 0; checked < 400 && trial < 40000; trial++ {
				s := randomSpec(rng, a)
				if a == Concurrency {
					s = Spec{Algorithm: Concurrency, MaxInFlight: logInt(rng, 1, 1000), HoldTTL: time.Duration(logInt(rng, 1, int64(MaxHoldTTL)))}
				}
				c, err := Compile(s)
				if err != nil {
					continue
				}
				raw, err := c.AppendBinary(nil)
				if err != nil {
					t.Fatal(err)
				}
				cc, err := DecodeCompiled(raw)
				if err != nil {
					t.Fatal(err)
				}
				origin := logInt(rng, 1, math.MaxInt64/8)
				p := cc.NewRestedPacer(origin)
				if !Rests(c) {
					if _, ok := RestAtNanos(p, origin); ok {
						t.Fatalf("spec %+v never rests, but RestAtNanos says it does", s)
					}
					continue
				}
				if at, ok := RestAtNanos(p, origin); !ok || at != origin {
					t.Fatalf("spec %+v: a rested pacer at %d rests at %d, %v", s, origin, at, ok)
				}
				checked++
				_, now := trace(rng, p, c, origin, 1+rng.IntN(20))
				at, ok := RestAtNanos(p, now)
				if !ok || at < now {
					t.Fatalf("spec %+v: rest at %d, %v (now %d)", s, at, ok, now)
				}
				if again, _ := RestAtNanos(p, at); again != at {
					t.Fatalf("spec %+v: rests at %d, but at that time at %d", s, at, again)
				}
				if at > math.MaxInt64/2 {
					continue // debt to the end of the timeline: nothing to compare
				}
				q := cc.NewRestedPacer(at)
				seed := rng.Uint64()
				r1, r2 := rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
				d1, _ := trace(r1, p, c, at, 30)
				d2, _ := trace(r2, q, c, at, 30)
				for i := range d1 {
					if d1[i] != d2[i] {
						t.Fatalf("spec %+v: rested at %d, call %d decides %+v; a fresh rested pacer %+v", s, at, i, d1[i], d2[i])
					}
				}
			}
			if checked < 100 {
				t.Fatalf("weak test: %d configurations checked", checked)
			}
		})
	}
}

// trace makes calls random calls on p from now on (reserves with random
// waits, grants at the Query time, charges, releases) and returns what
// each decided, and the time of the last call.
func trace(rng *rand.Rand, p Pacer, c Config, now int64, calls int) ([]Decision, int64) {
	arr := newArrivals(rng, c)
	arr.now = now
	out := make([]Decision, 0, calls)
	for range calls {
		t, n := arr.next()
		switch rng.IntN(4) {
		case 0:
			q, err := p.Query(t, n)
			if err == nil {
				d, _ := p.(Scheduler).ReserveAt(t, n, q)
				out = append(out, d)
				continue
			}
		case 1:
			if c.Spec.Algorithm != Concurrency && c.IntervalNanos > 0 {
				err := p.(Scheduler).Charge(t, n)
				out = append(out, Decision{Granted: err == nil})
				continue
			}
			if r, ok := p.(Releaser); ok {
				r.Release(t, satAdd(t, int64(c.Spec.HoldTTL)), n)
			}
		}
		d, err := p.Reserve(t, n, rng.Int64N(max(1, min(arr.fill, math.MaxInt64/4))))
		if err != nil {
			d = Decision{AtNanos: -1}
		}
		out = append(out, d)
	}
	return out, arr.now
}
