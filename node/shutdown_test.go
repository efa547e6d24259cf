package node

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
)

// TestGracefulShutdownHandsOverLeadership: a leader that is shut down
// (which transfers leadership first) leaves a cluster that elects a new
// leader and goes on granting, with the strict spacing kept across the
// handover.
func TestGracefulShutdownHandsOverLeadership(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	interval := 200 * time.Millisecond
	retryNoLeader(t, func() error {
		_, err := old.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: strictConfig(t, interval, 1)})
		return err
	})
	first, err := old.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second), RequestID: fmt.Sprintf("gs-1-%d", time.Now().UnixNano())})
	if err != nil || first.Status != fsm.Granted {
		t.Fatalf("first reserve: %+v %v", first, err)
	}
	firstAt := time.Now().Add(time.Duration(first.WaitNanos))

	oldID := old.cfg.ID
	c.shutdown(t, oldID)
	var nl *Node
	waitFor(t, 5*time.Second, "a new leader", func() bool {
		for _, n := range c.ids {
			if n == oldID {
				continue
			}
			if x := c.node(n); x != nil && x.raft.State() == raft.Leader {
				nl = x
				return true
			}
		}
		return false
	})
	res, err := nl.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(5 * time.Second), RequestID: fmt.Sprintf("gs-2-%d", time.Now().UnixNano())})
	if err != nil || res.Status != fsm.Granted {
		t.Fatalf("reserve after the handover: %+v %v", res, err)
	}
	if at := time.Now().Add(time.Duration(res.WaitNanos)); at.Sub(firstAt) < interval-5*time.Millisecond {
		t.Fatalf("grants %v apart across the handover, want >= %v", at.Sub(firstAt), interval)
	}
}

func TestHasExistingState(t *testing.T) {
	dir := t.TempDir()
	if has, err := HasExistingState(dir); has || err != nil {
		t.Fatalf("empty dir: %v %v", has, err)
	}
	if has, err := HasExistingState(filepath.Join(dir, "missing")); has || err != nil {
		t.Fatalf("missing dir: %v %v", has, err)
	}
	c := newTestCluster(t, 1)
	c.leader()
	if has, err := HasExistingState(c.dirs["n1"]); !has || err != nil {
		t.Fatalf("a node's dir: %v %v", has, err)
	}
}

// TestGracefulShutdownTransfersLeadershipBeforeAnyElection: the README's
// "a leader hands over leadership first", told apart from an ordinary
// election by the clock: once the cluster has its leader, the followers
// are set to wait 5-10 s without one before they stand, so a new leader
// within 2 s of the Shutdown call was handed the leadership. (Without the
// hand-over, no leader came within 2 s.)
func TestGracefulShutdownTransfersLeadershipBeforeAnyElection(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.leader()
	for _, id := range c.ids {
		n := c.node(id)
		rc := n.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = 5*time.Second, 5*time.Second
		if err := n.raft.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	oldID := old.cfg.ID
	start := time.Now()
	c.shutdown(t, oldID)
	waitFor(t, 2*time.Second-time.Since(start), "a new leader, handed over before any follower would stand", func() bool {
		for _, id := range c.ids {
			if n := c.node(id); id != oldID && n != nil && n.raft.State() == raft.Leader {
				return true
			}
		}
		return false
	})
}
