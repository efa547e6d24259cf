package bucket

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"time"
)

// Defaults applied by Compile to options left at zero.
const (
	// DefaultPer is the period a Rate is counted over when Spec.Per is 0.
	DefaultPer = time.Second
	// DefaultMaxBurstSeconds is Guava's SmoothBursty default: one second of
	// permits may be stored while idle.
	DefaultMaxBurstSeconds = 1.0
	// DefaultColdFactor is Guava's SmoothWarmingUp default:
	// coldInterval = 3 * stableInterval.
	DefaultColdFactor = 3.0
	// DefaultBurstRatio is the EngineBlock default: a limiter behind its
	// schedule catches up at 110% of its rate.
	DefaultBurstRatio = 1.1
	// HybridMinActiveNanos is the smallest active pool of a Hybrid limiter
	// (1 ms); the pool is never smaller than one op either.
	HybridMinActiveNanos = int64(time.Millisecond)
	// MaxCompensationShift bounds Hybrid burst compensation: the smallest
	// strictness fraction accepted is 1/2^MaxCompensationShift.
	MaxCompensationShift = 62
	// DefaultHoldTTL is how long a Concurrency permit is held when
	// Spec.HoldTTL is 0 and the permit is not released.
	DefaultHoldTTL = 60 * time.Second
	// MaxHoldTTL is the longest Spec.HoldTTL accepted.
	MaxHoldTTL = 24 * time.Hour
	// MaxInFlightLimit is the largest Spec.MaxInFlight accepted; it also
	// bounds the permits a ConcurrencyPacer holds in all (see its Model).
	MaxInFlightLimit = int64(1) << 20
)

// Compile validates s, applies the defaults of its algorithm and returns the
// Config every decision is computed on. The returned Config.Spec is s with
// the defaults filled in (Per, Expiry, MaxBurstSeconds, ColdFactor,
// BurstRatio, HoldTTL), so that Compile(c.Spec) == c.
//
// Every invalid input is rejected with an error that wraps one of the
// package's sentinel errors and names the allowed values:
//   - Algorithm not one of the five: ErrInvalidAlgorithm;
//   - Per < 0, Expiry < 0, Warmup <= 0, HoldTTL < 0 or > MaxHoldTTL, Per
//     not 0 for Concurrency: ErrInvalidDuration;
//   - Rate NaN, <= 0, -Inf, +Inf for anything but Bursty, or so high that
//     the interval would be below 1 ns, or so low that it would exceed
//     math.MaxInt64 ns; Rate not 0 for Concurrency: ErrInvalidRate;
//   - an option of another algorithm that is not zero, or an option out of
//     its range: ErrInvalidOption;
//   - a derived quantity that does not fit in int64 nanoseconds: ErrOverflow.
func Compile(s Spec) (Config, error) {
	var c Config
	switch s.Algorithm {
	case Strict, Bursty, WarmingUp, Hybrid, Concurrency:
	default:
		return Config{}, fmt.Errorf("bucket: algorithm %s: %w (allowed: %s)", s.Algorithm, ErrInvalidAlgorithm, allowedAlgorithms)
	}
	if err := checkForeignOptions(s); err != nil {
		return Config{}, err
	}
	if s.Algorithm == Concurrency {
		return compileConcurrency(s)
	}
	per := s.Per
	if per < 0 {
		return Config{}, fmt.Errorf("bucket: per %v: %w (allowed: > 0, or 0 for one second)", per, ErrInvalidDuration)
	}
	if per == 0 {
		per = DefaultPer
	}
	interval, err := compileInterval(s.Algorithm, s.Rate, per)
	if err != nil {
		return Config{}, err
	}
	// The normalized spec holds only the options of s.Algorithm, with their
	// defaults applied; foreign options are +0 (not -0) so that equal
	// configs encode to equal bytes.
	c.Spec = Spec{Algorithm: s.Algorithm, Rate: s.Rate, Per: per}
	c.IntervalNanos = interval
	switch s.Algorithm {
	case Strict:
		err = compileStrict(&c, s)
	case Bursty:
		err = compileBursty(&c, s)
	case WarmingUp:
		err = compileWarmingUp(&c, s)
	case Hybrid:
		err = compileHybrid(&c, s)
	}
	if err != nil {
		return Config{}, err
	}
	return c, nil
}

// compileInterval returns ceil(per/rate) in nanoseconds, computed exactly:
// a float64 rate is a dyadic rational m*2^e, so per/rate is the rational
// per*2^-e/m, whose ceiling big integers give without rounding. (A float
// quotient rounded first could come out one nanosecond short, a limit
// faster than configured.) An infinite Bursty rate gives interval 0.
func compileInterval(a Algorithm, rate float64, per time.Duration) (int64, error) {
	switch {
	case math.IsNaN(rate):
		return 0, fmt.Errorf("bucket: rate NaN: %w (allowed: finite and > 0)", ErrInvalidRate)
	case math.IsInf(rate, 1):
		if a == Bursty {
			return 0, nil
		}
		return 0, fmt.Errorf("bucket: rate +Inf: %w (allowed for bursty only; %s needs a finite rate > 0)", ErrInvalidRate, a)
	case rate <= 0 || math.IsInf(rate, -1):
		return 0, fmt.Errorf("bucket: rate %g: %w (allowed: finite and > 0)", rate, ErrInvalidRate)
	}
	q, ok := ceilQuotient(int64(per), rate)
	switch {
	case !ok:
		return 0, fmt.Errorf("bucket: rate %g per %v: %w (the interval ceil(per/rate) must be at most %d ns)",
			rate, per, ErrInvalidRate, int64(math.MaxInt64))
	case q < 1: // more than one permit per nanosecond
		return 0, fmt.Errorf("bucket: rate %g per %v: %w (the maximum is one permit per nanosecond, i.e. %d per %v)",
			rate, per, ErrInvalidRate, int64(per), per)
	}
	return q, nil
}

// ceilQuotient returns ceil(per/rate) for per > 0 and a finite rate > 0,
// exactly; 0 if per/rate < 1 (more than one permit per nanosecond), and
// false if the quotient exceeds math.MaxInt64.
func ceilQuotient(per int64, rate float64) (int64, bool) {
	frac, exp := math.Frexp(rate) // rate = frac * 2^exp, frac in [0.5, 1)
	mant := int64(math.Ldexp(frac, 53))
	exp -= 53 // rate = mant * 2^exp exactly
	num := new(big.Int).SetInt64(per)
	den := new(big.Int).SetInt64(mant)
	if exp >= 0 {
		den.Lsh(den, uint(exp))
	} else {
		num.Lsh(num, uint(-exp))
	}
	if num.Cmp(den) < 0 {
		return 0, true
	}
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, false
	}
	return q.Int64(), true
}

// checkForeignOptions rejects options that belong to another algorithm.
func checkForeignOptions(s Spec) error {
	type opt struct {
		name   string
		owner  Algorithm
		nonzer bool
	}
	opts := [...]opt{
		{"MaxReserved", Strict, s.MaxReserved != 0},
		{"Expiry", Strict, s.Expiry != 0},
		{"MaxBurstSeconds", Bursty, s.MaxBurstSeconds != 0},
		{"Warmup", WarmingUp, s.Warmup != 0},
		{"ColdFactor", WarmingUp, s.ColdFactor != 0},
		{"BurstRatio", Hybrid, s.BurstRatio != 0},
		{"Strictness", Hybrid, s.Strictness != 0},
		{"MaxInFlight", Concurrency, s.MaxInFlight != 0},
		{"HoldTTL", Concurrency, s.HoldTTL != 0},
	}
	for _, o := range opts {
		if o.owner != s.Algorithm && o.nonzer {
			return fmt.Errorf("bucket: option %s belongs to algorithm %s: %w (must be zero for %s)",
				o.name, o.owner, ErrInvalidOption, s.Algorithm)
		}
	}
	return nil
}

// compileStrict fills the Strict fields: MaxReserved >= 0 and the expiry.
func compileStrict(c *Config, s Spec) error {
	if s.MaxReserved < 0 || s.MaxReserved == math.MaxInt64 {
		return fmt.Errorf("bucket: strict MaxReserved %d: %w (allowed: 0 to %d)", s.MaxReserved, ErrInvalidOption, int64(math.MaxInt64-1))
	}
	if s.Expiry < 0 {
		return fmt.Errorf("bucket: strict Expiry %v: %w (allowed: > 0, or 0 for the default of half an interval)", s.Expiry, ErrInvalidDuration)
	}
	exp := int64(s.Expiry)
	if exp == 0 {
		exp = DefaultExpiryNanos(c.IntervalNanos)
	}
	c.Spec.MaxReserved = s.MaxReserved
	c.Spec.Expiry = time.Duration(exp)
	c.ExpiryNanos = exp
	return nil
}

// DefaultExpiryNanos is the Strict expiry used when Spec.Expiry is 0: half
// the interval, at least 1 ns. A permit used late by at most the expiry
// keeps the spacing between used permits at >= interval - expiry, so the
// default keeps at least half the configured spacing while giving a late
// caller half an interval of slack.
func DefaultExpiryNanos(intervalNanos int64) int64 {
	return max(intervalNanos/2, 1)
}

// compileBursty fills MaxStoredNanos = round(MaxBurstSeconds * 1e9).
func compileBursty(c *Config, s Spec) error {
	mbs := s.MaxBurstSeconds
	if math.IsNaN(mbs) || math.IsInf(mbs, 0) || mbs < 0 {
		return fmt.Errorf("bucket: bursty MaxBurstSeconds %g: %w (allowed: finite and > 0, or 0 for the default %g)", mbs, ErrInvalidOption, DefaultMaxBurstSeconds)
	}
	if mbs == 0 {
		mbs = DefaultMaxBurstSeconds
	}
	stored := math.Round(float64(mbs * 1e9))
	if stored >= math.MaxInt64 {
		return fmt.Errorf("bucket: bursty MaxBurstSeconds %g: %w (allowed: at most %d seconds)", mbs, ErrOverflow, int64(math.MaxInt64)/1e9)
	}
	c.Spec.MaxBurstSeconds = mbs
	c.MaxStoredNanos = int64(stored)
	return nil
}

// compileWarmingUp fills the warm-up geometry in stored time (see
// warmup.go): threshold = warmup/2, max = threshold +
// 2*warmup*stable/(stable+cold), cold = round(coldFactor*stable).
func compileWarmingUp(c *Config, s Spec) error {
	if s.Warmup <= 0 {
		return fmt.Errorf("bucket: warmup Warmup %v: %w (allowed: > 0)", s.Warmup, ErrInvalidDuration)
	}
	cf := s.ColdFactor
	if math.IsNaN(cf) || math.IsInf(cf, 0) || (cf < 1 && cf != 0) {
		return fmt.Errorf("bucket: warmup ColdFactor %g: %w (allowed: finite and >= 1, or 0 for the default %g)", cf, ErrInvalidOption, DefaultColdFactor)
	}
	if cf == 0 {
		cf = DefaultColdFactor
	}
	stable := c.IntervalNanos
	cold := math.Round(float64(cf * float64(stable)))
	if cold >= math.MaxInt64 || stable > math.MaxInt64-int64(cold) {
		return fmt.Errorf("bucket: warmup ColdFactor %g at interval %d ns: %w (coldFactor*interval must fit in int64 ns)", cf, stable, ErrOverflow)
	}
	coldNanos := int64(cold)
	warm := int64(s.Warmup)
	threshold := warm / 2
	// slopeStored = 2*warmup*stable/(stable+cold) <= warmup, exact in 128 bits.
	// The quotient is <= warmup < 2^63, so hi < divisor and Div64 cannot panic.
	hi, lo := bits.Mul64(uint64(warm), 2*uint64(stable))
	slopeStored, _ := bits.Div64(hi, lo, uint64(stable)+uint64(coldNanos))
	maxStored := satAdd(threshold, int64(slopeStored))
	if maxStored == math.MaxInt64 {
		return fmt.Errorf("bucket: warmup Warmup %v: %w (the stored maximum must fit in int64 ns)", s.Warmup, ErrOverflow)
	}
	c.Spec.Warmup = s.Warmup
	c.Spec.ColdFactor = cf
	c.ColdIntervalNanos = coldNanos
	c.ThresholdNanos = threshold
	c.MaxStoredNanos = maxStored
	// Every wait is a difference of the drain cost F (warmup.go), so F of a
	// full store must be exact. Draining a cold limiter costs 1.5*Warmup
	// (Guava's geometry: Warmup from the maximum down to the threshold,
	// Warmup/2 from there to empty), whatever the cold factor, so this
	// rejects warm-ups longer than about 194 years.
	if f, ok := warmupDrainCostExact(c, maxStored); !ok {
		return fmt.Errorf("bucket: warmup Warmup %v with ColdFactor %g: %w (draining a cold limiter costs 1.5 times the warm-up, which must fit in %d ns: allowed warm-ups are up to about 194 years)",
			s.Warmup, cf, ErrOverflow, int64(math.MaxInt64))
	} else if f < maxStored {
		return fmt.Errorf("bucket: warmup Warmup %v with ColdFactor %g: %w (internal: drain cost %d below the store %d)", s.Warmup, cf, ErrOverflow, f, maxStored)
	}
	return nil
}

// compileHybrid fills the pool sizes and the compensation shift.
func compileHybrid(c *Config, s Spec) error {
	r, st := s.BurstRatio, s.Strictness
	if math.IsNaN(r) || math.IsInf(r, 0) || (r < 1 && r != 0) {
		return fmt.Errorf("bucket: hybrid BurstRatio %g: %w (allowed: finite and >= 1, or 0 for the default %g)", r, ErrInvalidOption, DefaultBurstRatio)
	}
	if math.IsNaN(st) || math.IsInf(st, 0) || st < 0 {
		return fmt.Errorf("bucket: hybrid Strictness %g: %w (allowed: 0 (default), 1 (strict), > 1 (burst allowance), or 1/2^k for k in 1..%d (burst compensation))",
			st, ErrInvalidOption, MaxCompensationShift)
	}
	var shift uint8
	switch {
	case st == 1:
		if r != 0 && r != 1 {
			return fmt.Errorf("bucket: hybrid Strictness 1 with BurstRatio %g: %w (strict pacing has no burst: BurstRatio must be 0 or 1)", r, ErrInvalidOption)
		}
		r = 1
	case st > 1:
		if r != 0 && r != st {
			return fmt.Errorf("bucket: hybrid Strictness %g with BurstRatio %g: %w (a strictness above 1 is the burst ratio: leave BurstRatio 0 or set it equal)", st, r, ErrInvalidOption)
		}
		r = st
	case st > 0: // burst compensation: st must be an exact power of two 1/2^k
		frac, exp := math.Frexp(st) // st = frac * 2^exp, frac in [0.5, 1)
		k := 1 - exp
		if frac != 0.5 || k < 1 || k > MaxCompensationShift {
			return fmt.Errorf("bucket: hybrid Strictness %g: %w (a burst compensation fraction must be 1/2^k for k in 1..%d: 0.5, 0.25, 0.125, ...)",
				st, ErrInvalidOption, MaxCompensationShift)
		}
		shift = uint8(k)
	}
	if r == 0 {
		r = DefaultBurstRatio
	}
	active := max(c.IntervalNanos, HybridMinActiveNanos)
	// Rounded to the nearest nanosecond: r-1 is inexact in binary (1.2-1 is
	// just below 0.2), and flooring would turn 2e8 into 199999999.
	burst := math.Round(float64(float64(active) * (r - 1)))
	if burst >= math.MaxInt64 || active > math.MaxInt64-int64(burst) {
		return fmt.Errorf("bucket: hybrid BurstRatio %g with an active pool of %d ns: %w (active+burst pools must fit in int64 ns)", r, active, ErrOverflow)
	}
	c.Spec.BurstRatio = r
	c.Spec.Strictness = st
	c.ActiveNanos = active
	c.BurstNanos = int64(burst)
	c.CompensationShift = shift
	return nil
}

// compileConcurrency compiles a Concurrency spec: no rate (Rate and Per
// must be 0, IntervalNanos is 0), MaxInFlight in 1..MaxInFlightLimit and
// HoldTTL in 1 ns..MaxHoldTTL, 0 selecting DefaultHoldTTL. Checking Rate
// with != also rejects NaN; a -0 rate is accepted and normalized to +0.
func compileConcurrency(s Spec) (Config, error) {
	if s.Rate != 0 {
		return Config{}, fmt.Errorf("bucket: concurrency rate %g: %w (a concurrency limit has no rate; allowed: 0)", s.Rate, ErrInvalidRate)
	}
	if s.Per != 0 {
		return Config{}, fmt.Errorf("bucket: concurrency per %v: %w (a concurrency limit has no rate period; allowed: 0)", s.Per, ErrInvalidDuration)
	}
	if s.MaxInFlight < 1 || s.MaxInFlight > MaxInFlightLimit {
		return Config{}, fmt.Errorf("bucket: concurrency MaxInFlight %d: %w (allowed: 1 to %d)", s.MaxInFlight, ErrInvalidOption, MaxInFlightLimit)
	}
	ttl := s.HoldTTL
	if ttl < 0 || ttl > MaxHoldTTL {
		return Config{}, fmt.Errorf("bucket: concurrency HoldTTL %v: %w (allowed: > 0 and at most %v, or 0 for the default %v)", ttl, ErrInvalidDuration, MaxHoldTTL, DefaultHoldTTL)
	}
	if ttl == 0 {
		ttl = DefaultHoldTTL
	}
	return Config{Spec: Spec{Algorithm: Concurrency, MaxInFlight: s.MaxInFlight, HoldTTL: ttl}}, nil
}

// MaxPermits returns the largest n a single request can ever be granted:
//   - Strict: MaxReserved+1 (a grant may reserve at most MaxReserved slots
//     after now, and its first slot may be now);
//   - Bursty and WarmingUp: floor(MaxInt64/IntervalNanos), so that n
//     intervals fit in int64 nanoseconds (MaxInt64 for an infinite rate);
//   - Hybrid: floor((ActiveNanos+BurstNanos)/IntervalNanos), what the
//     pools can hold;
//   - Concurrency: MaxInFlight.
//
// It returns 0 for a Config not produced by Compile.
func (c Config) MaxPermits() int64 {
	if c.IntervalNanos < 0 {
		return 0
	}
	switch c.Spec.Algorithm {
	case Strict:
		if c.IntervalNanos == 0 || c.Spec.MaxReserved < 0 || c.Spec.MaxReserved == math.MaxInt64 {
			return 0
		}
		return c.Spec.MaxReserved + 1
	case Bursty, WarmingUp:
		if c.IntervalNanos == 0 {
			if c.Spec.Algorithm == Bursty {
				return math.MaxInt64
			}
			return 0
		}
		return math.MaxInt64 / c.IntervalNanos
	case Hybrid:
		if c.IntervalNanos == 0 || c.ActiveNanos <= 0 || c.BurstNanos < 0 {
			return 0
		}
		return satAdd(c.ActiveNanos, c.BurstNanos) / c.IntervalNanos
	case Concurrency:
		if c.Spec.MaxInFlight < 1 || c.Spec.MaxInFlight > MaxInFlightLimit {
			return 0
		}
		return c.Spec.MaxInFlight
	}
	return 0
}
