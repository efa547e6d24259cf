package fsm

import (
	"testing"
	"time"
)

// TestShadowGrantReplayExpires: a grant made in shadow mode is answered at
// once and without an expiry, but its replay expires one replay period
// after its time like every replayed grant (issue: shadow strict 1/s,
// reserve X, shadow off, 5 s later a fresh grant at once, and the replay
// of X granted again without expiry: two permits in a 0 s window). The
// same through a session, and for a reserve in the reservation form on a
// shadow in-flight cap alone (no interval: its hold TTL).
func TestShadowGrantReplayExpires(t *testing.T) {
	h := newHarness(t)
	h.putShadow(0, "api", strict(t, 1, 0))
	h.putShadow(0, "cap", concurrency(t, 1, 2*time.Second))
	sess := h.openSession(0)
	first := h.reserve(0, rsv("api", 1, 0, "X"), srsv("api", 1, 0, sess.ID, 1, 1),
		Reserve{Limit: "cap", Permits: 1, Track: true, RequestID: "C"})
	for i, r := range first {
		if r.Status != Granted || r.WaitNanos != 0 || r.ExpiresInNanos != 0 {
			t.Fatalf("shadow reserve %d: %+v, want granted at once, without an expiry (shadow mode refuses nothing)", i, r)
		}
	}
	half := h.reserve(sec/2, rsv("api", 1, 0, "X"), srsv("api", 1, 0, sess.ID, 1, 1),
		Reserve{Limit: "cap", Permits: 1, Track: true, RequestID: "C"})
	for i, want := range []int64{sec / 2, sec / 2, 2*sec - sec/2} {
		if r := half[i]; !r.Duplicate || r.Status != Granted || r.ExpiresInNanos != want {
			t.Errorf("replay %d half a second later: %+v, want a duplicate expiring in %v", i, r, time.Duration(want))
		}
	}
	h.put(sec, "api", strict(t, 1, 0)) // shadow mode off
	if r := h.reserve1(5*sec, rsv("api", 1, 0, "")); r.Status != Granted || r.WaitNanos != 0 {
		t.Fatalf("fresh enforced reserve 5 s later: %+v, want granted at once", r)
	}
	late := h.reserve(5*sec, rsv("api", 1, 0, "X"), srsv("api", 1, 0, sess.ID, 1, 1),
		Reserve{Limit: "cap", Permits: 1, Track: true, RequestID: "C"})
	for i, r := range late {
		if !r.Duplicate || r.Status != Granted || r.ExpiresInNanos != -1 {
			t.Errorf("replay %d after 5 s: %+v, want a duplicate that expired (-1): the enforced limit just granted a permit", i, r)
		}
	}
}
