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
// nodes a bridge partition. Every one must be valid: safe, and recovered
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
	}{
		{"3-nodes-leader-partition", 3, "partition:isolate-leader", 11},
		{"3-nodes-kill-leader", 3, "kill:leader", 12},
		{"3-nodes-pause", 3, "pause:leader|minority", 13},
		{"3-nodes-clock-skew", 3, "clock:skew-leader|skew-followers", 14},
		{"5-nodes-bridge", 5, "partition:bridge", 15},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			nem, err := ParseNemeses(sc.nemesis)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			sum := runScenario(t, Config{
				Nodes: sc.nodes, Workers: 4, Workload: WorkloadStrict, Nemeses: nem,
				Duration: 28 * time.Second, Seed: sc.seed, OutDir: outDir(t, sc.name),
			})
			t.Logf("%s in %v: %d faults, %d API calls", sc.name, time.Since(start).Round(time.Second), len(sum.Nemeses), sum.APICalls)
			if len(sum.Nemeses) == 0 {
				t.Errorf("no fault was applied")
			}
			if sum.ExitCode != ExitValid {
				t.Fatalf("scenario %s is not valid:\n%s", sc.name, describe(sum))
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
