package bucket

import (
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// The stated bounds (doc.go) checked over everything Compile accepts, not
// only over reasonable configurations: each trial draws a Spec from the
// whole accepted range of every field (log-uniform over the magnitudes),
// drives its pacer with random times, counts and waits scaled to its
// interval (idle periods long enough to fill any store, bursts of requests
// that queue into debt), and checks every window that starts at a grant
// against the algorithm's formula, computed exactly with big integers.

var boundTrials = flag.Int("bound.trials", 3000, "random configurations per algorithm in TestBoundsOverAcceptedRange")

func TestBoundsOverAcceptedRange(t *testing.T) {
	for _, a := range []Algorithm{Strict, Bursty, WarmingUp, Hybrid} {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(a), 42))
			accepted := eachAcceptedSpec(rng, a, *boundTrials, func(trial int, s Spec, c Config) {
				if msg := checkBoundTrial(rng, c); msg != "" {
					t.Fatalf("trial %d, spec %+v (interval %d ns): %s", trial, s, c.IntervalNanos, msg)
				}
			})
			if accepted < *boundTrials {
				t.Fatalf("weak test: only %d accepted configurations", accepted)
			}
		})
	}
}

// eachAcceptedSpec draws specs of algorithm a with rng until trials of
// them compile (or 100*trials are drawn), calls check with each compiled
// one that has a bound to check, and returns how many compiled.
func eachAcceptedSpec(rng *rand.Rand, a Algorithm, trials int, check func(trial int, s Spec, c Config)) (accepted int) {
	for trial := 0; accepted < trials && trial < 100*trials; trial++ {
		s := randomSpec(rng, a)
		c, err := Compile(s)
		if err != nil {
			continue
		}
		accepted++
		if c.IntervalNanos == 0 {
			continue // an infinite bursty rate has no bound to check
		}
		check(trial, s, c)
	}
	return accepted
}

// logUniform returns a value between lo and hi (both > 0), log-uniformly.
func logUniform(rng *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
}

// logInt returns an int64 in [lo, hi], log-uniformly (lo >= 1).
func logInt(rng *rand.Rand, lo, hi int64) int64 {
	v := int64(logUniform(rng, float64(lo), float64(hi)))
	return min(max(v, lo), hi)
}

// randomSpec draws a spec of algorithm a from the whole range the edge
// accepts: any rate, any period, any option value, including the extremes.
func randomSpec(rng *rand.Rand, a Algorithm) Spec {
	s := Spec{Algorithm: a, Rate: logUniform(rng, 1e-12, 1e12), Per: time.Duration(logInt(rng, 1, math.MaxInt64))}
	if rng.IntN(4) == 0 {
		s.Rate = float64(1 + rng.IntN(1000)) // the common case: whole rates
		s.Per = []time.Duration{time.Second, time.Minute, 6 * time.Second, time.Hour}[rng.IntN(4)]
	}
	switch a {
	case Strict:
		s.MaxReserved = []int64{0, 1, 2, logInt(rng, 1, math.MaxInt64-1)}[rng.IntN(4)]
		if rng.IntN(2) == 0 {
			s.Expiry = time.Duration(logInt(rng, 1, math.MaxInt64))
		}
	case Bursty:
		s.MaxBurstSeconds = []float64{0, logUniform(rng, 1e-9, 9e9)}[rng.IntN(2)]
	case WarmingUp:
		s.Warmup = time.Duration(logInt(rng, 1, math.MaxInt64))
		s.ColdFactor = []float64{0, 1, logUniform(rng, 1, 1e12)}[rng.IntN(3)]
	case Hybrid:
		switch rng.IntN(4) {
		case 0:
			s.BurstRatio = logUniform(rng, 1, 1e9)
		case 1:
			s.Strictness = 1
		case 2:
			s.Strictness = math.Ldexp(1, -(1 + rng.IntN(MaxCompensationShift)))
		}
	}
	return s
}

type grantRecord struct{ at, n int64 }

// arrivals draws the requests of a bound trial on one config: the time
// moves on, sometimes by long enough to fill any store (stored time,
// warm-up, pools) or not quite, sometimes by less than an interval, and a
// request asks for one permit or for up to min(MaxPermits, 2^20).
type arrivals struct {
	rng       *rand.Rand
	i, fill   int64 // the interval; the idle time that fills any store
	maxN, now int64
}

func newArrivals(rng *rand.Rand, c Config) *arrivals {
	i := c.IntervalNanos
	return &arrivals{rng: rng, i: i, maxN: min(c.MaxPermits(), 1<<20),
		fill: max(c.MaxStoredNanos, int64(c.Spec.Warmup), c.ActiveNanos+c.BurstNanos, i),
		now:  logInt(rng, 1, math.MaxInt64/4)}
}

// next returns the next request's time and size.
func (a *arrivals) next() (now, n int64) {
	switch a.rng.IntN(6) {
	case 0: // idle long enough to fill the store (or not quite)
		a.now = satAdd(a.now, logInt(a.rng, 1, max(1, satMul(a.fill, 2))))
	case 1, 2:
		a.now = satAdd(a.now, a.rng.Int64N(max(1, min(a.i, math.MaxInt64/4))))
	}
	// Cluster time starts at 0 and runs at real speed: keep it in the
	// first half of the int64 timeline (146 years), where debt and waits
	// still have room.
	a.now = min(a.now, math.MaxInt64/2)
	n = int64(1)
	if a.rng.IntN(3) == 0 {
		n = logInt(a.rng, 1, a.maxN)
	}
	return a.now, n
}

// trialWindows returns the window lengths a bound trial on c checks.
func trialWindows(rng *rand.Rand, c Config) []int64 {
	i := c.IntervalNanos
	return []int64{0, i - 1, i, 2*i - 1, satMul(i, 10), max(c.MaxStoredNanos, 1), logInt(rng, 1, math.MaxInt64/2)}
}

// checkBoundTrial drives a pacer of c and checks its bound; it returns a
// description of the first violation, or "".
func checkBoundTrial(rng *rand.Rand, c Config) string {
	p, err := New(c, 0)
	if err != nil {
		return fmt.Sprintf("New: %v", err)
	}
	i := c.IntervalNanos
	arrive := newArrivals(rng, c)
	var grants []grantRecord
	for range 60 {
		now, n := arrive.next()
		maxWait := []int64{0, satMul(i, n), math.MaxInt64, logInt(rng, 1, math.MaxInt64)}[rng.IntN(4)]
		d, err := p.Reserve(now, n, maxWait)
		if err != nil {
			return fmt.Sprintf("Reserve(%d, %d, %d): %v", now, n, maxWait, err)
		}
		if !d.Granted {
			continue
		}
		if d.AtNanos < now || d.AtNanos-now > maxWait {
			return fmt.Sprintf("Reserve(%d, %d, %d) = %+v: outside [now, now+maxWait]", now, n, maxWait, d)
		}
		if d.AtNanos == math.MaxInt64 {
			return fmt.Sprintf("Reserve(%d, %d, %d) granted at the end of time", now, n, maxWait)
		}
		if len(grants) > 0 && d.AtNanos < grants[len(grants)-1].at {
			return fmt.Sprintf("grant at %d before the previous one at %d", d.AtNanos, grants[len(grants)-1].at)
		}
		grants = append(grants, grantRecord{d.AtNanos, n})
	}
	for _, w := range trialWindows(rng, c) {
		if w < 0 {
			continue
		}
		if msg := checkWindows(c, grants, w); msg != "" {
			return msg
		}
	}
	return ""
}

// checkWindows checks every window [a_j, a_j + w] against the bound of c.
func checkWindows(c Config, grants []grantRecord, w int64) string {
	for j := range grants {
		start := grants[j].at
		end := satAdd(start, w)
		count := new(big.Int)
		var last int64
		for k := j; k < len(grants) && grants[k].at <= end; k++ {
			if c.Spec.Algorithm == Strict {
				count.Add(count, big.NewInt(strictSlotsIn(grants[k], c.IntervalNanos, start, end)))
			} else {
				count.Add(count, big.NewInt(grants[k].n))
			}
			last = grants[k].n
		}
		bound := boundOf(c, w, last)
		if count.Cmp(bound) > 0 {
			return fmt.Sprintf("window [%d, %d] (W = %d) holds %v permits, bound %v (grants from %d: %v)",
				start, end, w, count, bound, j, grants[j:min(len(grants), j+8)])
		}
	}
	return ""
}

// strictSlotsIn counts the slots at, at+I, ... of a strict grant inside
// [start, end].
func strictSlotsIn(g grantRecord, i, start, end int64) int64 {
	var n int64
	for k := int64(0); k < g.n; k++ {
		slot := satAdd(g.at, satMul(k, i))
		if slot > end {
			break
		}
		if slot >= start {
			n++
		}
	}
	return n
}

// boundOf is the stated bound of doc.go for a window of length w whose last
// grant has nLast permits, computed exactly.
func boundOf(c Config, w, nLast int64) *big.Int {
	b := func(v int64) *big.Int { return big.NewInt(v) }
	i := b(c.IntervalNanos)
	q := new(big.Int)
	switch c.Spec.Algorithm {
	case Strict:
		q.Quo(b(w), i)
		return q.Add(q, b(1))
	case Bursty:
		q.Add(b(w), b(c.MaxStoredNanos))
		q.Quo(q, i)
		return q.Add(q, b(nLast))
	case WarmingUp:
		q.Quo(b(w), i)
		return q.Add(q, b(nLast))
	case Hybrid:
		a, bp := b(c.ActiveNanos), b(c.BurstNanos)
		extra := new(big.Int).Mul(bp, b(w))
		extra.Quo(extra, a)
		q.Add(a, bp)
		q.Add(q, b(w))
		q.Add(q, extra)
		return q.Quo(q, i)
	}
	return q
}
