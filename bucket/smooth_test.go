package bucket

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// guavaEvents records acquires and sleeps in the format of Guava's
// RateLimiterTest ("R1.38" for an acquire that waited 1.375 s, "U4.00" for
// a 4 s sleep), with Java's %1.2f rounding (half up).
type guavaEvents struct {
	sleeper
	events []string
}

func javaSeconds(ns int64) string {
	c := (ns + 5_000_000) / 10_000_000
	return fmt.Sprintf("%d.%02d", c/100, c%100)
}

func (g *guavaEvents) acquire(n int64) {
	g.events = append(g.events, "R"+javaSeconds(g.sleeper.acquire(n)))
}

func (g *guavaEvents) sleepMillis(ms int64) {
	g.sleep(ms * 1e6)
	g.events = append(g.events, "U"+javaSeconds(ms*1e6))
}

func (g *guavaEvents) check(t *testing.T, want ...string) {
	t.Helper()
	got := strings.Join(g.events, ", ")
	if w := strings.Join(want, ", "); got != w {
		t.Fatalf("events\n got %s\nwant %s", got, w)
	}
}

func newGuava(t *testing.T, s Spec) *guavaEvents {
	// Guava's tests create the limiter on a fake stopwatch and use it at
	// once: the pacer's timeline starts when the events do.
	return &guavaEvents{sleeper: sleeper{t: t, p: mustNewAt(t, s, 1000*sec), now: 1000 * sec}}
}

// The following tests replay Guava's RateLimiterTest.

func TestBurstyGuavaSimple(t *testing.T) {
	g := newGuava(t, Spec{Algorithm: Bursty, Rate: 5})
	g.acquire(1)
	g.acquire(1)
	g.acquire(1)
	g.check(t, "R0.00", "R0.20", "R0.20") // QPS 5: 200 ms apart
}

func TestBurstyGuavaSimpleWeights(t *testing.T) {
	g := newGuava(t, Spec{Algorithm: Bursty, Rate: 1})
	for _, n := range []int64{1, 1, 2, 4, 8, 1} {
		g.acquire(n)
	}
	g.check(t, "R0.00", "R1.00", "R1.00", "R2.00", "R4.00", "R8.00")
}

func TestBurstyGuavaOneSecondBurst(t *testing.T) {
	g := newGuava(t, Spec{Algorithm: Bursty, Rate: 5})
	g.acquire(1) // Guava's limiter exists from here on
	g.events = nil
	g.sleepMillis(1000) // max capacity reached
	g.sleepMillis(1000) // this makes no difference
	g.acquire(1)        // from capacity
	g.acquire(1)
	g.acquire(3)
	g.acquire(1) // concluding a burst of 5 permits
	g.acquire(1) // capacity exhausted
	g.check(t, "U1.00", "U1.00", "R0.00", "R0.00", "R0.00", "R0.00", "R0.20")
}

func TestBurstyGuavaBurstyAndUpdate(t *testing.T) {
	g := newGuava(t, Spec{Algorithm: Bursty, Rate: 1})
	g.acquire(1)
	g.acquire(1)
	if err := g.p.Reconfigure(g.now, mustCompile(t, Spec{Algorithm: Bursty, Rate: 2})); err != nil {
		t.Fatal(err)
	}
	g.acquire(1) // still pays the previous, at the old rate
	g.acquire(2)
	g.acquire(4)
	g.acquire(1)
	g.check(t, "R0.00", "R1.00", "R1.00", "R0.50", "R1.00", "R2.00")
}

// TestBurstyStoredPermitsOfDocument004 is the classic SmoothBursty example: 10 s
// idle at 1 permit/s stores 10 permits; acquire(3) leaves 7; acquire(10)
// takes the 7 and 3 fresh ones, so the next request waits 3 s.
func TestBurstyStoredPermitsOfDocument004(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: 10}).(*BurstyPacer)
	if d := mustReserve(t, p, 0, 1, 0); !d.Granted || d.AtNanos != 0 {
		t.Fatalf("first: %+v", d)
	}
	now := 11 * sec // paid the first permit (1 s), then 10 s idle
	if d := mustReserve(t, p, now, 3, 0); !d.Granted || d.AtNanos != now {
		t.Fatalf("acquire(3): %+v", d)
	}
	if got := p.StoredNanos(); got != 7*sec {
		t.Fatalf("stored %d after acquire(3), want 7 permits", got)
	}
	if d := mustReserve(t, p, now, 10, 0); !d.Granted || d.AtNanos != now {
		t.Fatalf("acquire(10): %+v", d)
	}
	if at, _ := p.Query(now, 1); at != now+3*sec {
		t.Fatalf("next at %d, want now+3s", at)
	}
}

func TestBurstyFifteenAtFivePerSecond(t *testing.T) {
	g := newGuava(t, Spec{Algorithm: Bursty, Rate: 5})
	g.acquire(15)
	g.acquire(1)
	g.check(t, "R0.00", "R3.00") // 15 fresh permits take 3 s
}

// TestBurstyLargeRequestNextPays is SmoothBursty's acquire(100) at one per
// second: granted at once, and the next request waits 100 s.
func TestBurstyLargeRequestNextPays(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Bursty, Rate: 1})
	if d := mustReserve(t, p, 0, 100, 0); !d.Granted || d.AtNanos != 0 {
		t.Fatalf("acquire(100): %+v", d)
	}
	// tryAcquire semantics: refused unless willing to wait 100 s.
	if d := mustReserve(t, p, 0, 1, 100*sec-1); d.Granted || d.AtNanos != 100*sec {
		t.Fatalf("tryAcquire(1, 100s-1ns): %+v", d)
	}
	if d := mustReserve(t, p, 0, 1, 100*sec); !d.Granted || d.AtNanos != 100*sec {
		t.Fatalf("tryAcquire(1, 100s): %+v", d)
	}
}

// TestBurstyRefund: a refund lowers nextFree first (not below now), puts
// the rest in the store up to its cap, takes back at most maxNanos worth,
// and GrantSlackNanos is the room left in the store.
func TestBurstyRefund(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: 2}).(*BurstyPacer)
	r := Refunder(p)
	if got := r.GrantSlackNanos(0, 0); got != 2*sec {
		t.Fatalf("slack of an empty store: %d, want 2 s", got)
	}
	mustReserve(t, p, 0, 5, 0) // nextFree 5 s
	for _, c := range []struct{ n, maxNanos int64 }{{0, 10 * sec}, {-1, 10 * sec}, {3, sec - 1}} {
		if k := r.Refund(0, c.n, c.maxNanos, 0); k != 0 {
			t.Errorf("Refund(0, %d, %d) = %d, want 0", c.n, c.maxNanos, k)
		}
	}
	if k := r.Refund(sec, 3, 2*sec+sec/2, 0); k != 2 { // at most 2.5 s worth: 2 permits
		t.Fatalf("Refund(1s, 3, 2.5s) = %d, want 2", k)
	}
	if q, _ := p.Query(sec, 1); q != 3*sec || p.StoredNanos() != 0 {
		t.Fatalf("after refunding 2: nextFree %d, stored %d; want 3 s, 0", q, p.StoredNanos())
	}
	// 4 s to give back at 2 s: 1 s off nextFree (down to now), 2 s into
	// the store (its cap), 1 s lost.
	if k := r.Refund(2*sec, 4, 10*sec, 0); k != 4 {
		t.Fatalf("Refund(2s, 4) = %d, want 4", k)
	}
	if q, _ := p.Query(2*sec, 1); q != 2*sec || p.StoredNanos() != 2*sec {
		t.Fatalf("after refunding 4: nextFree %d, stored %d; want 2 s, 2 s", q, p.StoredNanos())
	}
	if got := r.GrantSlackNanos(2*sec, 2*sec); got != 0 {
		t.Errorf("slack of a full store: %d, want 0", got)
	}
	inf := mustNew(t, Spec{Algorithm: Bursty, Rate: math.Inf(1)}).(*BurstyPacer)
	if k := inf.Refund(0, 5, math.MaxInt64, 0); k != 0 {
		t.Errorf("an infinite rate refunded %d", k)
	}
	// nextFree never comes back before the latest grant's served time:
	// what would move it there goes to the store.
	q := mustNew(t, Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: 2}).(*BurstyPacer)
	mustReserve(t, q, 0, 2, 0)      // served at 0, nextFree 2 s
	mustReserve(t, q, 0, 1, 10*sec) // served at 2 s, nextFree 3 s
	if k := q.Refund(0, 2, 10*sec, 2*sec); k != 2 {
		t.Fatalf("Refund(0, 2, notBefore 2s) = %d, want 2", k)
	}
	if n, _ := q.Query(0, 1); n != 2*sec || q.StoredNanos() != sec {
		t.Errorf("after the refund: nextFree %d, stored %d; want 2 s, 1 s", n, q.StoredNanos())
	}
}

func TestBurstyImmediateTryAcquire(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Bursty, Rate: 1})
	if d := mustReserve(t, p, 0, 1, 0); !d.Granted {
		t.Fatal("first tryAcquire refused")
	}
	if d := mustReserve(t, p, 0, 1, 0); d.Granted {
		t.Fatal("second tryAcquire granted")
	}
}

func TestBurstyInfiniteRate(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Bursty, Rate: math.Inf(1)})
	for i := range 5 {
		if d := mustReserve(t, p, 7, 1<<40, 0); !d.Granted || d.AtNanos != 7 {
			t.Fatalf("reserve %d: %+v", i, d)
		}
	}
	// Guava: from an infinite rate the new rate starts with a full store.
	if err := p.Reconfigure(7, mustCompile(t, Spec{Algorithm: Bursty, Rate: 1})); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if d := mustReserve(t, p, 7, 1, 0); !d.Granted || d.AtNanos != 7 {
			t.Fatalf("after reconfigure %d: %+v", i, d)
		}
	}
	if d := mustReserve(t, p, 7, 1, 0); d.Granted || d.AtNanos != 7+sec {
		t.Fatalf("store exhausted: %+v", d)
	}
}

func TestBurstyReconfigureScalesStore(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: 4}).(*BurstyPacer)
	mustReserve(t, p, 0, 1, 0)
	mustReserve(t, p, 5*sec, 1, 0) // store: 4 s (capped), then 1 spent → 3 s
	if got := p.StoredNanos(); got != 3*sec {
		t.Fatalf("stored %d, want 3s", got)
	}
	if err := p.Reconfigure(5*sec, mustCompile(t, Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: 2})); err != nil {
		t.Fatal(err)
	}
	if got := p.StoredNanos(); got != 15e8 {
		t.Fatalf("stored %d after halving the maximum, want 1.5s", got)
	}
}

// TestWarmupExampleOfDocument004: stable 1 s, cold factor 3, warm-up 5 s;
// threshold 2.5 permits, maxPermits 5, and a cold start.
func TestWarmupExampleOfDocument004(t *testing.T) {
	g := newGuava(t, Spec{Algorithm: WarmingUp, Rate: 1, Warmup: 5 * time.Second})
	for range 6 {
		g.acquire(1)
	}
	// 5→4: (3+2.2)/2; 4→3: (2.2+1.4)/2; 3→2: 0.5*(1.4+1)/2 + 0.5; then 1 s.
	g.check(t, "R0.00", "R2.60", "R1.80", "R1.10", "R1.00", "R1.00")
}

func TestWarmupGuavaWarmUp(t *testing.T) {
	g := newGuava(t, Spec{Algorithm: WarmingUp, Rate: 2, Warmup: 4 * time.Second, ColdFactor: 3})
	for range 8 {
		g.acquire(1)
	}
	g.sleepMillis(500)  // repay the last acquire
	g.sleepMillis(4000) // cold again
	for range 8 {
		g.acquire(1)
	}
	g.sleepMillis(500)
	g.sleepMillis(2000) // not cold: it would take another 2 s
	for range 8 {
		g.acquire(1)
	}
	g.check(t,
		"R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50",
		"U0.50", "U4.00",
		"R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50",
		"U0.50", "U2.00",
		"R0.00, R0.50, R0.50, R0.50, R0.50, R0.50, R0.50, R0.50")
}

func TestWarmupGuavaWarmUpAndUpdate(t *testing.T) {
	g := newGuava(t, Spec{Algorithm: WarmingUp, Rate: 2, Warmup: 4 * time.Second, ColdFactor: 3})
	for range 8 {
		g.acquire(1)
	}
	g.sleepMillis(4500) // back to cold (warm-up period + repay the last acquire)
	for range 3 {
		g.acquire(1)
	}
	if err := g.p.Reconfigure(g.now, mustCompile(t, Spec{Algorithm: WarmingUp, Rate: 4, Warmup: 4 * time.Second, ColdFactor: 3})); err != nil {
		t.Fatal(err)
	}
	g.acquire(1) // still pays the previous, at the old rate
	for range 4 {
		g.acquire(1)
	}
	g.sleepMillis(4250)
	for range 11 {
		g.acquire(1)
	}
	g.check(t,
		"R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50",
		"U4.50",
		"R0.00, R1.38, R1.13",
		"R0.88",
		"R0.34, R0.28, R0.25, R0.25",
		"U4.25",
		"R0.00, R0.72, R0.66, R0.59, R0.53, R0.47, R0.41",
		"R0.34, R0.28, R0.25, R0.25")
}

// TestWarmupBatchEqualsSingles: acquiring k permits at once costs exactly
// what k single acquires cost, from any point of the store.
func TestWarmupBatchEqualsSingles(t *testing.T) {
	specs := []Spec{
		{Algorithm: WarmingUp, Rate: 1, Warmup: 5 * time.Second},
		{Algorithm: WarmingUp, Rate: 3, Warmup: 7 * time.Second, ColdFactor: 4.7},
		{Algorithm: WarmingUp, Rate: 997, Warmup: 12345678, ColdFactor: 1.01},
	}
	for _, s := range specs {
		c := mustCompile(t, s)
		maxPermits := c.MaxStoredNanos/c.IntervalNanos + 3
		for pre := int64(0); pre < maxPermits; pre++ {
			for k := int64(1); k <= maxPermits-pre; k++ {
				batch, singles := mustNew(t, s), mustNew(t, s)
				if pre > 0 {
					mustReserve(t, batch, 0, pre, 0)
					mustReserve(t, singles, 0, pre, 0)
				}
				mustReserve(t, batch, 0, k, math.MaxInt64)
				for range k {
					mustReserve(t, singles, 0, 1, math.MaxInt64)
				}
				a, _ := batch.Query(0, 1)
				b, _ := singles.Query(0, 1)
				if a != b {
					t.Fatalf("%+v after %d: acquire(%d) ends at %d, %d singles at %d", s, pre, k, a, k, b)
				}
			}
		}
	}
}

func TestSmoothInvalidInput(t *testing.T) {
	for _, s := range []Spec{{Algorithm: Bursty, Rate: 1}, {Algorithm: WarmingUp, Rate: 1, Warmup: time.Second}} {
		p := mustNew(t, s)
		if _, err := p.Reserve(0, 0, 0); !errors.Is(err, ErrInvalidPermits) {
			t.Errorf("%s n=0: %v", s.Algorithm, err)
		}
		if _, err := p.Reserve(0, math.MaxInt64, 0); !errors.Is(err, ErrTooManyPermits) {
			t.Errorf("%s n=MaxInt64: %v", s.Algorithm, err)
		}
		if _, err := p.Reserve(0, 1, -5); !errors.Is(err, ErrInvalidDuration) {
			t.Errorf("%s maxWait=-5: %v", s.Algorithm, err)
		}
		if _, err := p.Query(0, -1); !errors.Is(err, ErrInvalidPermits) {
			t.Errorf("%s Query n=-1: %v", s.Algorithm, err)
		}
		if err := p.Reconfigure(0, mustCompile(t, Spec{Algorithm: Strict, Rate: 1})); !errors.Is(err, ErrInvalidAlgorithm) {
			t.Errorf("%s Reconfigure to strict: %v", s.Algorithm, err)
		}
	}
}

// FuzzSmooth runs reservations on a bursty or warming-up pacer and checks
// the stated window bound, that time never goes backwards in grants, and
// that the state round-trips.
func FuzzSmooth(f *testing.F) {
	f.Add(true, int64(1e6), 0.5, []byte{0, 1, 9, 2, 200, 1, 3, 7, 0, 0, 0, 0})
	f.Add(false, int64(3e8), 2.0, []byte{255, 3, 0, 1, 0, 1, 40, 2})
	f.Fuzz(func(t *testing.T, bursty bool, interval int64, knob float64, ops []byte) {
		if interval <= 0 || len(ops) > 300 || math.IsNaN(knob) || knob <= 0 || knob > 100 {
			return
		}
		s := Spec{Algorithm: WarmingUp, Rate: 1, Per: time.Duration(interval), Warmup: time.Duration(knob * float64(interval)), ColdFactor: 1 + knob}
		if bursty {
			s = Spec{Algorithm: Bursty, Rate: 1, Per: time.Duration(interval), MaxBurstSeconds: knob * float64(interval) / 1e9}
		}
		c, err := Compile(s)
		if err != nil {
			return
		}
		p, _ := New(c, 0)
		type grant struct{ at, n int64 }
		var grants []grant
		now := int64(0)
		for i := 0; i+1 < len(ops); i += 2 {
			now += int64(ops[i]) * interval / 16
			n := int64(ops[i+1]%5) + 1
			maxWait := int64(ops[i+1]>>3) * interval / 2
			before, _ := p.Query(now, n)
			d, err := p.Reserve(now, n, maxWait)
			if err != nil {
				t.Fatal(err)
			}
			if d.AtNanos != before {
				t.Fatalf("Reserve at %d (%+v) disagrees with Query %d", now, d, before)
			}
			if d.AtNanos < now {
				t.Fatalf("decision %+v before now %d", d, now)
			}
			if d.Granted {
				if d.AtNanos-now > maxWait {
					t.Fatalf("granted %+v beyond maxWait %d at %d", d, maxWait, now)
				}
				if len(grants) > 0 && d.AtNanos < grants[len(grants)-1].at {
					t.Fatalf("grant at %d before the previous one at %d", d.AtNanos, grants[len(grants)-1].at)
				}
				grants = append(grants, grant{d.AtNanos, n})
			}
			checkStateRoundTrip(t, p)
		}
		// Window bound: for every window [a_i, a_j], the permits of grants
		// i..j-1 are at most (W + stored)/I (bursty) or W/I (warm-up).
		extra := int64(0)
		if bursty {
			extra = c.MaxStoredNanos
		}
		for i := range grants {
			sum := int64(0)
			for j := i; j < len(grants); j++ {
				w := grants[j].at - grants[i].at
				if bound := (w + extra) / c.IntervalNanos; sum > bound {
					t.Fatalf("%d permits before the last grant in a window of %d ns, bound %d", sum, w, bound)
				}
				sum += grants[j].n
			}
		}
	})
}

func TestSmoothZeroAllocs(t *testing.T) {
	for _, s := range []Spec{{Algorithm: Bursty, Rate: 1e6}, {Algorithm: WarmingUp, Rate: 1e6, Warmup: time.Millisecond}} {
		p := mustNew(t, s)
		now := int64(0)
		allocs := testing.AllocsPerRun(1000, func() {
			now += 700
			_, _ = p.Reserve(now, 1, 500)
			_, _ = p.Query(now, 2)
		})
		if allocs != 0 {
			t.Fatalf("%s: %v allocations per Reserve+Query", s.Algorithm, allocs)
		}
	}
}

// TestFreshPacerStoresFromItsOrigin: like Guava's RateLimiter, a pacer's
// timeline starts when it is created, so a bursty limit created and left
// idle for a second holds a second of permits at its first request.
func TestFreshPacerStoresFromItsOrigin(t *testing.T) {
	p := mustNewAt(t, Spec{Algorithm: Bursty, Rate: 5}, 10*sec).(*BurstyPacer)
	if d := mustReserve(t, p, 11*sec, 5, 0); !d.Granted || d.AtNanos != 11*sec {
		t.Fatalf("Reserve(11s, 5, 0) a second after creation = %+v, want granted at once", d)
	}
	if got := p.StoredNanos(); got != 0 {
		t.Fatalf("stored %d ns after taking the 5 stored permits, want 0", got)
	}
	// The 5 permits came from the store: the next one is not delayed.
	if d := mustReserve(t, p, 11*sec, 1, 0); !d.Granted || d.AtNanos != 11*sec {
		t.Fatalf("Reserve(11s, 1, 0) = %+v, want granted at once (the store paid for the first 5)", d)
	}
	// A now before the origin counts as the origin.
	q := mustNewAt(t, Spec{Algorithm: Strict, Rate: 1}, 10*sec)
	if d := mustReserve(t, q, 3*sec, 1, 0); !d.Granted || d.AtNanos != 10*sec {
		t.Fatalf("strict Reserve(3s) on a pacer created at 10s = %+v, want granted at 10s", d)
	}
}
