package node

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/node/faultnet"
	"github.com/permitd/permitd/transport/wire"
)

// testCluster is an in-process cluster on a faultnet switch, with real
// raft-boltdb stores in temporary directories.
type testCluster struct {
	t      *testing.T
	sw     *faultnet.Switch
	ids    []string
	dirs   map[string]string
	nodes  map[string]*Node
	clocks map[string]wire.Clock
	tweak  func(*Config)
	mu     sync.Mutex
}

func addrOf(id string) string { return id + ":7000" }

func testLogger(t *testing.T) hclog.Logger {
	if testing.Verbose() {
		return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Info})
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Error, Output: io.Discard})
}

func newTestCluster(t *testing.T, size int) *testCluster {
	t.Helper()
	return newTestClusterFull(t, size, nil, nil)
}

func newTestClusterWith(t *testing.T, size int, clock func(id string) wire.Clock) *testCluster {
	t.Helper()
	return newTestClusterFull(t, size, clock, nil)
}

func newTestClusterWithConfig(t *testing.T, size int, tweak func(*Config)) *testCluster {
	t.Helper()
	return newTestClusterFull(t, size, nil, tweak)
}

func newTestClusterFull(t *testing.T, size int, clock func(id string) wire.Clock, tweak func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, sw: faultnet.New(), dirs: map[string]string{}, nodes: map[string]*Node{}, clocks: map[string]wire.Clock{}, tweak: tweak}
	var servers []raft.Server
	for i := 1; i <= size; i++ {
		id := fmt.Sprintf("n%d", i)
		c.ids = append(c.ids, id)
		c.dirs[id] = t.TempDir()
		if clock != nil {
			if clk := clock(id); clk != nil {
				c.clocks[id] = clk
			}
		}
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addrOf(id)), Suffrage: raft.Voter})
	}
	for _, id := range c.ids {
		c.start(id, servers)
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *testCluster) config(id string, initial []raft.Server) Config {
	clk := c.clocks[id]
	if clk == nil {
		clk = wire.NewMonotonicClock()
	}
	cfg := Config{
		ID: id, DataDir: c.dirs[id], RaftAddr: addrOf(id), InitialCluster: initial,
		Clock: clk, Network: c.sw.Host(addrOf(id)), Logger: testLogger(c.t),
		// Generous for a loaded 2-core machine running tests in parallel
		// under -race: spurious elections only slow the tests down.
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, ApplyTimeout: 3 * time.Second,
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

func (c *testCluster) start(id string, initial []raft.Server) *Node {
	c.t.Helper()
	n, err := New(c.config(id, initial))
	if err != nil {
		c.t.Fatalf("start %s: %v", id, err)
	}
	c.mu.Lock()
	c.nodes[id] = n
	c.mu.Unlock()
	return n
}

func (c *testCluster) node(id string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *testCluster) kill(id string) {
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if n != nil {
		n.Kill()
	}
}

// shutdown stops node id gracefully (a leader hands over first), as
// SIGTERM does, and forgets it.
func (c *testCluster) shutdown(t *testing.T, id string) {
	t.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if n == nil {
		t.Fatalf("shutdown: no node %s", id)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatalf("Shutdown of %s: %v", id, err)
	}
}

func (c *testCluster) stopAll() {
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = map[string]*Node{}
	c.mu.Unlock()
	for _, n := range nodes {
		n.Kill()
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leader waits for a node whose cluster timeline is active.
func (c *testCluster) leader() *Node {
	c.t.Helper()
	var l *Node
	waitFor(c.t, 10*time.Second, "a ready leader", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			if n.timeline.isActive() && n.raft.State() == raft.Leader {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func (c *testCluster) followers(leader *Node) []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, id := range c.ids {
		if n := c.nodes[id]; n != nil && n != leader {
			out = append(out, n)
		}
	}
	return out
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
