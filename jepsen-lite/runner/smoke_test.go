package runner

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// permitdBin is the binary TestMain built for the cluster tests (empty
// under -short: those tests are skipped).
var permitdBin string

// TestMain builds permitd once for every cluster test. JEPSEN_PERMITD_BIN
// names a ready binary instead.
func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if testing.Short() {
			return m.Run()
		}
		if bin := os.Getenv("JEPSEN_PERMITD_BIN"); bin != "" {
			permitdBin = bin
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "jepsen-lite-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		wd, _ := os.Getwd()
		root, err := FindModuleRoot(wd)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		bin := filepath.Join(dir, "permitd")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := BuildPermitd(ctx, root, bin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		permitdBin = bin
		return m.Run()
	}()
	os.Exit(code)
}

// outDir returns the report directory of a test: under $JEPSEN_OUT (kept)
// if set, else in the test's temp dir.
func outDir(t *testing.T, name string) string {
	t.Helper()
	if base := os.Getenv("JEPSEN_OUT"); base != "" {
		return filepath.Join(base, fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))
	}
	return filepath.Join(t.TempDir(), "report")
}

// testLog forwards the runner's progress lines to t.Log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runScenario runs cfg and returns its summary.
func runScenario(t *testing.T, cfg Config) *Summary {
	t.Helper()
	cfg.PermitdBin = permitdBin
	cfg.Log = testLog{t}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sum
}

func describe(sum *Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "verdict %s (exit %d), report %s\n", sum.Verdict, sum.ExitCode, filepath.Join(sum.Config.OutDir, "index.html"))
	for _, c := range sum.Checkers {
		fmt.Fprintf(&b, "  %s\n", c.String())
	}
	for _, e := range sum.Errors {
		fmt.Fprintf(&b, "  error: %s\n", e)
	}
	return b.String()
}

// TestSmoke runs the CI smoke scenarios against real agents: on 3 nodes a
// leader partition, kill -9 of the leader, pauses and clock skew; on 5
// nodes a bridge partition; on 3 nodes leadership transfers A→B→A and
// then a reconfiguration (the limit 2× slower) with a forced snapshot of
// the leader, its kill -9 and restart from its data directory; and the
// leased workload (3 groups of 2 worker sidecars, the first two groups
// behind a lease relay each: one group cut off from the register and the
// relays from the register, then a worker killed with -9 and restarted
// and the relays stopped and started in turn while the limit is 8×
// slower, below one worker's share of the old rate, and a follower is
// snapshotted, killed and restarted). The strict scenarios
// reserve mixed permit counts (1 to max_reserved+1, used one by one).
// Every one must be valid: safe, and recovered after the final heal.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clusters for about three minutes")
	}
	scenarios := []struct {
		name    string
		nodes   int
		nemesis string
		seed    uint64
		// workload (default strict), groups of worker sidecars (leased)
		// and a pinned schedule (default: generated from nemesis).
		workload string
		groups   int
		schedule []Event
	}{
		{"3-nodes-leader-partition", 3, "partition:isolate-leader", 11, "", 0, nil},
		{"3-nodes-kill-leader", 3, "kill:leader", 12, "", 0, nil},
		{"3-nodes-pause", 3, "pause:leader|minority", 13, "", 0, nil},
		{"3-nodes-clock-skew", 3, "clock:skew-leader|skew-followers", 14, "", 0, nil},
		{"5-nodes-bridge", 5, "partition:bridge", 15, "", 0, nil},
		{"3-nodes-transfer-reconfig-snapshot-restart", 3, "transfer,reconfig", 17, "", 0, []Event{
			{Fault: FaultTransfer, Variant: "a-b-a", At: 3 * time.Second, Until: 9 * time.Second, Pick: 1},
			// Pick 0: the leader is snapshotted, killed and restarted.
			{Fault: FaultReconfig, Variant: "snapshot-restart", At: 10 * time.Second, Until: 17 * time.Second, Pick: 0, Factor: 2},
		}},
		{"leased-3-nodes-group-partition-worker-kill-reconfig-relays", 3, "worker,reconfig,relay", 16, WorkloadLeased, 3, []Event{
			// Pick 2: group g3, register calls dropped (not delivered).
			{Fault: FaultWorker, Variant: "isolate-group", At: 3 * time.Second, Until: 10 * time.Second, Pick: 2},
			// The relays r1 (g1) and r2 (g2) cut off from the register,
			// blackholed (pick 1): their batches time out.
			{Fault: FaultRelay, Variant: "partition", At: 3 * time.Second, Until: 10 * time.Second, Pick: 1},
			// Then stopped (kill -9, SIGTERM) and started again in turn.
			{Fault: FaultRelay, Variant: "restart", At: 11 * time.Second, Until: 17 * time.Second, Pick: 0},
			// Pick 1: worker g2-w1.
			{Fault: FaultWorker, Variant: "kill", At: 11 * time.Second, Until: 15 * time.Second, Pick: 1},
			// Factor 8: 50/s → 6.25/s, below a worker's share of the old
			// rate (50/6); pick 1: a follower is snapshotted and restarted.
			{Fault: FaultReconfig, Variant: "snapshot-restart", At: 11 * time.Second, Until: 17 * time.Second, Pick: 1, Factor: 8},
		}},
	}
	var strictGrants, multiGrants int64
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			nem, err := ParseNemeses(sc.nemesis)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			cfg := Config{
				Nodes: sc.nodes, Workers: 4, Workload: WorkloadStrict, Nemeses: nem,
				Duration: 28 * time.Second, Seed: sc.seed, OutDir: outDir(t, sc.name), Schedule: sc.schedule,
			}
			if sc.workload == WorkloadLeased {
				cfg.Workload, cfg.Workers, cfg.Groups = sc.workload, 2*sc.groups, sc.groups
			}
			sum := runScenario(t, cfg)
			t.Logf("%s in %v (%s mode): %d faults, %d API calls, %d grants of %d permits (%d of several)", sc.name, time.Since(start).Round(time.Second), sum.Mode,
				len(sum.Nemeses), sum.APICalls, sum.Workers.Granted, sum.Workers.PermitsGranted, sum.Workers.MultiPermitGrants)
			if sum.Namespaces.Available && sum.Mode != ModeNamespaces {
				t.Errorf("namespaces are available (%s) but the run used %s: %s", sum.Namespaces.Reason, sum.Mode, sum.ModeDetail)
			}
			if len(sum.Nemeses) == 0 {
				t.Errorf("no fault was applied")
			}
			if sum.ExitCode != ExitValid {
				t.Fatalf("scenario %s is not valid:\n%s", sc.name, describe(sum))
			}
			if sc.workload == WorkloadLeased {
				checkLeasedSmoke(t, sum)
			} else {
				strictGrants += sum.Workers.Granted
				multiGrants += sum.Workers.MultiPermitGrants
			}
			for _, ev := range sc.schedule {
				switch ev.Fault {
				case FaultTransfer:
					checkTransferSmoke(t, sum)
				case FaultReconfig:
					checkReconfigSmoke(t, sum)
				}
			}
		})
	}
	t.Logf("strict scenarios: %d grants, %d of several permits", strictGrants, multiGrants)
	if strictGrants > 0 && multiGrants == 0 && !t.Failed() {
		t.Errorf("no strict grant held more than one permit (mixed counts not exercised)")
	}
}

// TestSmokeSecure runs the shortest runs the configuration allows (18 s:
// 3 s of warmup, 5 s of faults, a 10 s tail) with Config.Secure, TLS and
// API tokens end to end, killing the leader with -9 and restarting it:
// the strict workload (clients with the admin token) and the leased one
// (worker sidecars leasing over TLS with a worker token). Each run must be
// valid, every agent's log must show each of its starts listening with
// tls=true and tokens=true (the killed one twice), and no secret may be
// anywhere in the report.
func TestSmokeSecure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clusters for about 40 seconds")
	}
	nem, err := ParseNemeses("kill:leader")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []struct {
		name            string
		workload        string
		workers, groups int
		seed            uint64
	}{
		{"strict", WorkloadStrict, 4, 0, 21},
		{"leased", WorkloadLeased, 4, 2, 22},
	} {
		t.Run(sc.name, func(t *testing.T) {
			start := time.Now()
			dir := outDir(t, "secure-"+sc.name)
			sum := runScenario(t, Config{
				Nodes: 3, Workers: sc.workers, Groups: sc.groups, Workload: sc.workload, Nemeses: nem,
				Duration: 18 * time.Second, Seed: sc.seed, OutDir: dir, Secure: true,
			})
			t.Logf("secure %s run in %v (%s mode): %d faults, %d API calls, %d grants", sc.name, time.Since(start).Round(time.Second), sum.Mode,
				len(sum.Nemeses), sum.APICalls, sum.Workers.Granted)
			if sum.ExitCode != ExitValid {
				t.Fatalf("the secure run is not valid:\n%s", describe(sum))
			}
			if !sum.Config.Secure || sum.Security == nil || sum.Workers.Granted == 0 || len(sum.Nemeses) == 0 {
				t.Fatalf("secure %v, security %+v, %d grants, %d faults: want a secure run with grants and a kill", sum.Config.Secure, sum.Security, sum.Workers.Granted, len(sum.Nemeses))
			}
			if sc.workload == WorkloadLeased && (sum.Leased == nil || len(sum.Leased.Workers) != sc.workers) {
				t.Fatalf("leased summary %+v: want %d workers (their leases, over TLS with a worker token, gave the grants)", sum.Leased, sc.workers)
			}
			checkSecureRun(t, sum, dir)
		})
	}
}

// checkSecureRun checks a secure run's agents' logs and report files.
func checkSecureRun(t *testing.T, sum *Summary, dir string) {
	t.Helper()
	// The agents' own word, read here from their logs.
	listeners := 0
	for _, n := range sum.Nodes {
		b, err := os.ReadFile(filepath.Join(dir, n.Log))
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "listening:") {
				continue
			}
			seen++
			if !strings.Contains(line, " tls=true") || !strings.Contains(line, " tokens=true") {
				t.Errorf("agent %s listened without TLS or tokens: %s", n.ID, line)
			}
		}
		if seen != n.Restarts+1 {
			t.Errorf("agent %s: %d listeners for %d starts", n.ID, seen, n.Restarts+1)
		}
		listeners += seen
	}
	if listeners <= len(sum.Nodes) {
		t.Errorf("%d listeners on %d agents: the killed agent did not restart secure", listeners, len(sum.Nodes))
	}
	// The secrets live only in the runner's memory.
	for _, f := range sum.Files {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && strings.Contains(string(b), "pmt_") {
			t.Errorf("%s holds a token secret", f)
		}
	}
}

// checkTransferSmoke checks that the transfer fault moved the leadership
// A→B and back to A at least once.
func checkTransferSmoke(t *testing.T, sum *Summary) {
	t.Helper()
	for _, rec := range sum.Nemeses {
		if rec.Event.Fault != FaultTransfer {
			continue
		}
		var ok []TransferRecord
		for _, tr := range rec.Transfers {
			if tr.Outcome == "ok" {
				ok = append(ok, tr)
			}
		}
		t.Logf("transfers: %d, %d seen done", len(rec.Transfers), len(ok))
		back := false
		for i := 1; i < len(ok); i++ {
			back = back || (ok[i].From == ok[i-1].To && ok[i].To == ok[i-1].From)
		}
		if !back {
			t.Errorf("no leadership transfer A→B→A was seen done: %+v", rec.Transfers)
		}
	}
}

// checkReconfigSmoke checks that the reconfig fault restored its limit,
// restarted its node from a snapshot and judged it, and (strict) that
// linearizability checked the epochs on both sides of the change.
func checkReconfigSmoke(t *testing.T, sum *Summary) {
	t.Helper()
	restarts := 0
	for _, rec := range sum.Nemeses {
		if rec.Event.Fault != FaultReconfig {
			continue
		}
		for _, rr := range rec.Restarts {
			t.Logf("restart of %s (leader %v) after a snapshot at index %d: ready after %v", rr.Node, rr.WasLeader, rr.SnapshotIndex, time.Duration(rr.ReadyAfterNanos))
			if rr.SnapshotIndex == 0 || rr.ReadyNanos < 0 {
				t.Errorf("restart %+v: no snapshot or never ready", rr)
			}
			restarts++
		}
		if !strings.Contains(strings.Join(rec.Notes, "; "), "interval back to") {
			t.Errorf("the limit was not restored: %v %v", rec.Notes, rec.Errors)
		}
	}
	if restarts == 0 {
		t.Errorf("no node was snapshotted and restarted")
	}
	for _, c := range sum.Checkers {
		if c.Name == "linearizability" {
			per, _ := c.Details["per_limit"].(map[string]string)
			if len(per) < 3 {
				t.Errorf("linearizability checked %v; want the epochs before, during and after the change", per)
			}
		}
	}
	seen := false
	for _, c := range sum.Checkers {
		seen = seen || c.Name == "restart-ready"
	}
	if !seen {
		t.Errorf("checker restart-ready did not run")
	}
}

// TestBrokenTimelineIsCaught runs agents with --test-break-timeline (a new
// leader resumes the cluster timeline from its own clock instead of the
// last applied time) and makes the next leader's clock an hour ahead
// before killing the current one. With 16 workers holding reserved slots
// about three seconds ahead, the broken leader grants at once slots the old
// leader had already given out, so permits are used closer than the stated
// spacing. The harness must say so and exit non-zero. The same scenario
// against a correct permitd (the control) must be valid.
func TestBrokenTimelineIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster twice for about 25 seconds")
	}
	scenario := func(t *testing.T, flags []string) *Summary {
		return runScenario(t, Config{
			Nodes: 3, Workers: 16, Workload: WorkloadStrict,
			Interval: 200 * time.Millisecond, MaxReserved: 24, Expiry: 40 * time.Millisecond,
			Duration: 24 * time.Second, Tail: 11 * time.Second, Seed: 99, OutDir: outDir(t, "timeline"),
			AgentFlags: flags,
			Schedule: []Event{
				{Fault: FaultClock, Variant: "skew-followers", At: 4 * time.Second, Until: 12 * time.Second, ClockOffset: time.Hour, ClockRate: 1},
				{Fault: FaultKill, Variant: "leader", At: 5 * time.Second, Until: 11 * time.Second},
			},
		})
	}
	controlAndBroken(t, scenario, func(t *testing.T, caught map[string]bool) {
		if !caught["spacing-at-use"] && !caught["spacing"] && !caught["linearizability"] {
			t.Fatalf("no spacing or linearizability violation reported; invalid checkers: %v", caught)
		}
	})
}

// controlAndBroken runs scenario twice: as a control against a correct
// permitd (no agent flags), which must be valid, and with
// --test-break-timeline, which must fail on safety; check then gets the
// names of the checkers the broken run failed.
func controlAndBroken(t *testing.T, scenario func(*testing.T, []string) *Summary, check func(*testing.T, map[string]bool)) {
	t.Helper()
	t.Run("control", func(t *testing.T) {
		sum := scenario(t, nil)
		if sum.ExitCode != ExitValid {
			t.Fatalf("a correct permitd failed the scenario:\n%s", describe(sum))
		}
	})
	t.Run("broken", func(t *testing.T) {
		sum := scenario(t, []string{"--test-break-timeline"})
		t.Log(describe(sum))
		if sum.ExitCode != ExitSafety || sum.SafetyValid {
			t.Fatalf("the broken timeline was not caught: exit %d, want %d", sum.ExitCode, ExitSafety)
		}
		caught := map[string]bool{}
		for _, c := range sum.Checkers {
			if !c.Valid {
				caught[c.Name] = true
			}
		}
		check(t, caught)
	})
}

// checkLeasedSmoke checks what the leased smoke scenario must show beyond
// validity: the cut-off group failed closed with a clear error, the killed
// worker was restarted, and the lease checkers ran.
func checkLeasedSmoke(t *testing.T, sum *Summary) {
	t.Helper()
	l := sum.Leased
	if l == nil {
		t.Fatal("no leased summary")
	}
	t.Logf("leased: fleet %+v; fail closed %d (%s)", l.Fleet, l.FailClosed, l.FailClosedExample)
	if l.FailClosed == 0 || !strings.Contains(l.FailClosedExample, "fails closed") {
		t.Errorf("the group cut off from the register never failed closed with a clear error: %d 503s, example %q", l.FailClosed, l.FailClosedExample)
	}
	restarts := 0
	for _, w := range l.Workers {
		restarts += w.Restarts
	}
	if restarts == 0 {
		t.Errorf("no worker was restarted after the kill")
	}
	if len(l.Relays) != 2 {
		t.Errorf("%d relays, want 2 (in front of g1 and g2)", len(l.Relays))
	}
	relayRestarts := 0
	for _, r := range l.Relays {
		t.Logf("relay %s (upstream %s) for %v: %+v, %d restarts", r.Name, r.Upstream, r.Workers, r.Stats, r.Restarts)
		if r.Stats.Commands == 0 || r.Stats.Batches == 0 || len(r.Workers) == 0 {
			t.Errorf("relay %s carried no lease command: its workers never went through it", r.Name)
		}
		relayRestarts += r.Restarts
	}
	if relayRestarts == 0 {
		t.Errorf("no relay was restarted by relay:restart")
	}
	seen := map[string]bool{}
	for _, c := range sum.Checkers {
		seen[c.Name] = true
	}
	for _, name := range []string{"window", "window-at-use", "lease-conservation", "conservation"} {
		if !seen[name] {
			t.Errorf("checker %s did not run", name)
		}
	}
}

// TestLeasedDoubleLeaseIsCaught runs the leased workload against worker
// sidecars started with --test-double-lease (each permit the worker hands
// out is handed out twice): the fleet spends about twice the rate, which
// the leased window bound C + O + floor(W/I) + 1 and lease conservation
// (grants answered > permits spent) must both catch; the run exits
// unsafe. The leased smoke scenario is the control.
func TestLeasedDoubleLeaseIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster with worker sidecars for about 20 seconds")
	}
	sum := runScenario(t, Config{
		Nodes: 3, Workers: 4, Groups: 2, Workload: WorkloadLeased,
		Duration: 18 * time.Second, Tail: 10 * time.Second, Seed: 98, OutDir: outDir(t, "double-lease"),
		Leased: LeasedConfig{WorkerFlags: []string{"--test-double-lease"}},
	})
	t.Log(describe(sum))
	if sum.ExitCode != ExitSafety || sum.SafetyValid {
		t.Fatalf("the double lease was not caught: exit %d, want %d", sum.ExitCode, ExitSafety)
	}
	caught := map[string]bool{}
	for _, c := range sum.Checkers {
		if !c.Valid {
			caught[c.Name] = true
		}
	}
	if !caught["window"] || !caught["lease-conservation"] {
		t.Fatalf("want window and lease-conservation violations; invalid checkers: %v", caught)
	}
}
