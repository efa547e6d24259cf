package bucket

import (
	"errors"
	"math"
	"testing"
	"time"
)

func hybridPacer(t testing.TB, s Spec) *HybridPacer {
	t.Helper()
	return mustNew(t, s).(*HybridPacer)
}

// TestHybridJitterNormalisation: one fill of a whole active pool of time
// may refill the whole burst pool, and so may ten fills of a tenth each.
func TestHybridJitterNormalisation(t *testing.T) {
	c := mustCompile(t, Spec{Algorithm: Hybrid, Rate: 1, BurstRatio: 1.1}) // A 1e9, B 1e8
	behind := Pools{ActiveNanos: c.ActiveNanos, WaitingNanos: 5 * sec}
	one := fill(&c, behind, c.ActiveNanos)
	ten := behind
	for range 10 {
		ten = fill(&c, ten, c.ActiveNanos/10)
	}
	want := Pools{ActiveNanos: 1e9, BurstNanos: 1e8, WaitingNanos: 5*sec + 1e9 - 1e8}
	if one != want || ten != want {
		t.Fatalf("one fill %+v, ten fills %+v, want %+v", one, ten, want)
	}
	// Half a pool of time refills half the burst pool, and no more even if
	// much is waiting.
	if got := fill(&c, behind, c.ActiveNanos/2); got.BurstNanos != 5e7 {
		t.Fatalf("half fill moved %d to the burst pool, want 5e7", got.BurstNanos)
	}
	// Nothing waits: nothing moves, whatever the time.
	caughtUp := Pools{ActiveNanos: 0}
	if got := fill(&c, caughtUp, c.ActiveNanos); got != (Pools{ActiveNanos: 1e9}) {
		t.Fatalf("fill of an empty pool %+v", got)
	}
}

// TestHybridExample is the worked example of the HybridPacer doc comment.
func TestHybridExample(t *testing.T) {
	p := hybridPacer(t, Spec{Algorithm: Hybrid, Rate: 1})
	if d := mustReserve(t, p, 0, 1, 0); d != (Decision{Granted: true}) {
		t.Fatalf("first: %+v", d)
	}
	if d := mustReserve(t, p, 0, 1, 0); d != (Decision{AtNanos: sec}) {
		t.Fatalf("second at 0: %+v, want refused until 1s", d)
	}
	if d := mustReserve(t, p, 10*sec, 1, 0); d != (Decision{Granted: true, AtNanos: 10 * sec}) {
		t.Fatalf("after 10 s idle: %+v", d)
	}
	if got := p.Pools(); got != (Pools{ActiveNanos: 0, BurstNanos: 1e8, WaitingNanos: 89e8}) {
		t.Fatalf("pools after idle %+v", got)
	}
	s := sleeper{t: t, p: p, now: 10 * sec}
	if w := s.acquire(1); w != 9e8 { // 0.9 s of fresh time + the 0.1 s burst pool
		t.Fatalf("wait %d, want 9e8", w)
	}
	// Behind schedule: 1.1 s of tokens per second, an op every 1/1.1 s.
	for i := range 20 {
		if w := s.acquire(1); w != 909090909 && w != 909090910 {
			t.Fatalf("catch-up wait %d: %d, want 909090909 or 909090910", i, w)
		}
	}
	// Once the waiting pool is used up, back to one op per second.
	s.now += 200 * sec
	s.acquire(1)
	p.pools.WaitingNanos = 0 // as if caught up
	p.pools.BurstNanos = 0
	for range 3 {
		if w := s.acquire(1); w != sec {
			t.Fatalf("caught up: wait %d, want 1s", w)
		}
	}
}

func TestHybridStrictHasNoBurst(t *testing.T) {
	p := hybridPacer(t, Spec{Algorithm: Hybrid, Rate: 1, Strictness: 1})
	s := sleeper{t: t, p: p}
	s.acquire(1)
	s.sleep(100 * sec)
	s.acquire(1)
	for range 5 {
		if w := s.acquire(1); w != sec {
			t.Fatalf("strict hybrid waited %d, want 1s", w)
		}
	}
	if p.WaitingNanos() != 99*sec {
		t.Fatalf("waiting %d, want the 99 s never caught up", p.WaitingNanos())
	}
}

func TestHybridCompensationForfeitsGap(t *testing.T) {
	p := hybridPacer(t, Spec{Algorithm: Hybrid, Rate: 1, Strictness: 0.25})
	mustReserve(t, p, 0, 1, 0)
	mustReserve(t, p, 41*sec, 1, 0)
	// The fill of 41 s: active +1 s, 40 s overflow, 0.1 s to the burst
	// pool, then a quarter of the 39.9 s waiting forfeited.
	got := p.Pools()
	if got.WaitingNanos != 39.9e9-9.975e9 || got.ForfeitedNanos != 9.975e9 {
		t.Fatalf("pools %+v", got)
	}
}

func TestHybridBulkAtHighRate(t *testing.T) {
	// 1e6 ops/s: the 1 ms active pool serves 1000 ops at once.
	p := hybridPacer(t, Spec{Algorithm: Hybrid, Rate: 1e6, Strictness: 1})
	if d := mustReserve(t, p, 0, 1000, 0); !d.Granted || d.AtNanos != 0 {
		t.Fatalf("1000 ops: %+v", d)
	}
	if d := mustReserve(t, p, 0, 1, 0); d.Granted || d.AtNanos != 1000 {
		t.Fatalf("1001st op: %+v", d)
	}
	if _, err := p.Reserve(0, 1001, 0); !errors.Is(err, ErrTooManyPermits) {
		t.Fatalf("1001 ops: %v", err)
	}
}

func TestHybridQueuedGrantsAreInOrder(t *testing.T) {
	p := hybridPacer(t, Spec{Algorithm: Hybrid, Rate: 10}) // A 100 ms, B 10 ms
	var last int64
	for i := range 10 {
		d := mustReserve(t, p, 0, 1, 10*sec)
		if !d.Granted || d.AtNanos < last {
			t.Fatalf("reserve %d: %+v after %d", i, d, last)
		}
		last = d.AtNanos
	}
	if last != 9e8 { // the first at 0, then one per 100 ms
		t.Fatalf("10th served at %d, want 900ms", last)
	}
	if got := p.FillNanos(); got != 9e8 {
		t.Fatalf("pool clock %d, want 900ms", got)
	}
	if at, _ := p.Query(0, 1); at != 1e9 {
		t.Fatalf("Query %d, want 1s", at)
	}
	if d := mustReserve(t, p, 0, 1, sec-1); d.Granted || d.AtNanos != sec {
		t.Fatalf("not willing to wait: %+v", d)
	}
}

func TestHybridReconfigureSpillsToWaiting(t *testing.T) {
	p := hybridPacer(t, Spec{Algorithm: Hybrid, Rate: 1, BurstRatio: 1.5})
	mustReserve(t, p, 0, 1, 0)
	mustReserve(t, p, 10*sec, 1, 0) // active 0, burst 0.5 s, waiting 8.5 s
	before := p.Pools()
	if err := p.Reconfigure(10*sec, mustCompile(t, Spec{Algorithm: Hybrid, Rate: 1, BurstRatio: 1.2})); err != nil {
		t.Fatal(err)
	}
	after := p.Pools()
	if after.BurstNanos != 2e8 || after.WaitingNanos != before.WaitingNanos+3e8 {
		t.Fatalf("before %+v after %+v", before, after)
	}
	if err := p.Reconfigure(0, mustCompile(t, Spec{Algorithm: Strict, Rate: 1})); !errors.Is(err, ErrInvalidAlgorithm) {
		t.Fatalf("reconfigure to strict: %v", err)
	}
}

func TestHybridRestoreRejects(t *testing.T) {
	p := hybridPacer(t, Spec{Algorithm: Hybrid, Rate: 1})
	mustReserve(t, p, 5, 1, 0)
	good := p.AppendState(nil)
	for _, tc := range []struct {
		name string
		off  int
	}{{"active", 3 + 16}, {"burst", 3 + 24}, {"waiting", 3 + 32}, {"forfeited", 3 + 40}} {
		b := append([]byte(nil), good...)
		b[tc.off] = 0x80 // negative
		if err := p.RestoreState(b); !errors.Is(err, ErrCorruptState) {
			t.Errorf("%s negative: %v", tc.name, err)
		}
	}
	b := append([]byte(nil), good...)
	b[3+16+1] = 0x7f // active far above A
	if err := p.RestoreState(b); !errors.Is(err, ErrCorruptState) {
		t.Errorf("active above A: %v", err)
	}
}

// FuzzHybrid runs reservations and reconfigurations-free sequences on a
// hybrid pacer and checks conservation of tokens, the stated window bound,
// ordering, maxWait and the state round trip.
func FuzzHybrid(f *testing.F) {
	f.Add(int64(1e9), 1.1, 0.0, []byte{0, 1, 200, 9, 1, 255, 0, 3, 90, 90, 4, 4})
	f.Add(int64(1e5), 2.0, 0.125, []byte{1, 2, 3, 4, 5, 6, 7, 8, 100, 0, 0, 200})
	f.Add(int64(3e6), 1.0, 1.0, []byte{9, 9, 9, 9, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, interval int64, ratio, strictness float64, ops []byte) {
		if interval <= 0 || len(ops) > 300 {
			return
		}
		c, err := Compile(Spec{Algorithm: Hybrid, Rate: 1, Per: time.Duration(interval), BurstRatio: ratio, Strictness: strictness})
		if err != nil || c.BurstNanos > 1<<50 {
			return
		}
		var start, now, consumed int64 = 1 << 40, 1 << 40, 0
		p, _ := New(c, start)
		hp := p.(*HybridPacer)
		maxN := c.MaxPermits()
		type grant struct{ at, n int64 }
		var grants []grant
		for i := 0; i+1 < len(ops); i += 2 {
			now += int64(ops[i]) * interval / 8
			n := int64(ops[i+1]%8)%maxN + 1
			maxWait := int64(ops[i+1]>>3) * interval / 4
			q, err := p.Query(now, n)
			if err != nil {
				t.Fatal(err)
			}
			d, err := p.Reserve(now, n, maxWait)
			if err != nil {
				t.Fatal(err)
			}
			if d.AtNanos != q || d.AtNanos < now {
				t.Fatalf("Reserve %+v, Query %d, now %d", d, q, now)
			}
			if !d.Granted {
				if d.AtNanos-now <= maxWait {
					t.Fatalf("refused %+v within maxWait %d at %d", d, maxWait, now)
				}
				continue
			}
			if d.AtNanos-now > maxWait {
				t.Fatalf("granted %+v beyond maxWait %d at %d", d, maxWait, now)
			}
			if len(grants) > 0 && d.AtNanos < grants[len(grants)-1].at {
				t.Fatalf("served at %d before the previous grant at %d", d.AtNanos, grants[len(grants)-1].at)
			}
			grants = append(grants, grant{d.AtNanos, n})
			consumed += n * c.IntervalNanos
			pl := hp.Pools()
			if total := pl.ActiveNanos + pl.BurstNanos + pl.WaitingNanos + pl.ForfeitedNanos + consumed; total != c.ActiveNanos+hp.FillNanos()-start {
				t.Fatalf("tokens not conserved: pools %+v + consumed %d = %d, filled %d", pl, consumed, total, c.ActiveNanos+hp.FillNanos()-start)
			}
			checkStateRoundTrip(t, p)
		}
		a, b, iv := c.ActiveNanos, c.BurstNanos, c.IntervalNanos
		for i := range grants {
			sum := int64(0)
			for j := i; j < len(grants); j++ {
				sum += grants[j].n
				w := grants[j].at - grants[i].at
				bw, _ := mulDiv(b, w, a)
				if bound := (a + b + w + bw) / iv; sum > bound {
					t.Fatalf("%d permits in a window of %d ns, bound %d", sum, w, bound)
				}
			}
		}
	})
}

func TestHybridZeroAllocs(t *testing.T) {
	p := hybridPacer(t, Spec{Algorithm: Hybrid, Rate: 1e6})
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 700
		_, _ = p.Reserve(now, 1, 5000)
		_, _ = p.Query(now, 3)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Reserve+Query", allocs)
	}
}

func TestHybridSaturation(t *testing.T) {
	p := hybridPacer(t, Spec{Algorithm: Hybrid, Rate: 1})
	mustReserve(t, p, math.MaxInt64-5, 1, 0)
	d := mustReserve(t, p, math.MaxInt64-5, 1, math.MaxInt64)
	if d.Granted {
		t.Fatalf("granted at the end of time: %+v", d)
	}
}
