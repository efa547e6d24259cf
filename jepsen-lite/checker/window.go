package checker

import (
	"fmt"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
)

// WindowSpec is a window bound and the tolerance it is judged with.
type WindowSpec struct {
	// WindowsNanos are the window lengths W to check (each > 0, at least
	// one).
	WindowsNanos []int64
	// Bound is the README's formula: at most Bound.Max(W) calls in any
	// closed window of length W.
	Bound bound.Bound
	// ToleranceNanos is the measured client→API delivery jitter (>= 0).
	ToleranceNanos int64
}

// WorstWindow is the fullest window found for one W.
type WorstWindow struct {
	// WindowNanos is the window length W.
	WindowNanos int64 `json:"window_ns"`
	// EffectiveNanos is W − tolerance (not below 0): the span counted.
	EffectiveNanos int64 `json:"effective_ns"`
	// Bound is Bound.Max(W).
	Bound int64 `json:"bound"`
	// Count is the most calls in one window of length EffectiveNanos, and
	// StartNanos, EndNanos the receive times of its first and last call.
	Count      int64 `json:"count"`
	StartNanos int64 `json:"start_ns"`
	EndNanos   int64 `json:"end_ns"`
	// Violations is the number of calls that end a window holding more
	// than Bound calls.
	Violations int64 `json:"violations"`
	// RawCount is the fullest window of length W with no tolerance.
	RawCount int64 `json:"raw_count"`
}

// Window checks the window mode at the fake API: for every W, every closed
// window of length W − tolerance holds at most Bound.Max(W) calls.
//
// Why W − tolerance: a call reaches the API between d and d + tolerance
// after it was made, so calls the API sees within W − tolerance were made
// within W. Each call that ends an over-full window is one violation (the
// same count the fake API's live monitor makes).
//
// Details: formula, tolerance_ns, calls, worst ([]WorstWindow, one per W).
func Window(calls []fakeapi.Call, spec WindowSpec) (Result, error) {
	if len(spec.WindowsNanos) == 0 {
		return Result{}, fmt.Errorf("%w: no window lengths; allowed: at least one W > 0", ErrInvalid)
	}
	for _, w := range spec.WindowsNanos {
		if w <= 0 {
			return Result{}, fmt.Errorf("%w: window length %d ns; allowed: > 0", ErrInvalid, w)
		}
	}
	if err := spec.Bound.Validate(); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if spec.ToleranceNanos < 0 {
		return Result{}, fmt.Errorf("%w: window tolerance %d ns; allowed: >= 0", ErrInvalid, spec.ToleranceNanos)
	}
	r := newResult("window")
	sorted := sortedCalls(calls)
	worst := make([]WorstWindow, 0, len(spec.WindowsNanos))
	for _, w := range spec.WindowsNanos {
		ww := WorstWindow{WindowNanos: w, EffectiveNanos: max(w-spec.ToleranceNanos, 0), Bound: spec.Bound.Max(w)}
		ww.RawCount, _, _ = fullest(sorted, w, -1, nil)
		ww.Count, ww.StartNanos, ww.EndNanos = fullest(sorted, ww.EffectiveNanos, ww.Bound, func(first, last int, count int64) {
			ww.Violations++
			r.violate("%d calls in [%s, %s] (span %s <= W - tolerance = %s - %s); bound %s = %d",
				count, dur(sorted[first].TimeNanos), dur(sorted[last].TimeNanos),
				dur(sorted[last].TimeNanos-sorted[first].TimeNanos), dur(w), dur(spec.ToleranceNanos), spec.Bound.Formula, ww.Bound)
		})
		worst = append(worst, ww)
	}
	r.Details["formula"] = spec.Bound.Formula
	r.Details["rule"] = "calls in any closed window of length W - tolerance <= Bound(W)"
	r.Details["tolerance_ns"] = spec.ToleranceNanos
	r.Details["calls"] = len(sorted)
	r.Details["worst"] = worst
	return r, nil
}

// fullest slides a closed window of length span over calls sorted by time,
// ending at each call. It returns the largest count and that window's first
// and last call times, and calls over(first, last, count) for every window
// holding more than limit calls (limit < 0: never).
func fullest(sorted []fakeapi.Call, span, limit int64, over func(first, last int, count int64)) (best, start, end int64) {
	first := 0
	for last := range sorted {
		for sorted[last].TimeNanos-sorted[first].TimeNanos > span {
			first++
		}
		count := int64(last - first + 1)
		if count > best {
			best, start, end = count, sorted[first].TimeNanos, sorted[last].TimeNanos
		}
		if limit >= 0 && count > limit && over != nil {
			over(first, last, count)
		}
	}
	return best, start, end
}
