package bucket

import (
	"math"
	"math/bits"
)

// Saturating int64 arithmetic. Every sum and product on the decision path
// goes through these helpers, so that an extreme input (a timeline near
// math.MaxInt64, a huge permit count) saturates at the int64 bounds instead
// of wrapping around into the past.

// satAdd returns a+b, saturated to [math.MinInt64, math.MaxInt64].
func satAdd(a, b int64) int64 {
	s := a + b
	// Overflow happened iff a and b have the same sign and s has the other.
	if (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0) {
		if a >= 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// satSub returns a-b, saturated to [math.MinInt64, math.MaxInt64].
func satSub(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return math.MaxInt64
		}
		return a - b // a < 0: a - MinInt64 = a + 2^63 fits
	}
	return satAdd(a, -b)
}

// satMul returns a*b for a, b >= 0, saturated to math.MaxInt64.
func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// mulDiv returns floor(a*b/c) for a, b >= 0 and c > 0, computed exactly in
// 128 bits. ok is false when the result does not fit in an int64.
func mulDiv(a, b, c int64) (q int64, ok bool) {
	if a <= 0 || b <= 0 {
		return 0, true
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64, false
	}
	uq, _ := bits.Div64(hi, lo, uint64(c))
	if uq > math.MaxInt64 {
		return math.MaxInt64, false
	}
	return int64(uq), true
}

// ceilDiv returns ceil(a/b) for a >= 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
