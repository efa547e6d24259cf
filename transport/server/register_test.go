package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/node/faultnet"
)

// register_test.go: a register of real nodes in the process (raft-boltdb
// in temporary directories, an in-memory network), for the tests of the
// binary client protocol, which the node's call loop serves.

// testRegister is size nodes n1..nN on one faultnet switch.
type testRegister struct {
	t     testing.TB
	nodes []*node.Node
}

// newTestCluster starts a register of size nodes, stopped when the test
// ends.
func newTestCluster(t testing.TB, size int) *testRegister {
	t.Helper()
	sw := faultnet.New()
	logger := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Error, Output: io.Discard})
	var servers []raft.Server
	for i := 1; i <= size; i++ {
		id := fmt.Sprintf("n%d", i)
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":7000"), Suffrage: raft.Voter})
	}
	c := &testRegister{t: t}
	for _, s := range servers {
		n, err := node.New(node.Config{
			ID: string(s.ID), DataDir: t.TempDir(), RaftAddr: string(s.Address), InitialCluster: servers,
			Network: sw.Host(string(s.Address)), Logger: logger,
			// Generous for a loaded 2-core machine running tests in
			// parallel under -race: spurious elections only slow the
			// tests down.
			HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
			LeaderLeaseTimeout: 250 * time.Millisecond, ApplyTimeout: 3 * time.Second,
		})
		if err != nil {
			t.Fatalf("start %s: %v", s.ID, err)
		}
		t.Cleanup(n.Kill)
		c.nodes = append(c.nodes, n)
	}
	return c
}

// leader waits for a node that leads and is ready (its cluster timeline
// is active).
func (c *testRegister) leader() *node.Node {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, n := range c.nodes {
			if st := n.Status(); st.State == "leader" && st.Ready {
				return n
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatal("timed out after 10s waiting for a ready leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// followers returns the nodes but leader.
func (c *testRegister) followers(leader *node.Node) []*node.Node {
	return slices.DeleteFunc(slices.Clone(c.nodes), func(n *node.Node) bool { return n == leader })
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// retryNoLeader retries op while it fails with node.ErrNoLeader (a leader
// change under a loaded test machine), for up to 10 s.
func retryNoLeader(t *testing.T, op func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	err := op()
	for ; errors.Is(err, node.ErrNoLeader) && time.Now().Before(deadline); err = op() {
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// strictConfig is a strict limit of one permit per interval.
func strictConfig(t *testing.T, interval time.Duration, maxReserved int64) bucket.Config {
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: interval, MaxReserved: maxReserved, Expiry: interval / 10})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return cfg
}

// putLeasedLimits puts, through leader l, limit "api" leased (a strict
// limit of a permit a millisecond, C = 500) and limit "plain", not leased.
func putLeasedLimits(t *testing.T, ctx context.Context, l *node.Node) {
	t.Helper()
	for _, name := range []string{"api", "plain"} {
		retryNoLeader(t, func() error {
			_, err := l.PutLimit(ctx, fsm.PutLimit{Name: name, Config: strictConfig(t, time.Millisecond, 5)})
			return err
		})
	}
	retryNoLeader(t, func() error {
		_, err := l.PutLeasePolicy(ctx, fsm.LeasePolicy{Limit: "api", Leased: true, BurstPermits: 500})
		return err
	})
}

// limitInfo reads limit name through n (linearizable), and whether it
// exists.
func limitInfo(n *node.Node, name string) (fsm.LimitInfo, bool) {
	info, err := n.Limit(context.Background(), name)
	return info, err == nil
}

// leasePool reads the lease pool of limit name through n (linearizable),
// and whether it exists.
func leasePool(n *node.Node, name string) (fsm.LeasePoolInfo, bool) {
	p, _, err := n.LeaseView(context.Background(), name)
	return p, err == nil
}

// holdReserves takes k of n's reserve slots, as k reserves in flight
// would hold them, and returns the function that gives them back.
func holdReserves(t *testing.T, n *node.Node, k int64) (release func()) {
	t.Helper()
	for i := range k {
		if !n.TryHoldReserve() {
			t.Fatalf("slot %d of %d: the node is full", i+1, k)
		}
	}
	return func() {
		for range k {
			n.ReleaseReserve()
		}
	}
}
