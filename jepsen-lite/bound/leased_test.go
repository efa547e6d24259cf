package bound

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeased(t *testing.T) {
	// The README's example: 12 000/s with the defaults, I = 83 334 ns,
	// C = O = 11 999: 23 998 + floor(W/I) + 1.
	b, err := Leased(83_334, 11_999, 11_999)
	require.NoError(t, err)
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
		assert.Equal(t, tt.want, b.Max(tt.w), "Max(%d)", tt.w)
	}
	require.NoError(t, b.Validate())
	for _, bad := range [][3]int64{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {-5, 1, 1}} {
		_, err := Leased(bad[0], bad[1], bad[2])
		assert.ErrorIs(t, err, ErrInvalid, "Leased(%v)", bad)
	}
}
