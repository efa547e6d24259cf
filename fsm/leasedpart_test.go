package fsm

import (
	"strings"
	"testing"
)

// TestReservationNamingALeasedLimitIsInvalid: the register itself refuses
// a reserve in the reservation form that names a leased limit, whatever
// the edge let through (a lease policy committed between the node's check
// and this entry, say), and the refusal leaves the other parts' limits as
// they were.
func TestReservationNamingALeasedLimitIsInvalid(t *testing.T) {
	h := newHarness(t)
	h.put(0, "fast", bursty(t, 1000))
	h.put(0, "pool", strict(t, 100, 10))
	h.policy(0, LeasePolicy{Limit: "pool", Leased: true})
	before := pacerState(h, "fast")
	for _, parts := range [][]Part{
		{{"pool", 1}},
		{{"fast", 5}, {"pool", 1}},
		{{"pool", 1}, {"fast", 5}},
	} {
		res := h.reserve1(sec, tracked(sec, parts...))
		if res.Status != Invalid || !strings.Contains(res.Detail, `"pool" is leased`) {
			t.Fatalf("reserve of %v: got %+v, want invalid because pool is leased", parts, res)
		}
	}
	if after := pacerState(h, "fast"); after != before {
		t.Errorf("a refused reserve changed fast's pacer: %s, was %s", after, before)
	}
	if n := h.f.Reservations(); n != 0 {
		t.Errorf("a refused reserve left %d reservations", n)
	}
}
