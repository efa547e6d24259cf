package bucket

import (
	"math"
	"math/bits"
)

// WarmingUpPacer is Guava's SmoothWarmingUp: idle time is stored as permits
// that are served slower than fresh ones, so that a limiter that was idle
// (cold) ramps up to its stable rate over the warm-up period.
//
// # Model
//
// Let I be the stable interval, C = round(ColdFactor*I) the cold interval
// and T the warm-up period. Guava's geometry, in permits:
//
//	thresholdPermits = 0.5*T/I
//	maxPermits       = thresholdPermits + 2*T/(I+C)
//
// The cost of the stored permit at position x (0 <= x <= maxPermits) is I
// below the threshold and rises linearly to C at maxPermits; taking k
// stored permits costs the area under that function between x-k and x, a
// rectangle plus a trapezoid. Going from maxPermits to the threshold costs
// exactly T, going from the threshold to 0 costs T/2. Idle time adds stored
// permits at one per T/maxPermits, so a limiter left idle for T is cold
// again. A fresh pacer starts cold, with maxPermits stored.
//
// In this package stored permits are stored time (permits times I, see
// smooth.go): ThresholdNanos = floor(T/2), MaxStoredNanos = ThresholdNanos
// + floor(2*T*I/(I+C)), and idle time e adds floor(e*MaxStoredNanos/T)
// stored nanoseconds. The cost of draining the store from s down to 0 is
//
//	F(s) = s                              for s <= ThresholdNanos
//	F(s) = s + floor(floor(u*u/W)*(C-I)/(2*I)),  u = s - ThresholdNanos,
//	                                       W = MaxStoredNanos - ThresholdNanos
//
// (exact 128-bit integer arithmetic, monotone in s), and taking the stored
// time t from s costs F(s) - F(s-t). Because costs are differences of one
// function, they telescope: acquiring k permits at once costs exactly what k
// single acquires in a row cost. Fresh permits cost I each.
//
// Reservation, maxWait and Reconfigure are as for BurstyPacer (Guava's
// setRate: nextFree kept, stored permits scaled by newMax/oldMax, which in
// stored time is the same ratio).
//
// # Worked example
//
// Stable interval 1 s, cold factor 3, warm-up 5 s: threshold 2.5 permits,
// maxPermits = 2.5 + 2*5/(1+3) = 5; the cost function runs from 3 s at 5
// stored permits down to 1 s at 2.5. Cold, the first permit is served now
// and costs the average of 3 s and 2.2 s = 2.6 s; the next costs 1.8 s, the
// third 1.1 s (half a permit on the slope, half at the threshold), then 1 s
// each: 7.5 s for the whole store. Guava's own test, at 2 permits per
// second, warm-up 4 s, cold factor 3: waits 0, 1.375, 1.125, 0.875, 0.625,
// 0.5, 0.5, 0.5 s.
//
// # Bound
//
// Every permit, stored or fresh, costs at least I (F(s)-F(s-t) >= t), so
// successive grants are served at a_{i+1} >= a_i + n_i*I, and
//
//	permits served in any window of length W <= floor(W/I) + n_last
//
// where n_last is the size of the last grant in the window: a warming-up
// pacer never exceeds its stable rate.
type WarmingUpPacer struct{ smooth }

var _ Scheduler = (*WarmingUpPacer)(nil)

// warmupAccrual is the stored time added by elapsed idle nanoseconds:
// floor(elapsed*MaxStoredNanos/Warmup), saturated to MaxStoredNanos.
func warmupAccrual(c *Config, elapsed int64) int64 {
	q, ok := mulDiv(elapsed, c.MaxStoredNanos, int64(c.Spec.Warmup))
	if !ok {
		return c.MaxStoredNanos
	}
	return q
}

// warmupDrainCost is F(s), the cost of draining the store from s to 0.
// Compile rejects a config whose F(MaxStoredNanos) does not fit in int64
// (warmupMaxDrainCost), and F is monotone, so for a compiled config no
// step here saturates: every cost is exact.
func warmupDrainCost(c *Config, s int64) int64 {
	f, _ := warmupDrainCostExact(c, s)
	return f
}

// warmupDrainCostExact is F(s) = s + floor(floor(u*u/W)*(C-I)/(2*I)) with
// 128-bit intermediates, and false if it does not fit in int64 (the result
// then saturates).
func warmupDrainCostExact(c *Config, s int64) (int64, bool) {
	if s <= c.ThresholdNanos {
		return s, true
	}
	u := s - c.ThresholdNanos
	w := c.MaxStoredNanos - c.ThresholdNanos
	if w <= 0 {
		return s, true
	}
	t, ok := mulDiv(u, u, w) // <= u since u <= w
	if !ok {
		return math.MaxInt64, false
	}
	// floor(t*(C-I)/(2I)) equals floor(floor(t*(C-I)/I)/2); the divisor 2I
	// fits in uint64 for every interval.
	hi, lo := bits.Mul64(uint64(t), uint64(c.ColdIntervalNanos-c.IntervalNanos))
	den := 2 * uint64(c.IntervalNanos)
	if hi >= den {
		return math.MaxInt64, false
	}
	extra, _ := bits.Div64(hi, lo, den)
	if extra > math.MaxInt64 || s > math.MaxInt64-int64(extra) {
		return math.MaxInt64, false
	}
	return s + int64(extra), true
}

// warmupCost is the wait charged for taking take of the stored time stored.
func warmupCost(c *Config, stored, take int64) int64 {
	return warmupDrainCost(c, stored) - warmupDrainCost(c, stored-take)
}
