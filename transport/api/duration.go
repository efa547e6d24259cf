package api

import (
	"math"
	"time"
)

// DurationText is d as messages print it: rounded up to three significant
// digits ("retry after 59s" for 58.990199804s, "1.99s", "324ms",
// "3.34ms"), so that a time to wait is never understated; the exact
// value is in the answer's *_ns fields. Zero and negative durations, and
// those too large to round, print as they are.
func DurationText(d time.Duration) string {
	return RoundUp3(d).String()
}

// RoundUp3 is d rounded up to three significant digits (see DurationText).
func RoundUp3(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	unit := int64(1)
	for v := int64(d); v >= 1000; v /= 10 {
		unit *= 10
	}
	if int64(d) > math.MaxInt64-unit {
		return d
	}
	return time.Duration((int64(d) + unit - 1) / unit * unit)
}
