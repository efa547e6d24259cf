package bound

import (
	"errors"
	"math"
	"testing"
)

func TestLeased(t *testing.T) {
	// The README's example: 12 000/s with the defaults, I = 83 334 ns,
	// C = O = 11 999: 23 998 + floor(W/I) + 1.
	b, err := Leased(83_334, 11_999, 11_999)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		w, want int64
	}{
		{-1, 23_999},
		{0, 23_999},
		{83_333, 23_999},
		{83_334, 24_000},
		{1_000_000_000, 23_999 + 11_999},
		{math.MaxInt64, math.MaxInt64/83_334 + 23_999},
	}
	for _, tt := range tests {
		if got := b.Max(tt.w); got != tt.want {
			t.Errorf("Max(%d) = %d, want %d", tt.w, got, tt.want)
		}
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][3]int64{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {-5, 1, 1}} {
		if _, err := Leased(bad[0], bad[1], bad[2]); !errors.Is(err, ErrInvalid) {
			t.Errorf("Leased(%v) = %v, want ErrInvalid", bad, err)
		}
	}
}
