package fsm

import (
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// TestLimitTimelineStartsAtItsPut: README "A limit's timeline starts at the
// cluster time of the PUT that created it (or changed its algorithm)".
// A hybrid limit created (or switched to) at cluster time 1 h has no
// waiting pool of that hour, and a bursty one no stored permits at once.
func TestLimitTimelineStartsAtItsPut(t *testing.T) {
	const hour = int64(time.Hour)
	hyb := compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: 1, BurstRatio: 2})
	for _, tc := range []struct {
		name   string
		before *bucket.Config // nil: created at 1 h; else changed from it at 1 h
		cfg    bucket.Config
	}{
		{"create bursty", nil, bursty(t, 1)},
		{"create hybrid", nil, hyb},
		{"strict to bursty", ptr(strict(t, 1, 0)), bursty(t, 1)},
		{"strict to hybrid", ptr(strict(t, 1, 0)), hyb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.before != nil {
				h.put(0, "api", *tc.before)
			}
			h.put(hour, "api", tc.cfg)
			ref, err := bucket.New(tc.cfg, hour)
			if err != nil {
				t.Fatal(err)
			}
			// At the put, 20 reserves of one permit, max_wait 0.
			now := hour
			for i := range 20 {
				d, err := ref.Reserve(now, 1, 0)
				if err != nil {
					t.Fatal(err)
				}
				if got := h.reserve1(now, rsv("api", 1, 0, "")); got != expected(d, now) {
					t.Fatalf("reserve %d = %+v, want %+v (a pacer whose timeline starts at the put)", i, got, expected(d, now))
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
