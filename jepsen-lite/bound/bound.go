package bound

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// ErrInvalid is wrapped by every error this package returns.
var ErrInvalid = errors.New("bound: invalid bound")

// Bound is a stated upper bound on the number of calls any closed window
// of a given length may contain.
type Bound struct {
	// Formula is the human-readable formula, as the README states it, for
	// example "floor(W/I)+1 with I=6s".
	Formula string
	// Max returns the most calls allowed in any closed window of length
	// windowNanos (>= 0). It must be non-decreasing in windowNanos.
	Max func(windowNanos int64) int64
}

// Validate reports whether b can be used: Max is set and Formula is not
// empty.
func (b Bound) Validate() error {
	if b.Max == nil {
		return fmt.Errorf("%w: Max is nil; allowed: a function of the window length", ErrInvalid)
	}
	if b.Formula == "" {
		return fmt.Errorf("%w: Formula is empty; allowed: the formula's text as the README states it", ErrInvalid)
	}
	return nil
}

// Strict is the bound of a strict limit, one call every intervalNanos:
// floor(W/I)+1 calls in any closed window of length W.
func Strict(intervalNanos int64) (Bound, error) {
	if intervalNanos <= 0 {
		return Bound{}, fmt.Errorf("%w: strict interval %d ns; allowed: > 0", ErrInvalid, intervalNanos)
	}
	return Bound{
		Formula: fmt.Sprintf("floor(W/I)+1 with I=%dns", intervalNanos),
		Max: func(w int64) int64 {
			return satAdd(max(w, 0)/intervalNanos, 1)
		},
	}, nil
}

// StrictWithExpiry is the bound of a strict limit whose permits may be used
// up to expiryNanos after their slot: floor((W+E)/I)+1 calls in any closed
// window of length W.
func StrictWithExpiry(intervalNanos, expiryNanos int64) (Bound, error) {
	if intervalNanos <= 0 {
		return Bound{}, fmt.Errorf("%w: strict interval %d ns; allowed: > 0", ErrInvalid, intervalNanos)
	}
	if expiryNanos < 0 {
		return Bound{}, fmt.Errorf("%w: expiry %d ns; allowed: >= 0", ErrInvalid, expiryNanos)
	}
	return Bound{
		Formula: fmt.Sprintf("floor((W+E)/I)+1 with I=%dns E=%dns", intervalNanos, expiryNanos),
		Max: func(w int64) int64 {
			return satAdd(satAdd(max(w, 0), expiryNanos)/intervalNanos, 1)
		},
	}, nil
}

// Linear is the bound floor(permits*W/perNanos) + extra: a rate of permits
// per perNanos plus a constant allowance (for example burst B plus one, as
// "floor(R*W/per)+B+1").
func Linear(permits, perNanos, extra int64) (Bound, error) {
	if permits <= 0 {
		return Bound{}, fmt.Errorf("%w: linear bound with %d permits; allowed: > 0", ErrInvalid, permits)
	}
	if perNanos <= 0 {
		return Bound{}, fmt.Errorf("%w: linear bound per %d ns; allowed: > 0", ErrInvalid, perNanos)
	}
	if extra < 0 {
		return Bound{}, fmt.Errorf("%w: linear bound extra %d; allowed: >= 0", ErrInvalid, extra)
	}
	return Bound{
		Formula: fmt.Sprintf("floor(R*W/per)+extra with R=%d per=%dns extra=%d", permits, perNanos, extra),
		Max: func(w int64) int64 {
			return satAdd(mulDiv(permits, max(w, 0), perNanos), extra)
		},
	}, nil
}

// mulDiv returns floor(a*b/c) for a, b >= 0 and c > 0, saturating at
// math.MaxInt64.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// satAdd returns a+b for a, b >= 0, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
