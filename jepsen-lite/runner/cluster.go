package runner

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// agentNode is one permitd agent of the cluster: its addresses and the
// process currently running it (none while killed).
type agentNode struct {
	ID       string
	Index    int
	RaftAddr string
	HTTPAddr string
	DataDir  string
	LogPath  string

	mu         sync.Mutex
	proc       *process // nil while down
	paused     bool
	generation int // incremented on every start
	restarts   int
	crashes    []string // agents that exited without the runner's signal
}

// process is a started agent; exited is closed when it has been reaped.
type process struct {
	cmd    *exec.Cmd
	pid    int
	exited chan struct{}
	log    *os.File
}

// cluster is the set of agents of one run.
type cluster struct {
	bin     string
	nodes   []*agentNode
	initial string   // --initial-cluster value
	flags   []string // extra flags for every agent
	flagsOf func(i int) []string
	logf    func(format string, args ...any)
	// wrap, if set, turns an agent's command line into the one that runs
	// it (the namespace mode: ip netns exec NS bin args...).
	wrap func(node *agentNode, bin string, args []string) (string, []string)
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
			return "", fmt.Errorf("runner: no free port on %s: %w", ip, err)
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

// newCluster lays out n nodes under dir (data and logs).
func newCluster(bin, dir string, n int, flags []string, flagsOf func(int) []string, logf func(string, ...any)) (*cluster, bool, error) {
	raftAddrs, httpAddrs, distinct, err := allocateAddrs(n)
	if err != nil {
		return nil, false, err
	}
	c := &cluster{bin: bin, flags: flags, flagsOf: flagsOf, logf: logf}
	var initial []string
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		node := &agentNode{
			ID: id, Index: i, RaftAddr: raftAddrs[i], HTTPAddr: httpAddrs[i],
			DataDir: filepath.Join(dir, "data", id),
			LogPath: filepath.Join(dir, "nodes", id+".log"),
		}
		c.nodes = append(c.nodes, node)
		initial = append(initial, id+"="+node.RaftAddr)
	}
	c.initial = strings.Join(initial, ",")
	for _, d := range []string{filepath.Join(dir, "data"), filepath.Join(dir, "nodes")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, false, fmt.Errorf("runner: %w", err)
		}
	}
	return c, distinct, nil
}

// args returns node's agent command line.
func (c *cluster) args(node *agentNode) []string {
	args := []string{"agent",
		"--id", node.ID, "--data-dir", node.DataDir,
		"--raft-addr", node.RaftAddr, "--http-addr", node.HTTPAddr,
		"--initial-cluster", c.initial,
		"--test-hooks", "--log-level", "info",
	}
	args = append(args, c.flags...)
	if c.flagsOf != nil {
		args = append(args, c.flagsOf(node.Index)...)
	}
	return args
}

// start starts node's agent (it must be down). Its output is appended to
// its log file, after a marker line.
func (c *cluster) start(node *agentNode) error {
	node.mu.Lock()
	defer node.mu.Unlock()
	if node.proc != nil && !node.proc.hasExited() {
		return fmt.Errorf("runner: start %s: already running as pid %d", node.ID, node.proc.pid)
	}
	if node.proc != nil {
		node.crashes = append(node.crashes, fmt.Sprintf("%s (pid %d)", node.ID, node.proc.pid))
	}
	name, argv := c.bin, c.args(node)
	if c.wrap != nil {
		name, argv = c.wrap(node, c.bin, argv)
	}
	p, err := startProcess(node.ID, node.LogPath, node.generation+1, name, argv)
	if err != nil {
		return err
	}
	node.proc = p
	node.paused = false
	node.generation++
	if node.generation > 1 {
		node.restarts++
	}
	c.logf("started %s (pid %d)", node.ID, p.pid)
	return nil
}

// startProcess starts name with argv, its output appended to logPath after
// a marker line naming who and which generation, and reaps it when it
// exits (closing exited).
func startProcess(who, logPath string, generation int, name string, argv []string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	fmt.Fprintf(logf, "=== jepsen-lite: starting %s (generation %d) at %s: %s %s\n", who, generation, time.Now().Format(time.RFC3339Nano), name, strings.Join(argv, " "))
	cmd := exec.Command(name, argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("runner: start %s: %w", who, err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{}), log: logf}
	go func() {
		_ = cmd.Wait() // reaps the process; exit status is in the log's context
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

// running returns node's process, or nil while down.
func (n *agentNode) running() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// state returns whether node is up (started by the runner and not exited)
// and whether it is paused.
func (n *agentNode) state() (up, paused bool, gen int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil && !n.proc.hasExited(), n.paused, n.generation
}

// hasExited reports whether the process has exited (and been reaped).
func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// unexpectedExits returns the nodes whose agent exited without being
// killed or stopped by the runner.
func (c *cluster) unexpectedExits() []string {
	var out []string
	for _, n := range c.nodes {
		n.mu.Lock()
		out = append(out, n.crashes...)
		if n.proc != nil && n.proc.hasExited() {
			out = append(out, fmt.Sprintf("%s (pid %d)", n.ID, n.proc.pid))
		}
		n.mu.Unlock()
	}
	return out
}

// kill sends SIGKILL to node's process (continuing it first if paused is
// not needed: SIGKILL ends stopped processes too) and waits until it is
// reaped.
func (c *cluster) kill(node *agentNode) error {
	node.mu.Lock()
	p := node.proc
	node.proc = nil
	node.paused = false
	node.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	select {
	case <-p.exited:
		c.logf("killed %s (pid %d)", node.ID, p.pid)
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("runner: %s (pid %d) not reaped 10s after SIGKILL", node.ID, p.pid)
	}
}

// pause sends SIGSTOP to node's process.
func (c *cluster) pause(node *agentNode) error {
	node.mu.Lock()
	defer node.mu.Unlock()
	if node.proc == nil {
		return fmt.Errorf("runner: pause %s: not running", node.ID)
	}
	if err := syscall.Kill(node.proc.pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("runner: SIGSTOP %s (pid %d): %w", node.ID, node.proc.pid, err)
	}
	node.paused = true
	return nil
}

// resume sends SIGCONT to node's process if it is paused.
func (c *cluster) resume(node *agentNode) error {
	node.mu.Lock()
	defer node.mu.Unlock()
	if node.proc == nil || !node.paused {
		return nil
	}
	if err := syscall.Kill(node.proc.pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("runner: SIGCONT %s (pid %d): %w", node.ID, node.proc.pid, err)
	}
	node.paused = false
	return nil
}

// stop ends node's process: SIGCONT, SIGTERM, and SIGKILL if it has not
// exited within grace.
func (c *cluster) stop(node *agentNode, grace time.Duration) {
	node.mu.Lock()
	p := node.proc
	node.proc = nil
	node.paused = false
	node.mu.Unlock()
	p.terminate(node.ID, grace, c.logf)
}

// terminate ends p: SIGCONT (in case it is paused), SIGTERM, and SIGKILL
// if it has not exited within grace; it waits (bounded) for the reaper.
func (p *process) terminate(name string, grace time.Duration, logf func(string, ...any)) {
	if p == nil {
		return
	}
	_ = syscall.Kill(p.pid, syscall.SIGCONT)
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		logf("WARNING: %s (pid %d) not reaped after SIGKILL", name, p.pid)
	}
}

// stopAll stops every node, in parallel.
func (c *cluster) stopAll(grace time.Duration) {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { c.stop(n, grace) })
	}
	wg.Wait()
}

// raftAddrs returns the raft addresses of nodes.
func raftAddrs(nodes []*agentNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.RaftAddr
	}
	return out
}

// ids returns the IDs of nodes.
func ids(nodes []*agentNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}
