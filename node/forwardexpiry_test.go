package node

import (
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

// TestForwardedGrantExpiryWithinRegisterHold: the expiry a follower
// answers for a forwarded grant, counted from the moment the follower
// answers (which is what its HTTP edge tells the client, with held_ns:
// the client counts from its send plus the time the follower held the
// request), never outlasts the register's hold, however long the leader's
// answer takes to come back once the leader fixed its durations (a slow
// leader-to-follower leg, simulated here). Checked for every kind of
// forwarded grant with an expiry: a waiter granted by a release, a replay
// of it, and a fresh grant.
func TestForwardedGrantExpiryWithinRegisterHold(t *testing.T) {
	_, l, f, ctx, a := capHeldByA(t)
	const slowLeg = 300 * time.Millisecond
	l.testDelayForwardedAnswer.Store(int64(slowLeg))
	type answered struct {
		res       fsm.ReserveResult
		err       error
		leaderNow int64 // the leader's timeline right after the answer
	}
	reserve := func(r fsm.Reserve) <-chan answered {
		ch := make(chan answered, 1)
		go func() {
			res, err := f.Reserve(ctx, r)
			now, _, _, _ := l.timeline.stamp()
			ch <- answered{res, err, now}
		}()
		return ch
	}
	check := func(what string, got answered) {
		t.Helper()
		if got.err != nil || got.res.Status != fsm.Granted || got.res.ExpiresInNanos <= 0 {
			t.Fatalf("%s: %+v %v, want granted with an expiry", what, got.res, got.err)
		}
		info, ok := l.fsm.Reservation(got.res.ReservationID)
		if !ok {
			t.Fatalf("%s: reservation %d unknown to the leader", what, got.res.ReservationID)
		}
		// The register frees the slot when cluster time reaches the hold's
		// end, which its timeline reaches no sooner than holdEnd-leaderNow
		// after the answer (it runs no faster than real time).
		holdEnd := info.ServedAtNanos + int64(time.Minute)
		if over := time.Duration(got.res.ExpiresInNanos - (holdEnd - got.leaderNow)); over > 10*time.Millisecond {
			t.Fatalf("%s: the client is told it holds the slot %v after the register frees it (expires in %v, the register's hold ends %v later)",
				what, over, time.Duration(got.res.ExpiresInNanos), time.Duration(holdEnd-got.leaderNow))
		}
	}
	waitB := reserve(capReserve("b", 30*time.Second))
	waitFor(t, 10*time.Second, "B queued", func() bool { return l.fsm.Waiting() == 1 })
	if rel, err := l.Release(ctx, fsm.Release{Reservation: a.ReservationID}); err != nil || rel.Released != 1 {
		t.Fatalf("release of A: %+v %v", rel, err)
	}
	b := <-waitB
	check("B, granted by A's release while it waited", b)
	check("a replay of B", <-reserve(capReserve("b", 30*time.Second)))
	if rel, err := l.Release(ctx, fsm.Release{Reservation: b.res.ReservationID}); err != nil || rel.Released != 1 {
		t.Fatalf("release of B: %+v %v", rel, err)
	}
	check("C, a fresh grant", <-reserve(capReserve("c", 0)))
}
