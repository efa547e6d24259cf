package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
		return out.String(), fmt.Errorf("runner: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// netnsMu makes namespace runs of one process sequential, so that names
// (which carry the pid) never collide and leftovers carrying this
// process's pid are always stale when a run starts.
var netnsMu sync.Mutex

// netnsEnv is the network of one namespace-mode run: one namespace per
// node and one for the bridge, veth pairs, and the root namespace's
// blackhole route and root-side veth.
type netnsEnv struct {
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
func (e *netnsEnv) nsBridge() string      { return e.prefix + "-br" }
func (e *netnsEnv) nsNode(i int) string   { return fmt.Sprintf("%s-n%d", e.prefix, i+1) }
func (e *netnsEnv) linkHost() string      { return e.prefix + "-h" }
func (e *netnsEnv) linkHostPeer() string  { return e.prefix + "-hb" }
func (e *netnsEnv) linkNode(i int) string { return fmt.Sprintf("%s-n%da", e.prefix, i+1) }
func (e *netnsEnv) linkNodePeer(i int) string {
	return fmt.Sprintf("%s-n%db", e.prefix, i+1)
}

// owns reports whether a namespace or link name belongs to this run.
func (e *netnsEnv) owns(name string) bool { return strings.HasPrefix(name, e.prefix+"-") }

// ownerPid returns the pid in a pdj<pid>-... name, or 0.
func ownerPid(name string) int {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// pidAlive reports whether a process with pid exists.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// staleOwner reports whether a leftover owned by pid belongs to no
// running run: its runner is gone, or it is this process (whose runs are
// sequential, see netnsMu).
func staleOwner(pid int) bool {
	return pid > 0 && (pid == os.Getpid() || !pidAlive(pid))
}

// newNetnsEnv lays out a run's names (nothing is created).
func newNetnsEnv(ex executor, pid int, logf func(string, ...any)) *netnsEnv {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &netnsEnv{ex: ex, pid: pid, prefix: fmt.Sprintf("%s%d", namePrefix, pid), logf: logf}
}

// ip runs ip(8) with args.
func (e *netnsEnv) ip(ctx context.Context, args ...string) (string, error) {
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
func (e *netnsEnv) routes(ctx context.Context, proto string) ([]routeEntry, error) {
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
		return nil, fmt.Errorf("runner: ip -j route show: %w", err)
	}
	return rs, nil
}

// namespaces lists the named network namespaces.
func (e *netnsEnv) namespaces(ctx context.Context) ([]string, error) {
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
		return nil, fmt.Errorf("runner: ip -j netns list: %w", err)
	}
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.Name
	}
	return names, nil
}

// links lists the root namespace's links.
func (e *netnsEnv) links(ctx context.Context) ([]string, error) {
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
		return nil, fmt.Errorf("runner: ip -j link show: %w", err)
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
func (e *netnsEnv) claimGuard(ctx context.Context) error {
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
			return fmt.Errorf("runner: installing the blackhole route for %v: %w", guard, err)
		}
		e.guard = guard
		g := guard.Addr().As4()
		e.subnet = netip.PrefixFrom(guard.Addr(), 25)
		e.host = netip.AddrFrom4([4]byte{g[0], g[1], g[2], hostOctet})
		return nil
	}
	return fmt.Errorf("runner: no free /24 in %v for the test network", guardNet)
}

// probeNamespaces shows that the namespace mode can run here: under the
// run's blackhole route it creates a throwaway namespace (loopback only),
// loads a ruleset using every nft feature the mode needs into it, and
// removes everything again.
func probeNamespaces(ctx context.Context, ex executor) error {
	netnsMu.Lock()
	e := newNetnsEnv(ex, os.Getpid(), nil)
	e.locked = true
	defer e.cleanup(context.WithoutCancel(ctx))
	if err := e.sweepStale(ctx); err != nil {
		return err
	}
	if err := e.claimGuard(ctx); err != nil {
		return err
	}
	ns := e.prefix + "-probe"
	if _, err := e.ip(ctx, "netns", "add", ns); err != nil {
		return err
	}
	if _, err := e.ip(ctx, "-n", ns, "link", "set", "lo", "up"); err != nil {
		return err
	}
	peer := netip.AddrFrom4([4]byte{10, 213, 0, 2})
	script, err := nftRuleset(kernelFaults{Block: []netip.Addr{peer}, BlockDial: []netip.Addr{peer}, Peers: []netip.Addr{peer}, LossPermille: 10})
	if err != nil {
		return err
	}
	if _, err := ex.run(ctx, script, "ip", "netns", "exec", ns, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("runner: nftables in a namespace: %w", err)
	}
	return e.cleanup(context.WithoutCancel(ctx))
}

// setupNetns builds a run's network for n nodes: it sweeps leftovers of
// earlier runs, blackholes the run's /24, then creates the bridge's
// namespace, the root-side veth (checking that with it down the nodes'
// addresses are blackholed, and with it up reached through it), and each
// node's namespace with its veth on the bridge and an empty ruleset. On
// failure everything created is removed. The caller must call cleanup.
func setupNetns(ctx context.Context, ex executor, n int, logf func(string, ...any)) (*netnsEnv, error) {
	netnsMu.Lock()
	e := newNetnsEnv(ex, os.Getpid(), logf)
	e.locked = true
	if err := e.build(ctx, n); err != nil {
		if cerr := e.cleanup(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return e, nil
}

// build does setupNetns's work; see there.
func (e *netnsEnv) build(ctx context.Context, n int) error {
	if n < 1 || n > hostOctet-2 {
		return fmt.Errorf("runner: %d nodes; allowed: 1 to %d", n, hostOctet-2)
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
		return fmt.Errorf("runner: safety check: with %s down, %v is routed (%s), not blackholed", e.linkHost(), e.nodes[0], strings.TrimSpace(out))
	}
	if _, err := e.ip(ctx, "link", "set", e.linkHost(), "up"); err != nil {
		return err
	}
	for _, a := range e.nodes {
		out, err := e.ip(ctx, "route", "get", a.String())
		if err != nil {
			return fmt.Errorf("runner: safety check: route to %v: %w", a, err)
		}
		if !strings.Contains(out, " dev "+e.linkHost()+" ") {
			return fmt.Errorf("runner: safety check: %v is not routed through %s: %s", a, e.linkHost(), strings.TrimSpace(out))
		}
	}
	e.logf("namespaces: %d nodes in %s-n*, %v, bridge in %s, runner at %v on %s, %v blackholed", n, e.prefix, e.subnet, br, e.host, e.linkHost(), e.guard)
	return nil
}

// applyKernel replaces node i's packet filters.
func (e *netnsEnv) applyKernel(ctx context.Context, i int, kf kernelFaults) error {
	script, err := nftRuleset(kf)
	if err != nil {
		return err
	}
	if _, err := e.ex.run(ctx, script, "ip", "netns", "exec", e.nsNode(i), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("runner: packet filters of node %d: %w", i+1, err)
	}
	return nil
}

// applyFaults puts a fault state's partitions and loss into node i's
// packet filters and returns what is left for permitd's fault layer
// (delay and jitter).
func (e *netnsEnv) applyFaults(ctx context.Context, i int, fs faultState) (faultState, error) {
	var peers []netip.Addr
	for j, a := range e.nodes {
		if j != i {
			peers = append(peers, a)
		}
	}
	kf, err := kernelFaultsOf(fs, peers)
	if err != nil {
		return fs, err
	}
	if err := e.applyKernel(ctx, i, kf); err != nil {
		return fs, err
	}
	return faultState{Block: []string{}, BlockDial: []string{}, Delay: fs.Delay, Jitter: fs.Jitter}, nil
}

// command returns the command line that runs bin with args in node i's
// namespace. ip netns exec execs bin, so the pid started is the agent's.
func (e *netnsEnv) command(i int, bin string, args []string) (string, []string) {
	return "ip", append([]string{"netns", "exec", e.nsNode(i), bin}, args...)
}

// adopt moves a laid-out cluster onto the run's network: node i listens
// on the subnet's .i+1 and runs in its namespace.
func (e *netnsEnv) adopt(c *cluster) {
	var initial []string
	for i, n := range c.nodes {
		n.RaftAddr = netip.AddrPortFrom(e.nodes[i], nodePortRaft).String()
		n.HTTPAddr = netip.AddrPortFrom(e.nodes[i], nodePortHTTP).String()
		initial = append(initial, n.ID+"="+n.RaftAddr)
	}
	c.initial = strings.Join(initial, ",")
	c.wrap = func(node *agentNode, bin string, args []string) (string, []string) {
		return e.command(node.Index, bin, args)
	}
}

// describe says how the run's network is laid out.
func (e *netnsEnv) describe() string {
	return fmt.Sprintf("namespaces: every agent in its own network namespace (%s-n1 ... at %v .1, .2, ...), veth pairs to a bridge in namespace %s; "+
		"the runner reaches them through the root-side veth %s (%v); %v is blackholed in the root namespace; "+
		"partitions and loss are nftables rules in the node namespaces (table inet %s); delay and jitter by permitd's fault layer; clocks by the clock hook; kill/pause by signals",
		e.prefix, e.subnet, e.nsBridge(), e.linkHost(), e.host, e.guard, nftTable)
}

// cleanup removes everything the run created, in order: the processes in
// its namespaces (SIGKILL by pid), the namespaces (their links and packet
// filters go with them), its links in the root namespace, and last its
// blackhole route. It looks at what exists, not at what it remembers, so
// it also removes the remains of a half-done setup, and calling it again
// changes nothing.
func (e *netnsEnv) cleanup(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := removeOwned(ctx, e, e.owns, func(pid int) bool { return pid == e.pid })
	if !e.cleaned {
		e.cleaned = true
		if e.locked {
			netnsMu.Unlock()
		}
	}
	return err
}

// sweepStale removes the leftovers of earlier runs whose runner is gone
// (namespaces, links and blackhole routes named or marked with a pid).
func (e *netnsEnv) sweepStale(ctx context.Context) error {
	return removeOwned(ctx, e,
		func(name string) bool { return staleOwner(ownerPid(name)) },
		staleOwner)
}

// removeOwned removes the namespaces and root links whose names ownName
// accepts and the blackhole routes (proto 213, inside guardNet) whose
// metric ownPid accepts.
func removeOwned(ctx context.Context, e *netnsEnv, ownName func(string) bool, ownPid func(int) bool) error {
	var errs []error
	nss, err := e.namespaces(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	var mine []string
	for _, ns := range nss {
		if ownName(ns) {
			mine = append(mine, ns)
		}
	}
	for _, ns := range mine {
		if err := e.killIn(ctx, ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range mine {
		if _, err := e.ip(ctx, "netns", "del", ns); err != nil {
			errs = append(errs, err)
		} else {
			e.logf("cleanup: deleted namespace %s", ns)
		}
	}
	links, err := e.links(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range links {
		if !ownName(l) {
			continue
		}
		if _, err := e.ip(ctx, "link", "del", l); err != nil {
			// Deleting one end of a veth pair deletes the other: an end
			// already gone is not an error.
			if now, lerr := e.links(ctx); lerr != nil || slices.Contains(now, l) {
				errs = append(errs, err)
			}
		}
	}
	// The blackhole goes last, once nothing of the run is left.
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	rs, err := e.routes(ctx, routeProto)
	if err != nil {
		return err
	}
	for _, r := range rs {
		p, perr := netip.ParsePrefix(r.Dst)
		if r.Type != "blackhole" || perr != nil || !guardNet.Contains(p.Addr()) || !ownPid(r.Metric) {
			continue
		}
		if _, err := e.ip(ctx, "route", "del", "blackhole", r.Dst, "proto", routeProto, "metric", strconv.Itoa(r.Metric)); err != nil {
			errs = append(errs, err)
		} else {
			e.logf("cleanup: deleted blackhole route %s", r.Dst)
		}
	}
	return errors.Join(errs...)
}

// killIn sends SIGKILL to every process in namespace ns and waits (up to
// 10 s) until none is left.
func (e *netnsEnv) killIn(ctx context.Context, ns string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := e.ip(ctx, "netns", "pids", ns)
		if err != nil {
			return err
		}
		var pids []int
		for _, p := range strings.Fields(out) {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("runner: processes %v still in namespace %s 10s after SIGKILL", pids, ns)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			e.logf("cleanup: SIGKILL pid %d in %s", pid, ns)
		}
		_ = sleepCtx(context.WithoutCancel(ctx), 50*time.Millisecond)
	}
}

// fallbackDetail describes the fallback mode.
const fallbackDetail = "fallback: agents on loopback; partitions, loss and delay by permitd's fault layer (faultnet.TCPFaults behind --test-hooks); clocks by the clock hook; kill/pause by signals"

// chooseMode settles the run's mode (cfg.Mode, DetectNamespaces) and, for
// the namespace mode, builds the network; it fills in sum's Mode,
// ModeDetail and Namespaces. In auto mode a failed setup falls back (and
// says why); with --mode namespaces it is an error. A non-nil env must be
// cleaned up by the caller.
func (r *run) chooseMode(ctx context.Context, sum *Summary) (*netnsEnv, error) {
	sum.Namespaces = DetectNamespaces()
	sum.Mode, sum.ModeDetail = ModeFallback, fallbackDetail
	switch {
	case r.cfg.Mode == ModeFallback:
		sum.ModeDetail += ". Chosen by --mode fallback (namespaces: " + sum.Namespaces.Reason + ")"
		return nil, nil
	case !sum.Namespaces.Available && r.cfg.Mode == ModeNamespaces:
		sum.Mode, sum.ModeDetail = ModeNamespaces, "namespaces requested but unavailable: "+sum.Namespaces.Reason
		return nil, fmt.Errorf("runner: --mode namespaces: unavailable here: %s", sum.Namespaces.Reason)
	case !sum.Namespaces.Available:
		sum.ModeDetail += ". Network namespaces unavailable: " + sum.Namespaces.Reason
		return nil, nil
	}
	env, err := setupNetns(ctx, osExecutor{}, r.cfg.Nodes, r.logf)
	if err != nil {
		if r.cfg.Mode == ModeNamespaces {
			sum.Mode, sum.ModeDetail = ModeNamespaces, "namespaces: setup failed: "+err.Error()
			return nil, err
		}
		sum.ModeDetail += ". The namespace setup failed, so the run fell back: " + err.Error()
		r.logf("namespace setup failed, falling back: %v", err)
		return nil, nil
	}
	sum.Mode, sum.ModeDetail = ModeNamespaces, env.describe()
	return env, nil
}
