package worker

import "testing"

// TestNotCutOffWhileAGrantIsSpendable: the sidecar's /readyz follows
// Status().CutOff, which the README defines as "no open, unexpired grant
// remains". One failed register call must not take a worker that still
// holds permits out of load balancing; once the grant is past its usable
// time, it is cut off.
func TestNotCutOffWhileAGrantIsSpendable(t *testing.T) {
	w, clk := donor(t, 0, 0) // 100 permits, usable until 250 ms less the margin
	w.lease.regErr, w.lease.lastGoodNanos = errAnswerLost, 0
	clk.nanos = 50 * ms
	if st := w.Status(); st.CutOff {
		t.Fatalf("at 50 ms, after one failed call with 100 permits spendable: CutOff (status %+v)", st)
	}
	clk.nanos = 250 * ms
	if st := w.Status(); !st.CutOff {
		t.Fatalf("at 250 ms, the call still failing and the grant past its usable time: not CutOff (status %+v)", st)
	}
}

// TestOutstandingPermitsCountStolenLots: the over-grant headroom metric
// (permitd_worker_outstanding_permits) is the open grant's permits left
// plus the unexpired stolen lots, and an expired lot no longer counts.
func TestOutstandingPermitsCountStolenLots(t *testing.T) {
	w, clk := donor(t, 0, 0)
	w.steal.lots.add(lot{donor: "x", permits: 7, deadlineNanos: 200 * ms})
	clk.nanos = 50 * ms
	if got := w.Stats().OutstandingPermits; got != 107 {
		t.Fatalf("outstanding %d at 50 ms, want the grant's 100 + the stolen lot's 7", got)
	}
	clk.nanos = 201 * ms
	if got := w.Stats().OutstandingPermits; got != 100 {
		t.Fatalf("outstanding %d at 201 ms, want 100 (the stolen lot expired at 200 ms)", got)
	}
}
