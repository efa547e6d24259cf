package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestJoinWithAMemberIDOrAddressIsRefused: joining with the ID of a member
// at another address, or with a member's address under another ID, is
// refused and leaves the configuration as it was.
func TestJoinWithAMemberIDOrAddressIsRefused(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	before := l.Status().Servers
	var err error
	retryNoLeader(t, func() error { _, err = l.Join(ctx, "n2", "elsewhere:7000"); return nil })
	if !errors.Is(err, ErrInvalid) || !strings.Contains(Message(err), `"n2" is already a member of the cluster at n2:7000`) {
		t.Fatalf("join n2 at another address: %v", err)
	}
	retryNoLeader(t, func() error { _, err = c.followers(l)[0].Join(ctx, "n9", addrOf("n3")); return nil })
	if !errors.Is(err, ErrInvalid) || !strings.Contains(Message(err), `already the address of member "n3"`) {
		t.Fatalf("join with n3's address: %v", err)
	}
	if got := l.Status().Servers; len(got) != len(before) {
		t.Fatalf("configuration changed by refused joins: %+v", got)
	}
	for _, s := range l.Status().Servers {
		if s.RaftAddr != addrOf(s.ID) {
			t.Fatalf("member %s moved to %s", s.ID, s.RaftAddr)
		}
	}
}

// TestRemovedNodeKnowsIt: a node removed from the cluster answers at once
// that it was removed, is not ready, and says so in its status, instead
// of holding every reserve until it times out; the others go on.
func TestRemovedNodeKnowsIt(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: longExpiry(t)}); return err })
	victim := c.followers(l)[0]
	waitFor(t, 10*time.Second, "the victim to see the limit", func() bool { _, ok := victim.fsm.Limit("api"); return ok })
	retryNoLeader(t, func() error { return l.Remove(ctx, victim.ID()) })
	waitFor(t, 10*time.Second, "the removed node to know it", func() bool { return victim.Status().State == "removed" })
	if victim.Status().Ready {
		t.Fatalf("a removed node is ready: %+v", victim.Status())
	}
	start := time.Now()
	_, err := victim.Reserve(context.Background(), fsm.Reserve{Limit: "api", Permits: 1})
	if !errors.Is(err, ErrRemoved) || time.Since(start) > time.Second {
		t.Fatalf("reserve on a removed node: %v after %v, want ErrRemoved at once", err, time.Since(start))
	}
	if _, err := victim.Limits(ctx); !errors.Is(err, ErrRemoved) {
		t.Fatalf("read on a removed node: %v", err)
	}
	if res, err := l.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second)}); err != nil || res.Status != fsm.Granted {
		t.Fatalf("the remaining cluster: %+v %v", res, err)
	}
	// Restarted from its data directory, it knows at once.
	c.kill(victim.ID())
	again := c.start(victim.ID(), nil)
	if st := again.Status(); st.State != "removed" || st.Ready {
		t.Fatalf("a removed node restarted from its data directory: %+v", st)
	}
}

// TestNoLeaderAnswersWithinMaxWaitPlusLeaderWait: with no leader anywhere
// (a lone survivor of three), a reserve fails within its max wait plus
// the node's LeaderWait, not after the caller's whole deadline.
func TestNoLeaderAnswersWithinMaxWaitPlusLeaderWait(t *testing.T) {
	c := newTestClusterWithConfig(t, 3, func(cfg *Config) { cfg.LeaderWait = 300 * time.Millisecond })
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: longExpiry(t)}); return err })
	survivor := c.followers(l)[0]
	for _, id := range c.ids {
		if id != survivor.ID() {
			c.kill(id)
		}
	}
	waitFor(t, 10*time.Second, "the survivor to lose the leader", func() bool { return survivor.Status().LeaderID == "" })
	for _, maxWait := range []time.Duration{0, 500 * time.Millisecond} {
		start := time.Now()
		_, err := survivor.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(maxWait)})
		took := time.Since(start)
		if !errors.Is(err, ErrNoLeader) || took > maxWait+300*time.Millisecond+500*time.Millisecond {
			t.Fatalf("max wait %v without a leader: %v after %v, want ErrNoLeader within max wait + LeaderWait", maxWait, err, took)
		}
	}
}

// longExpiry is a strict limit of one permit per 10 ms whose permits stay
// usable for a second: these tests are about who answers, not when.
func longExpiry(t *testing.T) bucket.Config {
	t.Helper()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: 10 * time.Millisecond, MaxReserved: 10, Expiry: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
