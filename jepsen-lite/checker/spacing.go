package checker

import (
	"fmt"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
)

// SpacingSpec is the strict limit "1 every IntervalNanos" and the
// tolerance it is judged with.
type SpacingSpec struct {
	// IntervalNanos is the limit's interval I (> 0).
	IntervalNanos int64
	// ToleranceNanos is the measured client→API delivery jitter (>= 0),
	// see DeliveryJitter.
	ToleranceNanos int64
}

// Spacing checks the strict mode at the fake API: any two consecutive calls
// (in receive order) are at least I − tolerance apart.
//
// Details: interval_ns, tolerance_ns, calls, min_gap_ns (-1 with fewer than
// two calls) and min_gap_calls (the pair), raw_violations (gaps below I
// with no tolerance).
func Spacing(calls []fakeapi.Call, spec SpacingSpec) (Result, error) {
	if spec.IntervalNanos <= 0 {
		return Result{}, fmt.Errorf("%w: spacing interval %d ns; allowed: > 0", ErrInvalid, spec.IntervalNanos)
	}
	if spec.ToleranceNanos < 0 {
		return Result{}, fmt.Errorf("%w: spacing tolerance %d ns; allowed: >= 0", ErrInvalid, spec.ToleranceNanos)
	}
	r := newResult("spacing")
	sorted := sortedCalls(calls)
	minGap, raw := int64(-1), 0
	var minPair [2]int64
	need := spec.IntervalNanos - spec.ToleranceNanos
	for i := 1; i < len(sorted); i++ {
		prev, cur := sorted[i-1], sorted[i]
		gap := cur.TimeNanos - prev.TimeNanos
		if minGap < 0 || gap < minGap {
			minGap, minPair = gap, [2]int64{prev.Seq, cur.Seq}
		}
		if gap < spec.IntervalNanos {
			raw++
		}
		if gap < need {
			r.violate("%s and %s are %s apart; need >= I - tolerance = %s - %s = %s",
				callString(prev), callString(cur), dur(gap), dur(spec.IntervalNanos), dur(spec.ToleranceNanos), dur(need))
		}
	}
	r.Details["formula"] = "t[i+1] - t[i] >= I - tolerance"
	r.Details["interval_ns"] = spec.IntervalNanos
	r.Details["tolerance_ns"] = spec.ToleranceNanos
	r.Details["calls"] = len(sorted)
	r.Details["min_gap_ns"] = minGap
	if minGap >= 0 {
		r.Details["min_gap_calls"] = minPair
	}
	r.Details["raw_violations"] = raw
	return r, nil
}
