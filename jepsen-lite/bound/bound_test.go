package bound

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBounds(t *testing.T) {
	strict, err := Strict(6)
	require.NoError(t, err)
	expiry, err := StrictWithExpiry(6, 3)
	require.NoError(t, err)
	linear, err := Linear(10, 1000, 3)
	require.NoError(t, err)
	huge, err := Linear(math.MaxInt64, 1, 0)
	require.NoError(t, err)
	tests := []struct {
		name string
		b    Bound
		w    int64
		want int64
	}{
		{"strict zero window", strict, 0, 1},
		{"strict below interval", strict, 5, 1},
		{"strict one interval", strict, 6, 2},
		{"strict many", strict, 60, 11},
		{"strict negative window treated as 0", strict, -3, 1},
		{"expiry adds E", expiry, 3, 2},
		{"expiry below", expiry, 2, 1},
		{"linear", linear, 1000, 13},
		{"linear floor", linear, 1099, 13},
		{"linear next", linear, 1100, 14},
		{"saturates", huge, math.MaxInt64, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.b.Validate())
			require.Equal(t, tt.want, tt.b.Max(tt.w), "Max(%d) (%s)", tt.w, tt.b.Formula)
		})
	}
}

func TestInvalid(t *testing.T) {
	tests := []struct {
		name string
		err  func() error
	}{
		{"strict zero", func() error { _, err := Strict(0); return err }},
		{"expiry zero interval", func() error { _, err := StrictWithExpiry(0, 1); return err }},
		{"expiry negative", func() error { _, err := StrictWithExpiry(1, -1); return err }},
		{"linear permits", func() error { _, err := Linear(0, 1, 0); return err }},
		{"linear per", func() error { _, err := Linear(1, 0, 0); return err }},
		{"linear extra", func() error { _, err := Linear(1, 1, -1); return err }},
		{"no Max", func() error { return Bound{Formula: "x"}.Validate() }},
		{"no Formula", func() error { return Bound{Max: func(int64) int64 { return 1 }}.Validate() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.err(), ErrInvalid)
		})
	}
}
