package wire

import (
	"math"
	"math/bits"
)

// nanos.go: sums and products of nanoseconds that saturate instead of
// wrapping.
//
// Durations and instants cross the protocol, and live on both sides, as
// int64 nanoseconds (time.Duration, or an int64 named ...Nanos). The edge
// accepts values up to math.MaxInt64 (a max_wait of 2562047h47m16s, a
// strict limit's expiry), so a plain sum of two of them (a deadline: now
// plus a max wait plus the time to find a leader) wraps around into the
// past, where the deadline has already passed. Every such sum or product
// outside the register's own arithmetic (bucket's arith.go; fsm checks its
// bounds before it adds) goes through AddNanos or MulNanos: a result
// beyond the int64 range stops at its end, which every caller reads as
// "never", and is the same on every platform.

// AddNanos returns a+b, saturated to [math.MinInt64, math.MaxInt64].
func AddNanos[T ~int64](a, b T) T {
	s := a + b
	// Overflow happened iff a and b have the same sign and s the other.
	if (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0) {
		if a >= 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// MulNanos returns a*b for a, b >= 0, saturated to math.MaxInt64; 0 if
// either is negative.
func MulNanos[T ~int64](a, b T) T {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return T(lo)
}

// FloatNanos converts f nanoseconds (a rate's interval, seconds times 1e9)
// to an integer, truncated toward zero and saturated to the int64 range;
// NaN is 0. A plain conversion of a float beyond the range is
// platform-dependent (math.MinInt64 on amd64).
func FloatNanos(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}
