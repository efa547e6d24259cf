package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// capConfig compiles an in-flight cap.
func capConfig(t *testing.T, maxInFlight int64, ttl time.Duration) bucket.Config {
	t.Helper()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Concurrency, MaxInFlight: maxInFlight, HoldTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// capReserve is a reserve of one permit of cap in the reservation form.
func capReserve(id string, maxWait time.Duration) fsm.Reserve {
	return fsm.Reserve{Limit: "cap", Permits: 1, MaxWaitNanos: int64(maxWait), RequestID: id, Track: true}
}

// waited is the outcome of a reserve run in the background.
type waited struct {
	res fsm.ReserveResult
	err error
	at  time.Time
}

func reserveInBackground(ctx context.Context, n *Node, r fsm.Reserve) <-chan waited {
	ch := make(chan waited, 1)
	go func() {
		res, err := n.Reserve(ctx, r)
		ch <- waited{res, err, time.Now()}
	}()
	return ch
}

// capHeldByA starts a 3-node cluster with an in-flight cap "cap" of 1
// (TTL a minute) that reservation A holds, and returns it, its leader, a
// follower, a context for the test and A's grant.
func capHeldByA(t *testing.T) (*testCluster, *Node, *Node, context.Context, fsm.ReserveResult) {
	t.Helper()
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.followers(l)[0]
	ctx := ctxTimeout(t, 60*time.Second)
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "cap", Config: capConfig(t, 1, time.Minute)})
		return err
	})
	a, err := l.Reserve(ctx, capReserve("a", 0))
	if err != nil || a.Status != fsm.Granted || !a.Holds {
		t.Fatalf("A: %+v %v, want granted, holding", a, err)
	}
	return c, l, f, ctx, a
}

// TestReleaseWakesWaitingReserve: on a 3-node cluster, cap 1 with a TTL of
// a minute: B waits on a follower (forwarded to the leader over the
// binary protocol between nodes), C on the leader, both with a max wait
// of 30 s, half the TTL. A's release grants B at once, and B's grants C:
// each answer comes with the release that freed its slot, long before its
// deadline or any lapse, and each is a grant the client may use now.
func TestReleaseWakesWaitingReserve(t *testing.T) {
	_, l, f, ctx, a := capHeldByA(t)
	waitB := reserveInBackground(ctx, f, capReserve("b", 30*time.Second))
	waitFor(t, 10*time.Second, "B queued", func() bool { return l.fsm.Waiting() == 1 })
	waitC := reserveInBackground(ctx, l, capReserve("c", 30*time.Second))
	waitFor(t, 10*time.Second, "C queued", func() bool { return l.fsm.Waiting() == 2 })
	select {
	case w := <-waitB:
		t.Fatalf("B answered %+v %v before any slot was free", w.res, w.err)
	default:
	}
	released := time.Now()
	if rel, err := f.Release(ctx, fsm.Release{Reservation: a.ReservationID}); err != nil || rel.Released != 1 {
		t.Fatalf("release of A: %+v %v", rel, err)
	}
	b := <-waitB
	if b.err != nil || b.res.Status != fsm.Granted || b.res.WaitNanos != 0 || !b.res.Holds || b.res.ExpiresInNanos <= 0 {
		t.Fatalf("B (follower): %+v %v, want granted now, holding", b.res, b.err)
	}
	// Answered with the release, not at its deadline (30 s) nor at a
	// lapse (a minute).
	if took := b.at.Sub(released); took > 15*time.Second {
		t.Fatalf("B answered %v after A's release", took)
	}
	if time.Duration(b.res.ExpiresInNanos) > time.Minute {
		t.Fatalf("B's hold expires in %v, more than its TTL", time.Duration(b.res.ExpiresInNanos))
	}
	select {
	case w := <-waitC:
		t.Fatalf("C answered %+v %v while B holds the only slot", w.res, w.err)
	default:
	}
	if rel, err := l.Release(ctx, fsm.Release{Reservation: b.res.ReservationID}); err != nil || rel.Released != 1 {
		t.Fatalf("release of B: %+v %v", rel, err)
	}
	cr := <-waitC
	if cr.err != nil || cr.res.Status != fsm.Granted || cr.res.WaitNanos != 0 {
		t.Fatalf("C (leader): %+v %v, want granted now", cr.res, cr.err)
	}
	if took := cr.at.Sub(b.at); took > 15*time.Second {
		t.Fatalf("C answered %v after B's release", took)
	}
}

// TestWaitingReserveRefusedAtDeadlineAndWithdrawn: a reserve that nothing
// frees is refused at its deadline (the leader's no-op decides it, no
// command needed), and a waiting reserve whose client goes away is
// withdrawn from the queue, so that it takes no slot later.
func TestWaitingReserveRefusedAtDeadlineAndWithdrawn(t *testing.T) {
	_, l, f, ctx, _ := capHeldByA(t)
	start := time.Now()
	b, err := f.Reserve(ctx, capReserve("b", 300*time.Millisecond))
	if err != nil || b.Status != fsm.Refused || b.RetryAfterNanos <= 0 {
		t.Fatalf("B: %+v %v, want refused at its deadline", b, err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("B refused after %v, before its deadline", took)
	}
	// A client that goes away: no request ID (the node makes one up).
	gone, cancel := context.WithCancel(ctx)
	waitD := reserveInBackground(gone, f, capReserve("", 30*time.Second))
	waitFor(t, 10*time.Second, "D queued", func() bool { return l.fsm.Waiting() == 1 })
	cancel()
	if d := <-waitD; d.err == nil {
		t.Fatalf("D answered %+v after its client went away", d.res)
	}
	waitFor(t, 10*time.Second, "D withdrawn", func() bool { return l.fsm.Waiting() == 0 })
}

// TestWaitingReserveSurvivesLeaderChange: a reserve waiting on a follower
// keeps its place across a change of leader (its retry carries the same
// request ID and joins the same wait), and is granted when the slot is
// released through the new leader.
func TestWaitingReserveSurvivesLeaderChange(t *testing.T) {
	c, l, f, ctx, a := capHeldByA(t)
	waitB := reserveInBackground(ctx, f, capReserve("b", 30*time.Second))
	waitFor(t, 10*time.Second, "B queued", func() bool { return l.fsm.Waiting() == 1 })
	c.shutdown(t, l.cfg.ID)
	nl := c.leader()
	retryNoLeader(t, func() error {
		_, err := nl.Release(ctx, fsm.Release{Reservation: a.ReservationID})
		return err
	})
	b := <-waitB
	if b.err != nil || b.res.Status != fsm.Granted {
		t.Fatalf("B after the leader change: %+v %v, want granted", b.res, b.err)
	}
	if nl.fsm.Waiting() != 0 {
		t.Fatalf("%d reserves still wait", nl.fsm.Waiting())
	}
	if _, err := f.Reserve(ctx, capReserve("b", 30*time.Second)); err != nil && !errors.Is(err, ErrNoLeader) {
		t.Fatalf("a replay of B: %v", err)
	}
}
