package checker

import (
	"testing"
)

func TestRecovery(t *testing.T) {
	// "1 every 1s", measured over 10s: recovered when 9 calls fall in a
	// closed 10s window starting after the heal at 100s.
	every := func(from, step int64, n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = from + int64(i)*step
		}
		return out
	}
	spec := RecoverySpec{HealNanos: 100 * sec, EndNanos: 200 * sec, RatePerSecond: 1, MeasureWindowNanos: 10 * sec, WithinNanos: 30 * sec}
	tests := []struct {
		name  string
		times []int64
		valid bool
		want  string
	}{
		{"full rate right after the heal", every(100*sec, sec, 60), true, ""},
		{"calls before the heal do not count", append(every(0, sec, 100), every(150*sec, 10*sec, 5)...), false, "never recovered"},
		{"recovers 20s after the heal", every(120*sec, sec, 20), true, ""},
		{"recovers 40s after the heal: too slow", every(140*sec, sec, 20), false, "recovered 40s after the heal"},
		{"never reaches 90%", every(100*sec, 1500*1000*1000, 60), false, "had 7 calls, need 9"},
		{"no calls at all", nil, false, "never recovered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Recovery(calls(tt.times), spec)
			expect(t, r, err, tt.valid, tt.want)
			if r.Details["required"] != int64(9) {
				t.Fatalf("required %v, want 9 (no float rounding up)", r.Details["required"])
			}
		})
	}
	// "1 every 6s" over 60s: 0.9 × 10 = 9 calls.
	r, err := Recovery(calls(every(0, 6*sec, 10)), RecoverySpec{EndNanos: 60 * sec, RatePerSecond: 1 / 6.0, MeasureWindowNanos: 60 * sec})
	expect(t, r, err, true, "")
	if r.Details["required"] != int64(9) || r.Details["recovery_ns"] != int64(0) {
		t.Fatalf("details %v", r.Details)
	}
	bad := []RecoverySpec{
		{EndNanos: 1, RatePerSecond: 1, MeasureWindowNanos: 1, Fraction: 1.5},
		{EndNanos: 1, RatePerSecond: 0, MeasureWindowNanos: 1},
		{EndNanos: 1, RatePerSecond: 1, MeasureWindowNanos: 0},
		{EndNanos: 1, RatePerSecond: 1, MeasureWindowNanos: 1, WithinNanos: -1},
		{HealNanos: 5, EndNanos: 5, RatePerSecond: 1, MeasureWindowNanos: 1},
	}
	for _, s := range bad {
		if _, err := Recovery(nil, s); err == nil {
			t.Fatalf("spec %+v accepted", s)
		}
	}
}
