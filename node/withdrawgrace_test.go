package node

import (
	"context"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

// TestRetryAfterAttemptTimeoutKeepsItsPlace: a client whose attempt of a
// waiting reserve times out (its request to a follower is cancelled) and
// that retries with the same request ID at once, at another node, keeps
// its place in the cap's queue: the follower's withdrawal, sent a grace
// later, spares the retried reserve, which A's release then grants. A
// client that goes away without retrying is withdrawn after the grace
// (its retry, later, is answered the refusal).
func TestRetryAfterAttemptTimeoutKeepsItsPlace(t *testing.T) {
	_, l, f, ctx, a := capHeldByA(t)
	f.testWithdrawGrace.Store(int64(300 * time.Millisecond))
	withdrawn := make(chan fsm.ReleaseResult, 4)
	f.testWithdrawn = func(res fsm.ReleaseResult, err error) {
		if err != nil {
			t.Errorf("withdrawal: %v", err)
		}
		withdrawn <- res
	}
	attempt := func(id string) (context.CancelFunc, <-chan waited) {
		actx, cancel := context.WithCancel(ctx)
		return cancel, reserveInBackground(actx, f, capReserve(id, 30*time.Second))
	}
	cancelB, firstB := attempt("b")
	waitFor(t, 10*time.Second, "B queued", func() bool { return l.fsm.Waiting() == 1 })
	cancelB() // the client's attempt timed out
	if w := <-firstB; w.err == nil {
		t.Fatalf("B's first attempt, cancelled: %+v, want an error", w.res)
	}
	retryB := reserveInBackground(ctx, l, capReserve("b", 30*time.Second))
	select {
	case res := <-withdrawn:
		if res.Status != fsm.SettleConflict {
			t.Fatalf("the follower's withdrawal of B after its client retried: %+v, want it kept waiting", res)
		}
	case w := <-retryB:
		t.Fatalf("B's retry answered %+v %v before any slot was free", w.res, w.err)
	}
	if n := l.fsm.Waiting(); n != 1 {
		t.Fatalf("%d reserves wait after B's retry, want B", n)
	}
	if rel, err := l.Release(ctx, fsm.Release{Reservation: a.ReservationID}); err != nil || rel.Released != 1 {
		t.Fatalf("release of A: %+v %v", rel, err)
	}
	b := <-retryB
	if b.err != nil || b.res.Status != fsm.Granted || !b.res.Holds {
		t.Fatalf("B's retry: %+v %v, want the grant A's release gave it", b.res, b.err)
	}
	// C waits behind B's hold, and its client goes away for good.
	cancelC, firstC := attempt("c")
	waitFor(t, 10*time.Second, "C queued", func() bool { return l.fsm.Waiting() == 1 })
	cancelC()
	<-firstC
	if res := <-withdrawn; res.Status != fsm.Settled || res.Detail == "" {
		t.Fatalf("the withdrawal of C, never retried: %+v, want it withdrawn", res)
	}
	if n := l.fsm.Waiting(); n != 0 {
		t.Fatalf("%d reserves wait after C was withdrawn", n)
	}
	if res, err := l.Reserve(ctx, capReserve("c", 30*time.Second)); err != nil || res.Status != fsm.Refused || !res.Duplicate {
		t.Fatalf("C's late retry: %+v %v, want its withdrawal replayed (refused)", res, err)
	}
}
