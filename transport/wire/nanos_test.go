package wire

import (
	"math"
	"testing"
	"time"
)

func TestAddNanosSaturates(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{-5, 3, -2},
		{maxI, 0, maxI},
		{maxI, 1, maxI},
		{maxI - 10, 11, maxI},
		{maxI, maxI, maxI},
		{maxI, minI, -1},
		{minI, -1, minI},
		{minI, minI, minI},
		{int64(2562047*time.Hour + 47*time.Minute + 16*time.Second), int64(time.Second), maxI},
	} {
		if got := AddNanos(c.a, c.b); got != c.want {
			t.Errorf("AddNanos(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := AddNanos(c.b, c.a); got != c.want {
			t.Errorf("AddNanos(%d, %d) = %d, want %d", c.b, c.a, got, c.want)
		}
	}
	if got := AddNanos(time.Duration(maxI), time.Second); got != time.Duration(maxI) {
		t.Errorf("AddNanos of durations = %v, want the largest", got)
	}
}

func TestMulNanosSaturates(t *testing.T) {
	const maxI = math.MaxInt64
	for _, c := range []struct{ a, b, want int64 }{
		{3, 4, 12},
		{0, maxI, 0},
		{-1, 5, 0},
		{maxI, 1, maxI},
		{maxI, 2, maxI},
		{1 << 32, 1 << 31, maxI}, // 2^63
		{1 << 31, 1 << 31, 1 << 62},
	} {
		if got := MulNanos(c.a, c.b); got != c.want {
			t.Errorf("MulNanos(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestFloatNanosSaturates(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want int64
	}{
		{1.9, 1}, {-1.9, -1}, {1e300, math.MaxInt64}, {-1e300, math.MinInt64},
		{math.Inf(1), math.MaxInt64}, {math.Inf(-1), math.MinInt64}, {math.NaN(), 0},
		{float64(math.MaxInt64), math.MaxInt64}, {1e18, 1e18},
	} {
		if got := FloatNanos(c.f); got != c.want {
			t.Errorf("FloatNanos(%v) = %d, want %d", c.f, got, c.want)
		}
	}
}
