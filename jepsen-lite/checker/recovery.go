package checker

import (
	"fmt"
	"math"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
)

// RecoverySpec states what recovery means for one run.
type RecoverySpec struct {
	// HealNanos is when the final heal happened, in the calls' time base.
	HealNanos int64
	// EndNanos is when observation stopped (> HealNanos).
	EndNanos int64
	// RatePerSecond is the limit's rate in permits per second (> 0), for
	// example 1/6.0 for "1 every 6 s".
	RatePerSecond float64
	// MeasureWindowNanos is the window throughput is measured over (> 0);
	// it should hold several permits, for example 10 intervals.
	MeasureWindowNanos int64
	// Fraction of the limit that counts as recovered, in (0, 1]; 0 means
	// 0.9.
	Fraction float64
	// WithinNanos is the stated time (>= 0) within which throughput must
	// recover after the heal.
	WithinNanos int64
}

// Recovery checks that after the final heal, throughput at the fake API
// returns to at least Fraction of the limit within the stated time:
//
//	required = ceil(Fraction × RatePerSecond × MeasureWindow / 1s)
//
// calls in one closed window [s, s + MeasureWindow] with s >= HealNanos.
// Throughput has recovered at the earliest such s (windows start at a
// call); the check passes when s − HealNanos <= WithinNanos. Windows may
// extend past EndNanos (they then see fewer calls, never more), so a run
// must observe long enough after the heal.
//
// Details: required, recovery_ns (-1 if never), best_count, best_start_ns,
// calls_after_heal.
func Recovery(calls []fakeapi.Call, spec RecoverySpec) (Result, error) {
	frac := spec.Fraction
	if frac == 0 {
		frac = 0.9
	}
	switch {
	case frac < 0 || frac > 1 || math.IsNaN(frac):
		return Result{}, fmt.Errorf("%w: recovery fraction %v; allowed: in (0, 1], 0 = 0.9", ErrInvalid, spec.Fraction)
	case !(spec.RatePerSecond > 0) || math.IsInf(spec.RatePerSecond, 0):
		return Result{}, fmt.Errorf("%w: rate %v per second; allowed: a finite number > 0", ErrInvalid, spec.RatePerSecond)
	case spec.MeasureWindowNanos <= 0:
		return Result{}, fmt.Errorf("%w: measure window %d ns; allowed: > 0", ErrInvalid, spec.MeasureWindowNanos)
	case spec.WithinNanos < 0:
		return Result{}, fmt.Errorf("%w: recovery within %d ns; allowed: >= 0", ErrInvalid, spec.WithinNanos)
	case spec.EndNanos <= spec.HealNanos:
		return Result{}, fmt.Errorf("%w: observation ends at %d ns, not after the heal at %d ns", ErrInvalid, spec.EndNanos, spec.HealNanos)
	}
	expected := float64(frac) * spec.RatePerSecond * (float64(spec.MeasureWindowNanos) / 1e9)
	required := int64(math.Ceil(expected - 1e-9)) // 0.9 × 10 is 9, not 10 after float rounding
	required = max(required, 1)

	r := newResult("recovery")
	sorted := sortedCalls(calls)
	var after []fakeapi.Call
	for _, c := range sorted {
		if c.TimeNanos >= spec.HealNanos && c.TimeNanos <= spec.EndNanos {
			after = append(after, c)
		}
	}
	recovery, bestCount, bestStart := int64(-1), int64(0), int64(-1)
	last := 0
	for first := range after {
		for last < len(after) && after[last].TimeNanos-after[first].TimeNanos <= spec.MeasureWindowNanos {
			last++
		}
		count := int64(last - first)
		if count > bestCount {
			bestCount, bestStart = count, after[first].TimeNanos
		}
		if count >= required {
			recovery = after[first].TimeNanos - spec.HealNanos
			break
		}
	}
	switch {
	case recovery < 0:
		r.violate("throughput never recovered after the heal at %s: best window of %s from %s had %d calls, need %d (%.2f of %.4g/s)",
			dur(spec.HealNanos), dur(spec.MeasureWindowNanos), dur(bestStart), bestCount, required, frac, spec.RatePerSecond)
	case recovery > spec.WithinNanos:
		r.violate("throughput recovered %s after the heal at %s; stated bound %s", dur(recovery), dur(spec.HealNanos), dur(spec.WithinNanos))
	}
	r.Details["formula"] = "ceil(fraction * rate * window) calls in [s, s+window], s - heal <= within"
	r.Details["required"] = required
	r.Details["fraction"] = frac
	r.Details["recovery_ns"] = recovery
	r.Details["within_ns"] = spec.WithinNanos
	r.Details["best_count"] = bestCount
	r.Details["best_start_ns"] = bestStart
	r.Details["calls_after_heal"] = len(after)
	return r, nil
}
