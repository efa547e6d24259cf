package fsm

import (
	"testing"
)

// TestShadowGrantedCountsOnlyShadowGrants: a limit's shadow grants are
// the reserves it granted while in shadow mode, not every grant since it
// was created (issue: 5 enforced reserves, then shadow, then 1 read 6).
func TestShadowGrantedCountsOnlyShadowGrants(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", bursty(t, 1000))
	for range 5 {
		h.reserve1(0, rsv("api", 1, sec, ""))
	}
	h.putShadow(sec, "api", bursty(t, 1000))
	h.reserve1(sec, rsv("api", 1, sec, ""))
	info, _ := h.f.Limit("api")
	if info.ShadowGranted != 1 || info.GrantedRequests != 6 {
		t.Fatalf("after 5 enforced grants and 1 in shadow mode: %d shadow grants of %d, want 1 of 6", info.ShadowGranted, info.GrantedRequests)
	}
	h.put(2*sec, "api", bursty(t, 1000)) // enforced again: the count is kept
	h.reserve1(2*sec, rsv("api", 1, sec, ""))
	if info, _ := h.f.Limit("api"); info.ShadowGranted != 1 || info.GrantedRequests != 7 {
		t.Fatalf("enforced again: %d shadow grants of %d, want 1 of 7", info.ShadowGranted, info.GrantedRequests)
	}
}

// TestGrantedPermitsAreNotLoweredByRefunds: granted permits count what was
// granted; what a settlement gave back, or charged, is counted apart, and
// the net figure is what the limit's rate was charged (issue: a grant of
// 4 000 settled at 2 300 read 2 300 granted permits).
func TestGrantedPermitsAreNotLoweredByRefunds(t *testing.T) {
	h := newHarness(t)
	h.put(0, "tpm", bursty(t, 200000))
	h.put(0, "rpm", bursty(t, 500))
	r := h.reserve1(0, tracked(0, Part{"tpm", 4000}, Part{"rpm", 1}))
	if r.Status != Granted {
		t.Fatalf("reserve: %+v", r)
	}
	if s := h.settleCmd(0, Settle{Reservation: r.ReservationID, Actual: []Part{{"tpm", 2300}, {"rpm", 3}}}); s.Status != Settled {
		t.Fatalf("settle: %+v", s)
	}
	for _, c := range []struct {
		name                                 string
		granted, refunded, charged, netWants uint64
	}{{"tpm", 4000, 1700, 0, 2300}, {"rpm", 1, 0, 2, 3}} {
		info, _ := h.f.Limit(c.name)
		if info.GrantedPermits != c.granted || info.RefundedPermits != c.refunded || info.ChargedPermits != c.charged || info.NetPermits != c.netWants {
			t.Errorf("limit %q: %s; want %d granted, %d refunded, %d charged, %d net", c.name, counterString(info), c.granted, c.refunded, c.charged, c.netWants)
		}
	}
}
