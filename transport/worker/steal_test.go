package worker

import (
	"math"
	"testing"
	"time"
)

// donor returns an unstarted worker of group "A" holding an open grant of
// 100 permits until 250 ms, due for renewal at 150 ms, paced at 100/s,
// whose callers asked for demandPerSec over the last period; its clock
// reads now.
func donor(t *testing.T, bias float64, demandPerSec int64) (*Worker, *fakeClock) {
	t.Helper()
	clk := &fakeClock{}
	w, err := New(Config{Name: "d", Group: "A", Limit: "api", Register: &fakeRegister{}, TTL: 300 * time.Millisecond,
		RenewEvery: 150 * time.Millisecond, StealBias: bias, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	w.lease.cur = &grant{leaseID: 1, epoch: 2, permits: 100, expiryNanos: 250 * ms}
	w.lease.leaseID, w.lease.epoch, w.lease.share, w.lease.nextRenewNanos = 1, 2, 100_000, 150*ms
	if err := w.pace.setRate(0, w.lease.share); err != nil {
		t.Fatal(err)
	}
	w.lease.meter.lastMilli = demandPerSec * 1000
	w.lease.meter.sinceNanos = 40 * ms // the current period is too short to count alone
	return w, clk
}

type fakeClock struct{ nanos int64 }

func (c *fakeClock) NowNanos() int64 { return c.nanos }

func TestDonorKeepsItsNeedAndBiasesTowardItsGroup(t *testing.T) {
	tests := []struct {
		name    string
		bias    float64
		demand  int64 // permits/s
		group   string
		want    int64
		wantGot int64
	}{
		// Idle donor (no demand): the whole grant is spare.
		{"idle, own group", 0, 0, "A", 100, 100},
		{"idle, other group, default bias", 0, 0, "B", 100, 50},
		{"idle, other group, bias 0.8", 0.8, 0, "B", 100, 20},
		{"idle, other group, no bias", NoStealBias, 0, "B", 100, 100},
		{"idle, other group, bias 1", 1, 0, "B", 100, 0},
		// At 100/s it needs 10 permits until its renewal at 150 ms (now
		// 50 ms) plus 15 for the next period: 75 spare.
		{"busy, own group", 0, 100, "A", 100, 75},
		{"busy, other group", 0, 100, "B", 100, 37},
		{"busy, asks less than spare", 0, 100, "A", 20, 20},
		// Demand above the pace counts at the pace (100/s).
		{"saturated", 0, 1000, "A", 100, 75},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, clk := donor(t, tc.bias, tc.demand)
			clk.nanos = 50 * ms
			give, valid := w.donateLocked(clk.nanos, stealRequest{ID: 1, Limit: "api", From: "t", Group: tc.group, Want: tc.want})
			if give != tc.wantGot {
				t.Fatalf("gave %d, want %d", give, tc.wantGot)
			}
			// Debited before sending: counted as stolen out, no longer
			// spendable.
			if w.lease.cur.stolenOut != give || w.lease.cur.spendable(clk.nanos) != 100-give || w.stats.StolenOutPermits != give {
				t.Fatalf("after giving %d: stolenOut %d, spendable %d", give, w.lease.cur.stolenOut, w.lease.cur.spendable(clk.nanos))
			}
			if give > 0 && valid != 200*ms {
				t.Errorf("valid for %v, want the grant's local expiry minus now (200ms)", time.Duration(valid))
			}
		})
	}
}

func TestDonorGivesNothingFromAClosedOrExpiredGrant(t *testing.T) {
	w, clk := donor(t, 0, 0)
	w.lease.cur.closed = true // a renew reporting on it was sent
	if give, _ := w.donateLocked(clk.nanos, stealRequest{Want: 10, Group: "A"}); give != 0 {
		t.Errorf("closed grant gave %d", give)
	}
	w.lease.cur.closed = false
	clk.nanos = 250 * ms
	if give, _ := w.donateLocked(clk.nanos, stealRequest{Want: 10, Group: "A"}); give != 0 {
		t.Errorf("expired grant gave %d", give)
	}
}

func TestTakerCountsValidityFromItsRequestAndAcceptsAnAnswerOnce(t *testing.T) {
	w, clk := donor(t, 0, 0)
	w.steal.pending[7] = &pendingSteal{donor: "d2", sentAtNanos: 40 * ms, reply: make(chan int64, 1)}
	clk.nanos = 60 * ms // the answer arrives 20 ms after the request left
	r := stealReply{ID: 7, Limit: "api", From: "d2", Permits: 9, ValidForNanos: 100 * ms, LeaseID: 5, Epoch: 6}
	w.handleStealReply(r)
	if len(w.steal.lots) != 1 || w.steal.lots[0].deadlineNanos != 140*ms || w.steal.lots[0].permits != 9 {
		t.Fatalf("lots %+v, want 9 permits until 140ms (sent at 40ms + 100ms, not received at 60ms + 100ms)", w.steal.lots)
	}
	w.handleStealReply(r) // a duplicate
	w.handleStealReply(stealReply{ID: 8, Limit: "api", From: "d2", Permits: 5, ValidForNanos: 100 * ms})
	w.steal.pending[9] = &pendingSteal{donor: "d3", sentAtNanos: 40 * ms, reply: make(chan int64, 1)}
	w.handleStealReply(stealReply{ID: 9, Limit: "api", From: "d2", Permits: 5, ValidForNanos: 100 * ms}) // wrong donor
	if w.steal.lots.total(clk.nanos) != 9 || w.stats.StolenInPermits != 9 || w.lease.inSinceReport != 9 || w.stats.StealsUnmatched != 3 {
		t.Fatalf("after a duplicate, an unknown and a misdirected answer: %d stolen permits, %d in, %d to report, %d unmatched; want 9, 9, 9, 3",
			w.steal.lots.total(clk.nanos), w.stats.StolenInPermits, w.lease.inSinceReport, w.stats.StealsUnmatched)
	}
	// An answer whose validity ended before it arrived counts as received
	// (its donor reported it) and expired, never as spendable.
	w.steal.pending[10] = &pendingSteal{donor: "d2", sentAtNanos: 0, reply: make(chan int64, 1)}
	w.handleStealReply(stealReply{ID: 10, Limit: "api", From: "d2", Permits: 4, ValidForNanos: 50 * ms})
	if w.steal.lots.total(clk.nanos) != 9 || w.stats.ExpiredUnusedPermits != 4 {
		t.Fatalf("late answer: %d spendable stolen, %d expired; want 9, 4", w.steal.lots.total(clk.nanos), w.stats.ExpiredUnusedPermits)
	}
}

// TestTakerCutsAStolenLotsValidityToATTL: no donor's grant is usable for
// a TTL or more after it received the request, so a reply claiming more
// (a broken or hostile donor; the decoder accepts any non-negative
// validity) is cut to a TTL from the request, and a huge one does not
// overflow into a deadline in the past.
func TestTakerCutsAStolenLotsValidityToATTL(t *testing.T) {
	w, clk := donor(t, 0, 0) // TTL 300 ms
	clk.nanos = 60 * ms
	for i, valid := range []int64{int64(time.Hour), math.MaxInt64} {
		id := uint64(20 + i)
		w.steal.pending[id] = &pendingSteal{donor: "d2", sentAtNanos: 40 * ms, reply: make(chan int64, 1)}
		w.handleStealReply(stealReply{ID: id, Limit: "api", From: "d2", Permits: 3, ValidForNanos: valid})
		if n := len(w.steal.lots); n != i+1 || w.steal.lots[i].deadlineNanos != 340*ms {
			t.Fatalf("validity %d: lots %+v, want 3 permits until 340 ms (sent at 40 ms + the 300 ms TTL)", valid, w.steal.lots)
		}
	}
	if w.stats.ExpiredUnusedPermits != 0 {
		t.Fatalf("%d permits counted expired: a huge validity overflowed", w.stats.ExpiredUnusedPermits)
	}
}

func TestStealWant(t *testing.T) {
	w, clk := donor(t, 0, 100)
	clk.nanos = 50 * ms
	// 100 left, needs 10 until renewal: not short.
	if got := w.stealWantLocked(clk.nanos); got != 0 {
		t.Errorf("well supplied: want %d", got)
	}
	w.lease.cur.spent = 96 // 4 left, needs 10 (plus a round trip)
	if got := w.stealWantLocked(clk.nanos); got != 6 {
		t.Errorf("short: want %d, expected 6", got)
	}
	w.lease.inFlight = true
	if got := w.stealWantLocked(clk.nanos); got != 0 {
		t.Errorf("renewal in flight: want %d, expected 0 (wait for the answer)", got)
	}
	w.lease.inFlight = false
	w.lease.regErr = errAnswerLost
	w.lease.lastGoodNanos = 0
	// Cut off: looks one renewal period ahead (15 at 100/s).
	if got := w.stealWantLocked(clk.nanos); got != 11 {
		t.Errorf("cut off: want %d, expected 11", got)
	}
	clk.nanos = w.cfg.stealGraceNanos
	if got := w.stealWantLocked(clk.nanos); got != 0 {
		t.Errorf("cut off past the steal grace: want %d, expected 0", got)
	}
}

func TestDonorWhoseCallersWentQuietGivesItsGrant(t *testing.T) {
	w, clk := donor(t, 0, 1000) // measured busy last period
	clk.nanos = 50 * ms
	w.lease.meter.sinceNanos = 0 // and asked nothing for the 50 ms of this one
	if give, _ := w.donateLocked(clk.nanos, stealRequest{Want: 1000, Group: "A"}); give != 100 {
		t.Errorf("gave %d, want the whole grant (100): its callers are quiet", give)
	}
}
