package netns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The namespace mode's network. Every run claims one /24 of guardNet for
// itself (its "guard"), blackholes it in the root namespace before it
// creates any namespace, and puts its nodes in the lower /25 of it (the
// "subnet"): node i at .i+1, the runner's root-side veth at .126. The
// connected /25 of that veth is more specific than the blackholed /24, so
// the runner reaches the nodes through the veth only; with the veth down
// or gone the blackhole drops everything, and nothing is ever routed out
// of the machine.
var guardNet = netip.MustParsePrefix("10.213.0.0/16")

const (
	// namePrefix starts every namespace and link the runner creates:
	// pdj<pid>-<role>, for example pdj4242-n1 (the namespace of node n1)
	// or pdj4242-n1a (its veth); at most 15 characters for links.
	namePrefix = "pdj"
	// routeProto marks the runner's blackhole routes (ip route ... proto
	// 213); their metric is the owning runner's pid.
	routeProto = "213"
	// hostOctet is the last octet of the root-side veth's address.
	hostOctet = 126
	// nodePortRaft and nodePortHTTP are every agent's ports on its own
	// address.
	nodePortRaft = 7000
	nodePortHTTP = 8080
)

// executor runs a command (ip, nft) with stdin and returns its standard
// output; a failure's error includes the standard error. Tests replace it
// with a recorder that models the kernel's state.
type executor interface {
	run(ctx context.Context, stdin, name string, args ...string) (string, error)
}

// osExecutor runs commands for real.
type osExecutor struct{}

func (osExecutor) run(ctx context.Context, stdin, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("netns: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// netnsMu makes namespace runs of one process sequential, so that names
// (which carry the pid) never collide and leftovers carrying this
// process's pid are always stale when a run starts.
var netnsMu sync.Mutex

// Env is the network of one namespace-mode run: one namespace per
// node and one for the bridge, veth pairs, and the root namespace's
// blackhole route and root-side veth.
type Env struct {
	ex     executor
	pid    int
	prefix string // pdj<pid>
	guard  netip.Prefix
	subnet netip.Prefix
	host   netip.Addr   // the root-side veth's address
	nodes  []netip.Addr // node i's address
	logf   func(string, ...any)

	mu      sync.Mutex
	cleaned bool
	locked  bool
}

// Names of the run's namespaces and links.
func (e *Env) nsBridge() string      { return e.prefix + "-br" }
func (e *Env) nsNode(i int) string   { return fmt.Sprintf("%s-n%d", e.prefix, i+1) }
func (e *Env) linkHost() string      { return e.prefix + "-h" }
func (e *Env) linkHostPeer() string  { return e.prefix + "-hb" }
func (e *Env) linkNode(i int) string { return fmt.Sprintf("%s-n%da", e.prefix, i+1) }
func (e *Env) linkNodePeer(i int) string {
	return fmt.Sprintf("%s-n%db", e.prefix, i+1)
}

// owns reports whether a namespace or link name belongs to this run.
func (e *Env) owns(name string) bool { return strings.HasPrefix(name, e.prefix+"-") }

// newNetnsEnv lays out a run's names (nothing is created).
func newNetnsEnv(ex executor, pid int, logf func(string, ...any)) *Env {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Env{ex: ex, pid: pid, prefix: fmt.Sprintf("%s%d", namePrefix, pid), logf: logf}
}

// ip runs ip(8) with args.
func (e *Env) ip(ctx context.Context, args ...string) (string, error) {
	return e.ex.run(ctx, "", "ip", args...)
}

// routeEntry is one route of `ip -j route show`.
type routeEntry struct {
	Type   string `json:"type"`
	Dst    string `json:"dst"`
	Metric int    `json:"metric"`
}

// routes lists the root namespace's main routing table (proto: only the
// routes with that protocol, "" for all).
func (e *Env) routes(ctx context.Context, proto string) ([]routeEntry, error) {
	args := []string{"-j", "route", "show"}
	if proto != "" {
		args = append(args, "proto", proto)
	}
	out, err := e.ip(ctx, args...)
	if err != nil {
		return nil, err
	}
	var rs []routeEntry
	if strings.TrimSpace(out) == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		return nil, fmt.Errorf("netns: ip -j route show: %w", err)
	}
	return rs, nil
}

// namespaces lists the named network namespaces.
func (e *Env) namespaces(ctx context.Context) ([]string, error) {
	out, err := e.ip(ctx, "-j", "netns", "list")
	if err != nil {
		return nil, err
	}
	var ns []struct {
		Name string `json:"name"`
	}
	if strings.TrimSpace(out) == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(out), &ns); err != nil {
		return nil, fmt.Errorf("netns: ip -j netns list: %w", err)
	}
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.Name
	}
	return names, nil
}

// links lists the root namespace's links.
func (e *Env) links(ctx context.Context) ([]string, error) {
	out, err := e.ip(ctx, "-j", "link", "show")
	if err != nil {
		return nil, err
	}
	var ls []struct {
		Name string `json:"ifname"`
	}
	if strings.TrimSpace(out) == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		return nil, fmt.Errorf("netns: ip -j link show: %w", err)
	}
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return names, nil
}

// claimGuard picks a /24 of guardNet that no route of the main table
// overlaps, starting at a slot derived from the pid, and blackholes it
// (proto 213, metric pid). This is the first change a run makes.
func (e *Env) claimGuard(ctx context.Context) error {
	rs, err := e.routes(ctx, "")
	if err != nil {
		return err
	}
	var taken []netip.Prefix
	for _, r := range rs {
		if p, err := netip.ParsePrefix(r.Dst); err == nil {
			taken = append(taken, p)
		} else if a, err := netip.ParseAddr(r.Dst); err == nil {
			taken = append(taken, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	base := guardNet.Addr().As4()
	for k := range 250 {
		slot := 1 + (e.pid+k)%250
		guard := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], byte(slot), 0}), 24)
		free := true
		for _, p := range taken {
			if p.Overlaps(guard) {
				free = false
				break
			}
		}
		if !free {
			continue
		}
		if _, err := e.ip(ctx, "route", "add", "blackhole", guard.String(), "proto", routeProto, "metric", strconv.Itoa(e.pid)); err != nil {
			return fmt.Errorf("netns: installing the blackhole route for %v: %w", guard, err)
		}
		e.guard = guard
		g := guard.Addr().As4()
		e.subnet = netip.PrefixFrom(guard.Addr(), 25)
		e.host = netip.AddrFrom4([4]byte{g[0], g[1], g[2], hostOctet})
		return nil
	}
	return fmt.Errorf("netns: no free /24 in %v for the test network", guardNet)
}

// Setup builds a run's network for n nodes with ip(8) and nft(8); see
// setupNetns. The caller must call Cleanup on a non-nil Env.
func Setup(ctx context.Context, n int, logf func(string, ...any)) (*Env, error) {
	return setupNetns(ctx, osExecutor{}, n, logf)
}

// setupNetns builds a run's network for n nodes: it sweeps leftovers of
// earlier runs, blackholes the run's /24, then creates the bridge's
// namespace, the root-side veth (checking that with it down the nodes'
// addresses are blackholed, and with it up reached through it), and each
// node's namespace with its veth on the bridge and an empty ruleset. On
// failure everything created is removed. The caller must call Cleanup.
func setupNetns(ctx context.Context, ex executor, n int, logf func(string, ...any)) (*Env, error) {
	netnsMu.Lock()
	e := newNetnsEnv(ex, os.Getpid(), logf)
	e.locked = true
	if err := e.build(ctx, n); err != nil {
		if cerr := e.Cleanup(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return e, nil
}

// build does setupNetns's work; see there.
func (e *Env) build(ctx context.Context, n int) error {
	if n < 1 || n > hostOctet-2 {
		return fmt.Errorf("netns: %d nodes; allowed: 1 to %d", n, hostOctet-2)
	}
	if err := e.sweepStale(ctx); err != nil {
		return err
	}
	// The safety rule: the blackhole comes before any namespace.
	if err := e.claimGuard(ctx); err != nil {
		return err
	}
	g := e.guard.Addr().As4()
	for i := range n {
		e.nodes = append(e.nodes, netip.AddrFrom4([4]byte{g[0], g[1], g[2], byte(i + 1)}))
	}
	bits := strconv.Itoa(e.subnet.Bits())
	br := e.nsBridge()
	steps := [][]string{
		{"netns", "add", br},
		{"-n", br, "link", "set", "lo", "up"},
		{"-n", br, "link", "add", "br0", "type", "bridge"},
		{"-n", br, "link", "set", "br0", "up"},
		{"link", "add", e.linkHost(), "type", "veth", "peer", "name", e.linkHostPeer()},
		{"link", "set", e.linkHostPeer(), "netns", br},
		{"-n", br, "link", "set", e.linkHostPeer(), "master", "br0"},
		{"-n", br, "link", "set", e.linkHostPeer(), "up"},
		{"addr", "add", e.host.String() + "/" + bits, "dev", e.linkHost()},
	}
	for i, addr := range e.nodes {
		ns, a, b := e.nsNode(i), e.linkNode(i), e.linkNodePeer(i)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"link", "add", a, "type", "veth", "peer", "name", b},
			[]string{"link", "set", a, "netns", ns},
			[]string{"link", "set", b, "netns", br},
			[]string{"-n", br, "link", "set", b, "master", "br0"},
			[]string{"-n", br, "link", "set", b, "up"},
			[]string{"-n", ns, "addr", "add", addr.String() + "/" + bits, "dev", a},
			[]string{"-n", ns, "link", "set", a, "up"},
		)
	}
	for _, s := range steps {
		if _, err := e.ip(ctx, s...); err != nil {
			return err
		}
	}
	for i := range e.nodes {
		if err := e.applyKernel(ctx, i, kernelFaults{}); err != nil {
			return err
		}
	}
	// With the root-side veth still down, the nodes must be blackholed.
	if out, err := e.ip(ctx, "route", "get", e.nodes[0].String()); err == nil {
		return fmt.Errorf("netns: safety check: with %s down, %v is routed (%s), not blackholed", e.linkHost(), e.nodes[0], strings.TrimSpace(out))
	}
	if _, err := e.ip(ctx, "link", "set", e.linkHost(), "up"); err != nil {
		return err
	}
	for _, a := range e.nodes {
		out, err := e.ip(ctx, "route", "get", a.String())
		if err != nil {
			return fmt.Errorf("netns: safety check: route to %v: %w", a, err)
		}
		if !strings.Contains(out, " dev "+e.linkHost()+" ") {
			return fmt.Errorf("netns: safety check: %v is not routed through %s: %s", a, e.linkHost(), strings.TrimSpace(out))
		}
	}
	e.logf("namespaces: %d nodes in %s-n*, %v, bridge in %s, runner at %v on %s, %v blackholed", n, e.prefix, e.subnet, br, e.host, e.linkHost(), e.guard)
	return nil
}

// applyKernel replaces node i's packet filters.
func (e *Env) applyKernel(ctx context.Context, i int, kf kernelFaults) error {
	script, err := nftRuleset(kf)
	if err != nil {
		return err
	}
	if _, err := e.ex.run(ctx, script, "ip", "netns", "exec", e.nsNode(i), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("netns: packet filters of node %d: %w", i+1, err)
	}
	return nil
}

// Faults is the part of a node's fault state the namespace mode puts into
// packet filters: the raft addresses (HOST:PORT, as the fallback mode
// pushes them to permitd's fault layer) the node exchanges nothing with
// (Block) or may not dial (BlockDial), and the probability that a packet
// it sends to another node is lost (Loss, 0 to 1).
type Faults struct {
	Block     []string
	BlockDial []string
	Loss      float64
}

// Apply replaces node i's packet filters with f's partitions and loss.
// Delay and jitter are not kernel faults: permitd's fault layer keeps
// them (package cluster sends them there).
func (e *Env) Apply(ctx context.Context, i int, f Faults) error {
	var peers []netip.Addr
	for j, a := range e.nodes {
		if j != i {
			peers = append(peers, a)
		}
	}
	kf, err := kernelFaultsOf(f, peers)
	if err != nil {
		return err
	}
	return e.applyKernel(ctx, i, kf)
}

// Command returns the command line that runs bin with args in node i's
// namespace. ip netns exec execs bin, so the pid started is the agent's.
func (e *Env) Command(i int, bin string, args []string) (string, []string) {
	return "ip", append([]string{"netns", "exec", e.nsNode(i), bin}, args...)
}

// NodeAddrs returns node i's raft and HTTP addresses: the subnet's .i+1,
// on fixed ports (every node has its own address).
func (e *Env) NodeAddrs(i int) (raft, http string) {
	return netip.AddrPortFrom(e.nodes[i], nodePortRaft).String(), netip.AddrPortFrom(e.nodes[i], nodePortHTTP).String()
}

// Describe says how the run's network is laid out (for the report).
func (e *Env) Describe() string {
	return fmt.Sprintf("namespaces: every agent in its own network namespace (%s-n1 ... at %v .1, .2, ...), veth pairs to a bridge in namespace %s; "+
		"the runner reaches them through the root-side veth %s (%v); %v is blackholed in the root namespace; "+
		"partitions and loss are nftables rules in the node namespaces (table inet %s); delay and jitter by permitd's fault layer; clocks by the clock hook; kill/pause by signals",
		e.prefix, e.subnet, e.nsBridge(), e.linkHost(), e.host, e.guard, nftTable)
}
