package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// TestNftRuleset pins the packet filters each partition description
// becomes: an atomic replace of table inet jepsen, drops both ways for
// blocks, original-direction drops for one-way blocks, random drops to
// peers for loss, nothing that could match a client.
func TestNftRuleset(t *testing.T) {
	header := "table inet jepsen\ndelete table inet jepsen\ntable inet jepsen {\n"
	chains := func(in, out string) string {
		return header +
			"\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n" + in + "\t}\n" +
			"\tchain output {\n\t\ttype filter hook output priority 0; policy accept;\n" + out + "\t}\n}\n"
	}
	tests := []struct {
		name string
		kf   kernelFaults
		want string
	}{
		{"no faults: empty chains", kernelFaults{Peers: addrs("10.213.1.2")}, chains("", "")},
		{"block both ways, sorted, no repeats", kernelFaults{Block: addrs("10.213.1.3", "10.213.1.2", "10.213.1.3")},
			chains("\t\tip saddr { 10.213.1.2, 10.213.1.3 } drop\n", "\t\tip daddr { 10.213.1.2, 10.213.1.3 } drop\n")},
		{"one-way: no dialing out", kernelFaults{BlockDial: addrs("10.213.1.2")},
			chains("", "\t\tip daddr { 10.213.1.2 } ct direction original drop\n")},
		{"loss to peers only", kernelFaults{Peers: addrs("10.213.1.3", "10.213.1.2"), LossPermille: 70},
			chains("", "\t\tip daddr { 10.213.1.2, 10.213.1.3 } numgen random mod 1000 < 70 drop\n")},
		{"loss without peers: nothing", kernelFaults{LossPermille: 70}, chains("", "")},
		{"all at once", kernelFaults{Block: addrs("10.213.1.2"), BlockDial: addrs("10.213.1.3"), Peers: addrs("10.213.1.2", "10.213.1.3"), LossPermille: 1000},
			chains("\t\tip saddr { 10.213.1.2 } drop\n",
				"\t\tip daddr { 10.213.1.2 } drop\n\t\tip daddr { 10.213.1.3 } ct direction original drop\n\t\tip daddr { 10.213.1.2, 10.213.1.3 } numgen random mod 1000 < 1000 drop\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nftRuleset(tt.kf)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			if strings.Contains(got, ".126") {
				t.Errorf("ruleset mentions the runner's address:\n%s", got)
			}
		})
	}
	for _, bad := range []kernelFaults{
		{LossPermille: -1}, {LossPermille: 1001},
		{Block: addrs("fd00::1")}, {BlockDial: addrs("fd00::1")}, {Peers: addrs("fd00::1"), LossPermille: 1},
	} {
		if got, err := nftRuleset(bad); err == nil {
			t.Errorf("nftRuleset(%+v) = %q, want an error", bad, got)
		}
	}
}

// TestKernelFaultsOf checks the translation of the fallback mode's fault
// state (raft addresses, loss per write) into packet filters.
func TestKernelFaultsOf(t *testing.T) {
	peers := addrs("10.213.1.2", "10.213.1.3")
	kf, err := kernelFaultsOf(Faults{Block: []string{"10.213.1.2:7000"}, BlockDial: []string{"10.213.1.3:7000"}, Loss: 0.07}, peers)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kf.Block, addrs("10.213.1.2")) || !slices.Equal(kf.BlockDial, addrs("10.213.1.3")) || kf.LossPermille != 70 || !slices.Equal(kf.Peers, peers) {
		t.Errorf("got %+v", kf)
	}
	for _, bad := range []Faults{
		{Block: []string{"10.213.1.2"}}, {BlockDial: []string{"host:7000"}}, {Loss: 1.5}, {Loss: -0.1},
	} {
		if _, err := kernelFaultsOf(bad, peers); err == nil {
			t.Errorf("kernelFaultsOf(%+v): no error", bad)
		}
	}
}

// fakeKernel is an executor modelling the parts of the kernel's state the
// namespace mode touches: named namespaces, veth pairs (where each end
// is), which links are up, and the root namespace's routes. It records
// every command and checks the safety rule as it goes.
type fakeKernel struct {
	mu         sync.Mutex
	cmds       []string
	namespaces map[string]bool
	where      map[string]string // link → namespace ("" = root)
	peer       map[string]string
	up         map[string]bool
	routes     []routeEntry // blackholes
	addrs      map[string]netip.Prefix
	violations []string
	failAt     int  // fail the n-th changing command (1-based; 0: never)
	leak       bool // route get finds a way out even without the veth
	changes    int
}

func newFakeKernel() *fakeKernel {
	return &fakeKernel{namespaces: map[string]bool{}, where: map[string]string{}, peer: map[string]string{}, up: map[string]bool{}, addrs: map[string]netip.Prefix{}}
}

func (k *fakeKernel) guarded() bool {
	for _, r := range k.routes {
		if r.Type == "blackhole" && r.Metric == os.Getpid() {
			return true
		}
	}
	return false
}

func (k *fakeKernel) delLink(l string) {
	p := k.peer[l]
	for _, x := range []string{l, p} {
		delete(k.where, x)
		delete(k.peer, x)
		delete(k.up, x)
		delete(k.addrs, x)
	}
}

func (k *fakeKernel) run(ctx context.Context, stdin, name string, args ...string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	line := name + " " + strings.Join(args, " ")
	k.cmds = append(k.cmds, line)
	if name != "ip" {
		return "", fmt.Errorf("fake: unexpected command %q", line)
	}
	a := args
	listing := a[0] == "-j" || (len(a) > 1 && (a[1] == "pids" || a[1] == "get"))
	if !listing {
		k.changes++
		if k.failAt > 0 && k.changes == k.failAt {
			return "", fmt.Errorf("fake: injected failure of %q", line)
		}
	}
	ns := ""
	if a[0] == "-n" {
		ns, a = a[1], a[2:]
		if !k.namespaces[ns] {
			return "", fmt.Errorf("fake: no namespace %s", ns)
		}
	}
	j := func(v any) (string, error) { b, err := json.Marshal(v); return string(b), err }
	switch {
	case a[0] == "-j" && a[1] == "netns":
		var out []map[string]string
		for n := range k.namespaces {
			out = append(out, map[string]string{"name": n})
		}
		if len(out) == 0 {
			return "", nil
		}
		return j(out)
	case a[0] == "-j" && a[1] == "link":
		out := []map[string]string{{"ifname": "lo"}, {"ifname": "eth0"}}
		for l, w := range k.where {
			if w == "" {
				out = append(out, map[string]string{"ifname": l})
			}
		}
		return j(out)
	case a[0] == "-j" && a[1] == "route":
		out := []routeEntry{{Dst: "default"}, {Dst: "192.0.2.0/24"}, {Dst: "10.213.0.0/24"}} // slot 0 taken
		if len(a) > 3 && a[3] == "proto" {
			out = nil
		}
		return j(append(out, k.routes...))
	case a[0] == "route" && a[1] == "add":
		m, _ := strconv.Atoi(a[7])
		k.routes = append(k.routes, routeEntry{Type: "blackhole", Dst: a[3], Metric: m})
		return "", nil
	case a[0] == "route" && a[1] == "del":
		if len(k.namespaces) > 0 {
			for n := range k.namespaces {
				if strings.HasPrefix(n, fmt.Sprintf("pdj%d-", os.Getpid())) {
					k.violations = append(k.violations, "blackhole removed while namespace "+n+" exists")
				}
			}
		}
		m, _ := strconv.Atoi(a[7])
		i := slices.Index(k.routes, routeEntry{Type: "blackhole", Dst: a[3], Metric: m})
		if i < 0 {
			return "", fmt.Errorf("fake: no such route %q", line)
		}
		k.routes = slices.Delete(k.routes, i, i+1)
		return "", nil
	case a[0] == "route" && a[1] == "get":
		dst := netip.MustParseAddr(a[2])
		for l, p := range k.addrs {
			if k.where[l] == "" && k.up[l] && p.Masked().Contains(dst) {
				return fmt.Sprintf("%s dev %s src %s uid 0 \n", dst, l, p.Addr()), nil
			}
		}
		if k.leak {
			return dst.String() + " via 192.0.2.1 dev eth0 src 192.0.2.2\n", nil
		}
		for _, r := range k.routes {
			if netip.MustParsePrefix(r.Dst).Contains(dst) {
				return "", errors.New("RTNETLINK answers: Invalid argument")
			}
		}
		return dst.String() + " via 192.0.2.1 dev eth0 src 192.0.2.2\n", nil
	case a[0] == "netns" && a[1] == "add":
		if !k.guarded() {
			k.violations = append(k.violations, "namespace "+a[2]+" created without a blackhole route")
		}
		if k.namespaces[a[2]] {
			return "", fmt.Errorf("fake: namespace %s exists", a[2])
		}
		k.namespaces[a[2]] = true
		return "", nil
	case a[0] == "netns" && a[1] == "del":
		if !k.namespaces[a[2]] {
			return "", fmt.Errorf("fake: no namespace %s", a[2])
		}
		delete(k.namespaces, a[2])
		for l, w := range k.where {
			if w == a[2] {
				k.delLink(l)
			}
		}
		return "", nil
	case a[0] == "netns" && a[1] == "pids":
		return "", nil
	case a[0] == "netns" && a[1] == "exec":
		if !k.namespaces[a[2]] {
			return "", fmt.Errorf("fake: no namespace %s", a[2])
		}
		return "", nil
	case a[0] == "link" && a[1] == "add" && a[3] == "type" && a[4] == "veth":
		if ns != "" {
			return "", fmt.Errorf("fake: veth created in %s", ns)
		}
		x, y := a[2], a[7]
		if _, ok := k.where[x]; ok {
			return "", fmt.Errorf("fake: link %s exists", x)
		}
		k.where[x], k.where[y] = "", ""
		k.peer[x], k.peer[y] = y, x
		return "", nil
	case a[0] == "link" && a[1] == "set" && len(a) == 5 && a[3] == "netns":
		if _, ok := k.where[a[2]]; !ok || !k.namespaces[a[4]] {
			return "", fmt.Errorf("fake: %q", line)
		}
		k.where[a[2]] = a[4]
		return "", nil
	case a[0] == "link" && a[1] == "set" && a[3] == "up":
		if ns == "" {
			if w, ok := k.where[a[2]]; !ok || w != "" {
				return "", fmt.Errorf("fake: no link %s in the root namespace", a[2])
			}
		}
		k.up[a[2]] = true
		return "", nil
	case a[0] == "link" && a[1] == "del":
		if _, ok := k.where[a[2]]; !ok {
			return "", fmt.Errorf("fake: no link %s", a[2])
		}
		k.delLink(a[2])
		return "", nil
	case a[0] == "addr" && a[1] == "add":
		k.addrs[a[4]] = netip.MustParsePrefix(a[2])
		return "", nil
	}
	return "", nil // bridge creation, master, lo: nothing to model
}

// ours returns what of the current process is left in the fake kernel.
func (k *fakeKernel) ours() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := fmt.Sprintf("pdj%d-", os.Getpid())
	var left []string
	for n := range k.namespaces {
		if strings.HasPrefix(n, p) {
			left = append(left, "netns "+n)
		}
	}
	for l := range k.where {
		if strings.HasPrefix(l, p) {
			left = append(left, "link "+l)
		}
	}
	for _, r := range k.routes {
		if r.Metric == os.Getpid() {
			left = append(left, "route "+r.Dst)
		}
	}
	return left
}

func firstIndex(cmds []string, prefix string) int {
	return slices.IndexFunc(cmds, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

// TestNetnsBlackholeFirst checks the safety rule on the command sequence
// of the probe and of a setup: the blackhole route is installed before
// the first namespace is created, every namespace is created while it
// exists, it is removed only after every namespace is gone, and the
// root-side veth is brought up only after the nodes were seen blackholed.
func TestNetnsBlackholeFirst(t *testing.T) {
	ctx := context.Background()
	k := newFakeKernel()
	if err := probe(ctx, k); err != nil {
		t.Fatalf("probe: %v", err)
	}
	e, err := setupNetns(ctx, k, 5, t.Logf)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	defer e.Cleanup(ctx)
	k.mu.Lock()
	cmds := slices.Clone(k.cmds)
	k.mu.Unlock()
	route, ns := firstIndex(cmds, "ip route add blackhole"), firstIndex(cmds, "ip netns add")
	if route < 0 || ns < 0 || route > ns {
		t.Fatalf("blackhole at command %d, first namespace at %d:\n%s", route, ns, strings.Join(cmds, "\n"))
	}
	hostUp := firstIndex(cmds, "ip link set "+e.linkHost()+" up")
	checked := slices.IndexFunc(cmds[:max(hostUp, 0)], func(c string) bool { return strings.HasPrefix(c, "ip route get") })
	if hostUp < 0 || checked < 0 {
		t.Errorf("root-side veth up at %d, blackhole checked at %d", hostUp, checked)
	}
	if err := e.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if len(k.violations) > 0 {
		t.Errorf("safety violations: %v", k.violations)
	}
	if e.guard.Bits() != 24 || e.subnet.Bits() != 25 || !e.guard.Contains(e.host) || !e.subnet.Contains(e.host) || e.guard.Addr() == netip.MustParseAddr("10.213.0.0") {
		t.Errorf("guard %v, subnet %v, host %v", e.guard, e.subnet, e.host)
	}
	for _, name := range []string{e.linkHost(), e.linkHostPeer(), e.linkNode(4), e.linkNodePeer(4)} {
		if len(name) > 15 {
			t.Errorf("link name %q longer than 15 characters", name)
		}
	}
}

// TestNetnsSafetyCheck: when the nodes' addresses are routed somewhere
// while the root-side veth is down, setup refuses and removes everything.
func TestNetnsSafetyCheck(t *testing.T) {
	k := newFakeKernel()
	k.leak = true
	if _, err := setupNetns(context.Background(), k, 3, t.Logf); err == nil || !strings.Contains(err.Error(), "not blackholed") {
		t.Fatalf("setup with a leaking route: %v, want a safety check error", err)
	}
	if left := k.ours(); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestNetnsCleanupIdempotent: cleanup after a setup leaves nothing and a
// second cleanup changes nothing; a setup failing at any step removes
// what it had made (and releases the run lock); the sweep removes the
// leftovers of dead runners but not those of live ones.
func TestNetnsCleanupIdempotent(t *testing.T) {
	ctx := context.Background()
	k := newFakeKernel()
	e, err := setupNetns(ctx, k, 3, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if left := k.ours(); len(left) > 0 {
		t.Fatalf("after cleanup: %v", left)
	}
	before := k.changes
	if err := e.Cleanup(ctx); err != nil {
		t.Fatalf("second cleanup: %v", err)
	}
	if k.changes != before {
		t.Errorf("second cleanup made %d changes", k.changes-before)
	}
	total := k.changes // changes of one setup and its cleanup

	t.Run("failure at every step", func(t *testing.T) {
		failed := 0
		defer func() {
			if failed < total/2 {
				t.Errorf("only %d of %d injected failures hit the setup", failed, total)
			}
		}()
		for n := 1; n <= total; n++ {
			k := newFakeKernel()
			k.failAt = n
			e, err := setupNetns(ctx, k, 3, func(string, ...any) {})
			if err == nil {
				_ = e.Cleanup(ctx)
				continue // the failure hit the cleanup, not the setup
			}
			failed++
			if left := k.ours(); len(left) > 0 {
				t.Errorf("setup failing at change %d left %v", n, left)
			}
			if len(k.violations) > 0 {
				t.Errorf("setup failing at change %d: %v", n, k.violations)
			}
		}
	})

	t.Run("sweep", func(t *testing.T) {
		k := newFakeKernel()
		dead := 1 << 30 // above any pid_max
		stale := fmt.Sprintf("pdj%d-", dead)
		k.namespaces[stale+"n1"] = true
		k.namespaces["pdj1-n1"] = true // pid 1 is alive: not ours to remove
		k.where[stale+"h"], k.where[stale+"hb"] = "", ""
		k.peer[stale+"h"], k.peer[stale+"hb"] = stale+"hb", stale+"h"
		k.routes = append(k.routes, routeEntry{Type: "blackhole", Dst: "10.213.77.0/24", Metric: dead},
			routeEntry{Type: "blackhole", Dst: "10.213.78.0/24", Metric: 1})
		e, err := setupNetns(ctx, k, 3, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Cleanup(ctx)
		if _, kept := k.where[stale+"h"]; kept || k.namespaces[stale+"n1"] {
			t.Errorf("stale namespace or link kept")
		}
		if !k.namespaces["pdj1-n1"] {
			t.Errorf("a live runner's namespace was removed")
		}
		var dsts []string
		for _, r := range k.routes {
			dsts = append(dsts, r.Dst)
		}
		if slices.Contains(dsts, "10.213.77.0/24") || !slices.Contains(dsts, "10.213.78.0/24") {
			t.Errorf("routes after the sweep: %v", dsts)
		}
	})
}

// TestNetnsReal builds a real namespace network (root only, with ip and
// nft) and checks the routing the safety rule relies on: the nodes are
// reached through the root-side veth, blackholed with it down, and
// cleanup leaves no namespace, link or route behind.
func TestNetnsReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	ctx := context.Background()
	ex := osExecutor{}
	e, err := setupNetns(ctx, ex, 3, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Cleanup(ctx)
	out, err := e.ip(ctx, "route", "get", e.nodes[1].String())
	if err != nil || !strings.Contains(out, "dev "+e.linkHost()) {
		t.Errorf("route to %v: %q, %v; want dev %s", e.nodes[1], out, err, e.linkHost())
	}
	if _, err := e.ip(ctx, "link", "set", e.linkHost(), "down"); err != nil {
		t.Fatal(err)
	}
	if out, err := e.ip(ctx, "route", "get", e.nodes[1].String()); err == nil {
		t.Errorf("with %s down, %v is routed: %q", e.linkHost(), e.nodes[1], out)
	}
	if _, err := e.ip(ctx, "link", "set", e.linkHost(), "up"); err != nil {
		t.Fatal(err)
	}
	checkPartitions(t, e)
	if err := e.Apply(ctx, 0, Faults{Block: []string{e.nodes[1].String() + ":7000"}, Loss: 0.05}); err != nil {
		t.Fatal(err)
	}
	rules, err := ex.run(ctx, "", "ip", "netns", "exec", e.nsNode(0), "nft", "list", "table", "inet", nftTable)
	if err != nil || !strings.Contains(rules, "ip saddr "+e.nodes[1].String()+" drop") || !strings.Contains(rules, "numgen random mod 1000 < 50") {
		t.Errorf("node 1's rules: %v\n%s", err, rules)
	}
	if err := e.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, list := range [][]string{{"netns", "list"}, {"link", "show"}, {"route", "show"}} {
		out, err := e.ip(ctx, list...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, e.prefix+"-") || strings.Contains(out, e.guard.String()) {
			t.Errorf("ip %v after cleanup:\n%s", list, out)
		}
	}
}

// inNetns runs f on an OS thread moved into namespace ns (sockets f
// creates belong to ns), then moves the thread back. Should that fail,
// the thread stays locked to the goroutine and ends with it.
func inNetns(t *testing.T, ns string, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(home)
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		f()
		if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("moving the thread back: %w", err)
			return
		}
		runtime.UnlockOSThread()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("entering namespace %s: %v", ns, err)
	}
}

// listenIn listens on addr:port in node i's namespace until the test ends.
func listenIn(t *testing.T, e *Env, i, port int) string {
	t.Helper()
	addr := netip.AddrPortFrom(e.nodes[i], uint16(port)).String()
	var l net.Listener
	var err error
	inNetns(t, e.nsNode(i), func() { l, err = net.Listen("tcp", addr) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return addr
}

// dials reports whether a TCP connection to addr opens from node i's
// namespace (i < 0: from the root namespace, through the runner's veth).
func dials(t *testing.T, e *Env, i int, addr string) bool {
	t.Helper()
	var err error
	dial := func() {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, 500*time.Millisecond); err == nil {
			c.Close()
		}
	}
	if i < 0 {
		dial()
	} else {
		inNetns(t, e.nsNode(i), dial)
	}
	return err == nil
}

// checkPartitions shows that the packet filters cut exactly what they
// should: a block stops node 0 and node 1 reaching each other both ways
// while the runner still reaches both; a one-way block stops node 0
// dialing node 1 but not node 1 dialing node 0; healing restores all.
func checkPartitions(t *testing.T, e *Env) {
	ctx := context.Background()
	to0, to1, to2 := listenIn(t, e, 0, 9000), listenIn(t, e, 1, 9000), listenIn(t, e, 2, 9000)
	type path struct {
		from int
		to   string
		want bool
	}
	check := func(state string, paths []path) {
		t.Helper()
		for _, p := range paths {
			if got := dials(t, e, p.from, p.to); got != p.want {
				t.Errorf("%s: dial from node %d (-1: runner) to %s: connected %v, want %v", state, p.from, p.to, got, p.want)
			}
		}
	}
	set := func(i int, fs Faults) {
		t.Helper()
		if err := e.Apply(ctx, i, fs); err != nil {
			t.Fatal(err)
		}
	}
	check("no faults", []path{{-1, to0, true}, {-1, to1, true}, {0, to1, true}, {1, to0, true}, {0, to2, true}})
	b0 := []string{netip.AddrPortFrom(e.nodes[1], 1).String()}
	b1 := []string{netip.AddrPortFrom(e.nodes[0], 1).String()}
	set(0, Faults{Block: b0})
	set(1, Faults{Block: b1})
	check("0 and 1 blocked", []path{{-1, to0, true}, {-1, to1, true}, {0, to1, false}, {1, to0, false}, {0, to2, true}, {2, to1, true}})
	set(1, Faults{})
	check("0 blocks 1 alone", []path{{0, to1, false}, {1, to0, false}})
	set(0, Faults{BlockDial: b0})
	check("0 cannot dial 1", []path{{-1, to0, true}, {0, to1, false}, {1, to0, true}, {0, to2, true}})
	set(0, Faults{})
	check("healed", []path{{0, to1, true}, {1, to0, true}})
}
