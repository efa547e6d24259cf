package node

import (
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestHoldEndWithinRegisterHold: the end of an in-flight hold a node
// answers (HoldExpiresInNanos, counted from the moment the node answers,
// as its HTTP edge tells the client with held_ns) is never after the
// moment the register frees the slot, in a reserve of a strict limit
// (whose permit expires long before the hold: ExpiresInNanos is not the
// hold's end) and an in-flight cap: for a fresh grant and a waiter
// granted by a release, both forwarded by a follower whose answers come
// back late (a slow leader-to-follower leg), a replay of that waiter, a
// waiter granted on the leader at the lapse of a hold (its hold runs from
// the lapse, before the entry that decides it), a replay of it through
// the follower, and a fresh grant on the leader; the leader stalls
// between each decision and its answer, so that a hold's end not counted
// from the answer's departure shows.
//
// The node's answer counts from an instant just before it returns; the
// test sees only the return, a few microseconds later: it allows
// answerSlack for that.
func TestHoldEndWithinRegisterHold(t *testing.T) {
	const answerSlack = 5 * time.Millisecond
	const ttl = 3 * time.Second
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.followers(l)[0]
	ctx := ctxTimeout(t, 60*time.Second)
	rpm, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 10, Per: time.Second, Expiry: 2 * time.Second, MaxReserved: 10})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "rpm", Config: rpm}); return err })
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "cap", Config: capConfig(t, 1, ttl)})
		return err
	})
	const slowLeg, stall = 300 * time.Millisecond, 200 * time.Millisecond
	l.testDelayForwardedAnswer.Store(int64(slowLeg))
	l.testDelayLeaderAnswer.Store(int64(stall))
	type answered struct {
		res fsm.ReserveResult
		err error
		// returned is right after the node returned; read is the instant
		// the leader's timeline reading (leaderNow) returns.
		returned, read time.Time
		leaderNow      int64
	}
	reserve := func(n *Node, id string, maxWait time.Duration) <-chan answered {
		ch := make(chan answered, 1)
		go func() {
			r := fsm.Reserve{Limit: "rpm", Permits: 1, Also: []fsm.Part{{Limit: "cap", Permits: 1}},
				MaxWaitNanos: int64(maxWait), RequestID: id, Track: true}
			res, err := n.Reserve(ctx, r)
			returned := time.Now()
			now, _, read, _ := l.timeline.stamp()
			ch <- answered{res, err, returned, read, now}
		}()
		return ch
	}
	check := func(what string, got answered) fsm.ReserveResult {
		t.Helper()
		res := got.res
		if got.err != nil || res.Status != fsm.Granted || !res.Holds || res.HoldExpiresInNanos <= 0 {
			t.Fatalf("%s: %+v %v, want granted, holding", what, res, got.err)
		}
		if res.ExpiresInNanos <= 0 || res.ExpiresInNanos > res.HoldExpiresInNanos {
			t.Fatalf("%s: expires in %v, its hold ends in %v: want the strict permit's expiry, before the hold's end",
				what, time.Duration(res.ExpiresInNanos), time.Duration(res.HoldExpiresInNanos))
		}
		info, ok := l.fsm.Reservation(res.ReservationID)
		if !ok {
			t.Fatalf("%s: reservation %d unknown to the leader", what, res.ReservationID)
		}
		// The register frees the slot when cluster time reaches the hold's
		// end, which its timeline reaches no sooner than holdEnd-leaderNow
		// after the reading (it runs no faster than real time since its
		// last reading), which happened before read: up to the few
		// microseconds of the reading itself, the bound below is the
		// register's. The node's answer counts from before returned.
		holdEnd := info.ServedAtNanos + int64(ttl)
		registers := time.Duration(holdEnd-got.leaderNow) + got.read.Sub(got.returned)
		if told := time.Duration(res.HoldExpiresInNanos); told > registers+answerSlack {
			t.Fatalf("%s: the client is told its hold ends %v after the register frees the slot (hold ends in %v, the register's %v later)",
				what, told-registers, told, registers)
		}
		return res
	}
	a := check("A, a fresh grant forwarded", <-reserve(f, "a", 0))
	waitB := reserve(f, "b", 30*time.Second)
	waitFor(t, 10*time.Second, "B queued", func() bool { return l.fsm.Waiting() == 1 })
	if rel, err := l.Release(ctx, fsm.Release{Reservation: a.ReservationID}); err != nil || rel.Released != 1 {
		t.Fatalf("release of A: %+v %v", rel, err)
	}
	check("B, forwarded, granted by A's release while it waited", <-waitB)
	check("a replay of B, forwarded", <-reserve(f, "b", 30*time.Second))
	// C waits on the leader until B's hold lapses: the no-op the leader
	// writes then decides C, granted at the lapse.
	waitC := reserve(l, "c", 30*time.Second)
	waitFor(t, 10*time.Second, "C queued", func() bool { return l.fsm.Waiting() == 1 })
	cres := check("C, on the leader, granted at the lapse of B's hold", <-waitC)
	if info, _ := l.fsm.Reservation(cres.ReservationID); info.DecidedAtNanos >= info.ServedAtNanos+int64(ttl) {
		t.Fatalf("C: %+v", info)
	}
	check("a replay of C, forwarded", <-reserve(f, "c", 30*time.Second))
	if rel, err := l.Release(ctx, fsm.Release{Reservation: cres.ReservationID}); err != nil || rel.Released != 1 {
		t.Fatalf("release of C: %+v %v", rel, err)
	}
	check("D, a fresh grant on the leader", <-reserve(l, "d", 0))
}
