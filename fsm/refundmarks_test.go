package fsm

import "testing"

// TestLateRefundBudgetSurvivesMarkMerging: README "refunded within the
// slack the later grants left: as many as the smallest, over the grants
// and charges made since, of MaxStored minus the store at that grant ...
// A limit keeps at most 32 slack marks; older ones merge, which only makes
// late refunds smaller". E is followed by G, served from a full store
// (slack 0), then by 40 grants of rising slack (more than 32 marks): E
// gets nothing back, however many marks came after.
func TestLateRefundBudgetSurvivesMarkMerging(t *testing.T) {
	h := newHarness(t)
	h.put(0, "tpm", bursty(t, 100)) // I = 10 ms, 1 s of burst
	e := h.reserve1(5*sec, tracked(0, Part{"tpm", 50}))
	g := h.reserve1(10*sec, tracked(0, Part{"tpm", 100})) // empties a full store: slack 0
	if e.Status != Granted || g.Status != Granted || g.WaitNanos != 0 {
		t.Fatalf("E %+v, G %+v", e, g)
	}
	for i := range 40 { // the store refilled to 0.5 s, drained by one permit each
		if r := h.reserve1(10*sec+sec/2, tracked(0, Part{"tpm", 1})); r.Status != Granted {
			t.Fatalf("grant %d: %+v", i, r)
		}
	}
	s := h.settleCmd(10*sec+sec/2, Settle{Reservation: e.ReservationID, Actual: []Part{{"tpm", 0}}})
	if s.Status != Settled || s.Parts[0].Refunded != 0 {
		t.Errorf("late settle of E: %+v, want nothing refunded (G, after it, left no slack)", s)
	}
	// The bursty bound over [10 s, 10.5 s]: floor((W + MaxStored)/I) + n_last
	// = floor((0.5 s + 1 s)/10 ms) + 1 = 151 permits used.
	used := int64(100 + 40)
	for range 200 {
		if r := h.reserve1(10*sec+sec/2, rsv("tpm", 1, 0, "")); r.Status == Granted {
			used++
		}
	}
	if used > 151 {
		t.Errorf("%d permits used in a 0.5 s window, above the bursty bound 151", used)
	}
}
