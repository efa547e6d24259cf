package api

import (
	"math"
	"testing"
	"time"
)

// TestDurationText: three significant digits, rounded up; small, zero,
// negative and huge durations unharmed.
func TestDurationText(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{58990199804, "59s"},
		{1991837074, "2s"},
		{1234567890, "1.24s"},
		{324 * time.Millisecond, "324ms"},
		{3333334, "3.34ms"},
		{999, "999ns"},
		{1001, "1.01µs"},
		{0, "0s"},
		{-1500 * time.Millisecond, "-1.5s"},
		{2*time.Minute + 3456*time.Millisecond, "2m4s"},
		{math.MaxInt64, time.Duration(math.MaxInt64).String()},
	} {
		if got := DurationText(tc.d); got != tc.want {
			t.Errorf("DurationText(%d) = %q, want %q", int64(tc.d), got, tc.want)
		}
		if r := RoundUp3(tc.d); r < tc.d {
			t.Errorf("RoundUp3(%v) = %v, below it", tc.d, r)
		}
	}
}
