package cluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/internal/secure"
	"github.com/permitd/permitd/jepsen-lite/runner/process"
)

// Node is one permitd agent of the cluster: its addresses, data directory
// and log, and the supervisor of the processes that run it.
type Node struct {
	// ID is the agent's --id (n1, n2, ...), Index its 0-based position.
	ID    string
	Index int
	// RaftAddr and HTTPAddr are its --raft-addr and --http-addr.
	RaftAddr string
	HTTPAddr string
	// DataDir is its --data-dir, kept across restarts; LogPath its log.
	DataDir string
	LogPath string
	// Proc supervises its processes (see package process).
	Proc *process.Supervisor
}

// State returns whether node is up (started and not exited), whether it is
// paused, and its generation (the number of starts).
func (n *Node) State() (up, paused bool, gen int) {
	st := n.Proc.State()
	return st.Up, st.Paused, st.Generation
}

// Cluster is the set of agents of one run.
type Cluster struct {
	// Nodes are the agents, in index order.
	Nodes []*Node

	bin     string
	initial string   // --initial-cluster value
	flags   []string // extra flags for every agent
	flagsOf func(i int) []string
	creds   *secure.Creds // TLS and tokens (nil: none)
	logf    func(format string, args ...any)
	// wrap, if set, turns an agent's command line into the one that runs
	// it (the namespace mode: ip netns exec NS bin args...).
	wrap func(node *Node, bin string, args []string) (string, []string)
}

// allocateAddrs picks each node's loopback IP and free ports. Each node
// gets its own IP (127.0.0.11, .12, ...) when they can be bound, so that the
// fault layer can tell peers apart by source IP; otherwise all share
// 127.0.0.1. It returns whether distinct IPs are in use.
func allocateAddrs(n int) (raft, http []string, distinct bool, err error) {
	distinct = true
	ips := make([]string, n)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.0.%d", 11+i)
		if l, lerr := net.Listen("tcp", ips[i]+":0"); lerr != nil {
			distinct = false
		} else {
			l.Close()
		}
	}
	if !distinct {
		for i := range ips {
			ips[i] = "127.0.0.1"
		}
	}
	// Hold every listener until all ports are chosen, so none repeats.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	port := func(ip string) (string, error) {
		l, err := net.Listen("tcp", ip+":0")
		if err != nil {
			return "", fmt.Errorf("cluster: no free port on %s: %w", ip, err)
		}
		held = append(held, l)
		return l.Addr().String(), nil
	}
	for _, ip := range ips {
		r, err := port(ip)
		if err != nil {
			return nil, nil, false, err
		}
		h, err := port(ip)
		if err != nil {
			return nil, nil, false, err
		}
		raft, http = append(raft, r), append(http, h)
	}
	return raft, http, distinct, nil
}

// New lays out n agents of bin under dir (data/ and nodes/, the logs) on
// loopback (see Relocate for the namespace mode); nothing is started.
// flags are extra flags for every agent, flagsOf(i) (if set) for agent i.
// It reports whether each node has its own loopback IP.
func New(bin, dir string, n int, flags []string, flagsOf func(int) []string, logf func(string, ...any)) (*Cluster, bool, error) {
	raftAddrs, httpAddrs, distinct, err := allocateAddrs(n)
	if err != nil {
		return nil, false, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	c := &Cluster{bin: bin, flags: flags, flagsOf: flagsOf, logf: logf}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		node := &Node{
			ID: id, Index: i, RaftAddr: raftAddrs[i], HTTPAddr: httpAddrs[i],
			DataDir: filepath.Join(dir, "data", id),
			LogPath: filepath.Join(dir, "nodes", id+".log"),
		}
		node.Proc = process.New(process.Spec{Name: id, LogPath: node.LogPath, Logf: logf,
			Command: func() (string, []string) { return c.command(node) }})
		c.Nodes = append(c.Nodes, node)
	}
	c.setInitial()
	for _, d := range []string{filepath.Join(dir, "data"), filepath.Join(dir, "nodes")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, false, fmt.Errorf("cluster: %w", err)
		}
	}
	return c, distinct, nil
}

// setInitial derives --initial-cluster from the nodes' raft addresses.
func (c *Cluster) setInitial() {
	var initial []string
	for _, n := range c.Nodes {
		initial = append(initial, n.ID+"="+n.RaftAddr)
	}
	c.initial = strings.Join(initial, ",")
}

// Relocate moves the laid-out cluster (before any start): node i gets the
// addresses addrs(i) returns, and wrap (if set) turns each agent's command
// line into the one that runs it.
func (c *Cluster) Relocate(addrs func(i int) (raft, http string), wrap func(node *Node, bin string, args []string) (string, []string)) {
	for i, n := range c.Nodes {
		n.RaftAddr, n.HTTPAddr = addrs(i)
	}
	c.setInitial()
	c.wrap = wrap
}

// Secure makes every agent started from now on serve TLS and require
// tokens with creds (nil: neither). Call it before the first start.
func (c *Cluster) Secure(creds *secure.Creds) { c.creds = creds }

// Addrs returns every address the agents listen on (raft and HTTP), in
// index order.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.RaftAddr, n.HTTPAddr)
	}
	return out
}

// LogLevel is every agent's --log-level.
const LogLevel = "info"

// Args returns node's agent command line (without the program).
func (c *Cluster) Args(node *Node) []string {
	args := []string{"agent",
		"--id", node.ID, "--data-dir", node.DataDir,
		"--raft-addr", node.RaftAddr, "--http-addr", node.HTTPAddr,
		"--initial-cluster", c.initial,
		"--test-hooks", "--log-level", LogLevel,
	}
	if !loopback(node.HTTPAddr) || !loopback(node.RaftAddr) {
		// A node in its own network namespace listens on that
		// namespace's address, in clear, with fault hooks: the agent
		// refuses that without --insecure (the namespaces are the
		// test's own, unreachable from outside).
		args = append(args, "--insecure")
	}
	args = append(args, c.creds.AgentArgs(node.ID)...)
	args = append(args, c.flags...)
	if c.flagsOf != nil {
		args = append(args, c.flagsOf(node.Index)...)
	}
	return args
}

// command is node's whole command line.
func (c *Cluster) command(node *Node) (string, []string) {
	name, argv := c.bin, c.Args(node)
	if c.wrap != nil {
		name, argv = c.wrap(node, c.bin, argv)
	}
	return name, argv
}

// Start starts node's agent (it must be down).
func (c *Cluster) Start(node *Node) error {
	_, err := node.Proc.Start()
	return err
}

// Kill kills node's agent with SIGKILL and waits until it is reaped.
func (c *Cluster) Kill(node *Node) error { return node.Proc.Kill() }

// Pause stops node's agent with SIGSTOP.
func (c *Cluster) Pause(node *Node) error { return node.Proc.Pause() }

// Resume continues node's agent with SIGCONT if it is paused.
func (c *Cluster) Resume(node *Node) error { return node.Proc.Resume() }

// StopAll stops every agent (SIGTERM, SIGKILL after grace), in parallel.
func (c *Cluster) StopAll(grace time.Duration) {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(func() { n.Proc.Stop(grace) })
	}
	wg.Wait()
}

// Node returns the node with id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// UpNodes returns the running, unpaused nodes.
func (c *Cluster) UpNodes() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if up, paused, _ := n.State(); up && !paused {
			out = append(out, n)
		}
	}
	return out
}

// Servers returns the agents' HTTP addresses, in index order.
func (c *Cluster) Servers() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.HTTPAddr
	}
	return out
}

// UnexpectedExits returns the agents that exited without being killed or
// stopped by the runner.
func (c *Cluster) UnexpectedExits() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Proc.UnexpectedExits()...)
	}
	return out
}

// RaftAddrs returns the raft addresses of nodes.
func RaftAddrs(nodes []*Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.RaftAddr
	}
	return out
}

// IDs returns the IDs of nodes.
func IDs(nodes []*Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// loopback reports whether addr's host is a loopback name or address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
