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
// nodes a bridge partition; and the leased workload (3 groups of 2 worker
// sidecars: one group cut off from the register, then a worker killed
// with -9 and restarted). Every one must be valid: safe, and recovered
// after the final heal.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clusters for about two and a half minutes")
	}
	scenarios := []struct {
		name    string
		nodes   int
		nemesis string
		seed    uint64
		// leased scenarios: groups of worker sidecars and a pinned
		// schedule.
		workload string
		groups   int
		schedule []Event
	}{
		{"3-nodes-leader-partition", 3, "partition:isolate-leader", 11, "", 0, nil},
		{"3-nodes-kill-leader", 3, "kill:leader", 12, "", 0, nil},
		{"3-nodes-pause", 3, "pause:leader|minority", 13, "", 0, nil},
		{"3-nodes-clock-skew", 3, "clock:skew-leader|skew-followers", 14, "", 0, nil},
		{"5-nodes-bridge", 5, "partition:bridge", 15, "", 0, nil},
		{"leased-3-nodes-group-partition-worker-kill", 3, "worker", 16, WorkloadLeased, 3, []Event{
			// Pick 2: group g3, register calls dropped (not delivered).
			{Fault: FaultWorker, Variant: "isolate-group", At: 3 * time.Second, Until: 10 * time.Second, Pick: 2},
			// Pick 1: worker g2-w1.
			{Fault: FaultWorker, Variant: "kill", At: 11 * time.Second, Until: 15 * time.Second, Pick: 1},
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			nem, err := ParseNemeses(sc.nemesis)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			cfg := Config{
				Nodes: sc.nodes, Workers: 4, Workload: WorkloadStrict, Nemeses: nem,
				Duration: 28 * time.Second, Seed: sc.seed, OutDir: outDir(t, sc.name),
			}
			if sc.workload == WorkloadLeased {
				cfg.Workload, cfg.Workers, cfg.Groups, cfg.Schedule = sc.workload, 2*sc.groups, sc.groups, sc.schedule
			}
			sum := runScenario(t, cfg)
			t.Logf("%s in %v (%s mode): %d faults, %d API calls", sc.name, time.Since(start).Round(time.Second), sum.Mode, len(sum.Nemeses), sum.APICalls)
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
			}
		})
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
		if !caught["spacing-at-use"] && !caught["spacing"] && !caught["linearizability"] {
			t.Fatalf("no spacing or linearizability violation reported; invalid checkers: %v", caught)
		}
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
