package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/server"
)

// cluster.go: the demo's cluster, three register nodes in this process on
// loopback, each with its HTTP server and a temporary data directory.

// demoNode is one embedded node with its HTTP server.
type demoNode struct {
	id, raftAddr, httpAddr, dir string
	node                        *node.Node
	srv                         *http.Server
}

// cluster is the demo's three nodes, the logger they share and the
// security material of a secured demo (nil for the plain one).
type cluster struct {
	nodes   []*demoNode
	initial []raft.Server
	logger  hclog.Logger
	sec     *demoSecurity
}

// startCluster makes the security material (with secure, describing it
// on out), the nodes' data directories, and starts the nodes; close
// stops them and removes what it made.
func startCluster(out io.Writer, verbose, secure bool) (*cluster, error) {
	addrs, err := loopbackAddrs(6)
	if err != nil {
		return nil, err
	}
	level := hclog.Off
	if verbose {
		level = hclog.Info
	}
	c := &cluster{logger: hclog.New(&hclog.LoggerOptions{Name: "demo", Level: level, Output: os.Stderr})}
	if secure {
		if c.sec, err = newDemoSecurity([]string{"n1", "n2", "n3"}); err != nil {
			return nil, fmt.Errorf("demo: certificates: %w", err)
		}
		fmt.Fprint(out, c.sec.describe())
	}
	for i := 0; i < 3; i++ {
		dir, err := os.MkdirTemp("", "permitd-demo-")
		if err != nil {
			c.close()
			return nil, err
		}
		d := &demoNode{id: fmt.Sprintf("n%d", i+1), raftAddr: addrs[2*i], httpAddr: addrs[2*i+1], dir: dir}
		c.nodes = append(c.nodes, d)
		c.initial = append(c.initial, raft.Server{ID: raft.ServerID(d.id), Address: raft.ServerAddress(d.raftAddr), Suffrage: raft.Voter})
	}
	for _, d := range c.nodes {
		if err := c.start(d); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// close stops the nodes still running, removes their data directories
// and the certificates.
func (c *cluster) close() {
	for _, d := range c.nodes {
		c.stop(d, false)
	}
	for _, d := range c.nodes {
		os.RemoveAll(d.dir)
	}
	c.sec.close()
}

// start starts node d and its HTTP server.
func (c *cluster) start(d *demoNode) error {
	n, err := node.New(node.Config{ID: d.id, DataDir: d.dir, RaftAddr: d.raftAddr, InitialCluster: c.initial, Logger: c.logger.Named(d.id),
		Network: c.sec.network(d.id)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", d.httpAddr)
	if err != nil {
		n.Shutdown()
		return err
	}
	d.node = n
	ln, h := c.sec.serve(d.id, ln, server.NewHandler(n, server.HandlerOptions{Logger: c.logger.Named("http")}))
	d.srv = server.NewHTTPServer(d.httpAddr, h)
	go d.srv.Serve(ln)
	return nil
}

// stop stops node d, if it runs: with crash, killed (no graceful
// handover), else shut down.
func (c *cluster) stop(d *demoNode, crash bool) {
	if d.node == nil {
		return
	}
	if crash {
		d.node.Kill()
	} else {
		d.node.Shutdown()
	}
	d.srv.Close()
	d.node = nil
}

// leader returns the running node that leads and is ready, and its term
// (nil, 0 if none does now).
func (c *cluster) leader() (*demoNode, uint64) {
	for _, d := range c.nodes {
		if d.node == nil {
			continue
		}
		if st := d.node.Status(); st.State == "leader" && st.Ready {
			return d, st.Term
		}
	}
	return nil, 0
}

// awaitLeader waits until a node leads; false if ctx ended first.
func (c *cluster) awaitLeader(ctx context.Context) bool {
	for {
		if l, _ := c.leader(); l != nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// leaderNode waits until a node leads and returns it (nil if ctx ended
// first).
func (c *cluster) leaderNode(ctx context.Context) *node.Node {
	for ctx.Err() == nil {
		if l, _ := c.leader(); l != nil {
			return l.node
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// env is what scenes 2 and 3 run against: the HTTP addresses of the
// nodes running now, the way to the leader (waiting for one until ctx
// ends), the logger and the security material.
func (c *cluster) env(ctx context.Context) sceneEnv {
	var servers []string
	for _, d := range c.nodes {
		if d.node != nil {
			servers = append(servers, d.httpAddr)
		}
	}
	return sceneEnv{logger: c.logger, servers: servers, sec: c.sec, leader: func() *node.Node { return c.leaderNode(ctx) }}
}

// sceneEnv is the cluster as scenes 2 and 3 see it (cluster.env).
type sceneEnv struct {
	logger  hclog.Logger
	servers []string
	leader  func() *node.Node
	sec     *demoSecurity
}

// loopbackAddrs returns n free loopback addresses (HOST:PORT).
func loopbackAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var out []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}
