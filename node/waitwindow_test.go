package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

// TestWaitingReservesLeaveTheForwardingWindow: reserves that wait in an
// in-flight cap's queue, forwarded by a follower, do not hold the
// follower's connection to the leader: as many of them as the
// connection's window of calls in flight (maxForwardedInflight, here 4)
// wait, and the release that frees their slot still gets through that
// connection and grants the first of them. (Held in the window, they
// stalled every later call of the follower, their own release and
// withdrawals included, until a deadline or a lapse.)
func TestWaitingReservesLeaveTheForwardingWindow(t *testing.T) {
	const window = 4
	c, l, f, ctx, a := capHeldByA(t)
	// Before the follower's first forward opens its connection.
	for _, n := range c.nodes {
		n.testCallWindow.Store(window)
	}
	var waits []<-chan waited
	for i := range window {
		waits = append(waits, reserveInBackground(ctx, f, capReserve(fmt.Sprintf("w%d", i), 30*time.Second)))
		waitFor(t, 10*time.Second, fmt.Sprintf("waiter %d queued", i), func() bool { return l.fsm.Waiting() == i+1 })
	}
	// The release goes through the follower, as a client of it would
	// send it; it must not wait for the waiters' deadlines (30 s).
	relCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if rel, err := f.Release(relCtx, fsm.Release{Reservation: a.ReservationID}); err != nil || rel.Released != 1 {
		t.Fatalf("release of A through the follower while %d reserves wait: %+v %v", window, rel, err)
	}
	if w := <-waits[0]; w.err != nil || w.res.Status != fsm.Granted {
		t.Fatalf("the first waiter: %+v %v, want granted by A's release", w.res, w.err)
	}
	// The others are refused at their deadlines or withdrawn with ctx.
}
