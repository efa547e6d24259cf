package fsm

import (
	"testing"
	"time"
)

// TestReservationWithLongHoldsStaysOpenUntilTheyLapse: README "settleable
// until settle_within after its time (default 1 minute, at most 10) or its
// in-flight holds' expiry, whichever is later". A 10-minute hold taken with
// the default 1-minute settle window can still be settled and released at
// 5 minutes, and the release frees the cap.
func TestReservationWithLongHoldsStaysOpenUntilTheyLapse(t *testing.T) {
	const minute = int64(time.Minute)
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 1, 10*time.Minute))
	h.put(0, "tpm", bursty(t, 1000))
	a := h.reserve1(0, tracked(0, Part{"tpm", 10}, Part{"cap", 1}))
	if a.Status != Granted || !a.Holds {
		t.Fatalf("reserve: %+v", a)
	}
	if s := h.settleCmd(5*minute, Settle{Reservation: a.ReservationID, Actual: []Part{{"tpm", 10}}}); s.Status != Settled {
		t.Errorf("settle at 5 min, holds until 10 min: %+v, want settled", s)
	}
	if rel := h.releaseCmd(5*minute, Release{Reservation: a.ReservationID}); rel.Released != 1 {
		t.Errorf("release at 5 min: %+v, want 1 released", rel)
	}
	if r := h.reserve1(5*minute, tracked(0, Part{"cap", 1})); r.Status != Granted {
		t.Errorf("after the release: %+v, want the cap free", r)
	}
}
