package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/runner"
)

func TestParseSeeds(t *testing.T) {
	good := map[string][]uint64{
		"1000-1002":    {1000, 1001, 1002},
		"1, 5,3-4,5":   {1, 5, 3, 4},
		"7":            {7},
		"0-0,":         {0},
		"2367,1-2,2-3": {2367, 1, 2, 3},
	}
	for in, want := range good {
		got, err := ParseSeeds(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseSeeds(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", ",", "a", "5-3", "-1", "1-x", "0-20000", "1-9999,20000-29999"} {
		if got, err := ParseSeeds(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseSeeds(%q) = %v, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestParseWorkloads(t *testing.T) {
	if got, err := ParseWorkloads("all"); err != nil || !reflect.DeepEqual(got, Workloads) {
		t.Errorf("all = %v, %v", got, err)
	}
	if got, err := ParseWorkloads("leased, strict,leased"); err != nil || !reflect.DeepEqual(got, []string{"leased", "strict"}) {
		t.Errorf("leased, strict,leased = %v, %v", got, err)
	}
	for _, in := range []string{"", "bursty", "strict,nope"} {
		if _, err := ParseWorkloads(in); !errors.Is(err, ErrInvalid) || (in != "" && !strings.Contains(err.Error(), "allowed")) {
			t.Errorf("ParseWorkloads(%q): %v; want ErrInvalid naming what is allowed", in, err)
		}
	}
}

// TestPlan: seed by seed, every workload of a seed before the next;
// 5 nodes for odd seeds, 3 for even, unless fixed; and every run of the
// default profiles is one the runner accepts, for both sizes.
func TestPlan(t *testing.T) {
	plan, err := Plan([]uint64{1, 2}, []string{"strict", "leased"}, DefaultProfiles, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range plan {
		got = append(got, fmt.Sprintf("%s n=%d", p.Name(), p.Nodes))
	}
	want := []string{"strict/seed1 n=5", "leased/seed1 n=5", "strict/seed2 n=3", "leased/seed2 n=3"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan %v, want %v", got, want)
	}
	if plan, _ = Plan([]uint64{1}, []string{"multi"}, DefaultProfiles, 3); plan[0].Nodes != 3 {
		t.Fatalf("fixed size: %d nodes, want 3", plan[0].Nodes)
	}
	if _, err := Plan([]uint64{1}, []string{"nope"}, DefaultProfiles, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown workload: %v", err)
	}
	all, err := Plan([]uint64{1, 2}, Workloads, DefaultProfiles, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Duration: defaultDuration}
	for _, p := range all {
		rc, err := p.RunConfig(c, t.TempDir())
		if err == nil {
			err = runner.Validate(rc)
		}
		if err != nil {
			t.Errorf("%s (%d nodes): %v", p.Name(), p.Nodes, err)
		}
	}
	cmd := all[0].Replay(Config{Duration: 20 * time.Second, PermitdBin: "/b/permitd"})
	if want := "go run ./jepsen-lite/cmd/jepsen --permitd-bin /b/permitd --nodes 5 --workers 8 --workload strict --nemesis " + DefaultProfiles["strict"].Nemesis + " --duration 20s --seed 1 --out /tmp/jl-strict-seed1"; cmd != want {
		t.Fatalf("replay\n%s\nwant\n%s", cmd, want)
	}
}

// fakeRuns plays the runner: verdicts[name] lists the exit codes of a
// run's attempts (missing: valid). Each run writes a summary.json and a
// history.jsonl into its directory.
type fakeRuns struct {
	mu       sync.Mutex
	verdicts map[string][]int
	calls    []string
	bins     map[string]bool
	clock    *time.Time
	step     time.Duration
}

func (f *fakeRuns) run(_ context.Context, rc runner.Config) (*runner.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := fmt.Sprintf("%s/seed%d", rc.Workload, rc.Seed)
	attempt := 0
	for _, c := range f.calls {
		if c == name {
			attempt++
		}
	}
	f.calls = append(f.calls, name)
	f.bins[rc.PermitdBin] = true
	if f.clock != nil {
		*f.clock = f.clock.Add(f.step)
	}
	code := runner.ExitValid
	if v := f.verdicts[name]; attempt < len(v) {
		code = v[attempt]
	}
	s := &runner.Summary{ExitCode: code, Mode: "fallback", WallSeconds: 2,
		Verdict:  map[int]string{0: "valid", 1: "unsafe", 3: "incomplete", 4: "not recovered"}[code],
		Schedule: []runner.Event{{Fault: "clock", Variant: "skew-leader"}}}
	s.Checkers = []checker.Result{{Name: "spacing", Valid: true, Details: map[string]any{"violations_total": 0}}}
	if code == runner.ExitSafety {
		s.Checkers = append(s.Checkers, checker.Result{Name: "linearizability", Violations: []string{"no linearization explains it"},
			Details: map[string]any{"violations_total": 1}})
	}
	if code == runner.ExitHarness {
		s.Errors = []string{"cluster did not come up"}
	}
	if err := runner.PrepareOut(rc.OutDir); err != nil {
		return nil, err
	}
	for _, file := range []string{"summary.json", "history.jsonl"} {
		if err := os.WriteFile(filepath.Join(rc.OutDir, file), []byte("{}\n"), 0o644); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func newFake(verdicts map[string][]int) *fakeRuns {
	return &fakeRuns{verdicts: verdicts, bins: map[string]bool{}}
}

func TestSweep(t *testing.T) {
	f := newFake(map[string][]int{
		"strict/seed1": {runner.ExitHarness, runner.ExitValid},     // starved once, valid on the retry
		"leased/seed2": {runner.ExitSafety},                        // unsafe: never re-run
		"strict/seed3": {runner.ExitLiveness, runner.ExitLiveness}, // not recovered twice
	})
	out := filepath.Join(t.TempDir(), "sweep")
	builds := 0
	cfg := Config{Seeds: []uint64{1, 2, 3}, Workloads: []string{"strict", "leased"}, OutDir: out, Retries: 1, ModuleRoot: "/src",
		run: f.run, build: func(_ context.Context, root, dst string) error {
			builds++
			if root != "/src" || !strings.HasSuffix(dst, "bin/permitd") {
				t.Errorf("build %s into %s", root, dst)
			}
			return nil
		}}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if builds != 1 || len(f.bins) != 1 {
		t.Fatalf("%d builds, binaries used %v; want one build used by every run", builds, f.bins)
	}
	wantCalls := []string{"strict/seed1", "strict/seed1", "leased/seed1", "strict/seed2", "leased/seed2", "strict/seed3", "strict/seed3", "leased/seed3"}
	if !reflect.DeepEqual(f.calls, wantCalls) {
		t.Fatalf("runs %v, want %v", f.calls, wantCalls)
	}
	want := Totals{Runs: 6, Valid: 4, Unsafe: 1, NotRecovered: 1, Retried: 2, Violations: 1, WallSeconds: 16}
	if sum.Totals != want {
		t.Fatalf("totals %+v, want %+v", sum.Totals, want)
	}
	if sum.ExitCode != runner.ExitSafety {
		t.Fatalf("exit %d, want %d (a run was unsafe)", sum.ExitCode, runner.ExitSafety)
	}
	if got := sum.ByWorkload["leased"]; got.Unsafe != 1 || got.Runs != 3 {
		t.Fatalf("leased totals %+v", got)
	}
	unsafe := sum.Runs[3]
	if unsafe.Name != "leased/seed2" || unsafe.Violations["linearizability"] != 1 || len(unsafe.Attempts) != 1 {
		t.Fatalf("unsafe run %+v", unsafe)
	}
	// A valid run keeps only its summary; a failed one its whole report.
	if _, err := os.Stat(filepath.Join(out, "leased/seed1/history.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a valid run kept its history: %v", err)
	}
	for _, keep := range []string{"leased/seed1/summary.json", "leased/seed2/history.jsonl", "strict/seed1/history.jsonl", "strict/seed1-retry1/summary.json"} {
		if _, err := os.Stat(filepath.Join(out, keep)); err != nil {
			t.Errorf("%s: %v", keep, err)
		}
	}
	text, err := os.ReadFile(filepath.Join(out, "sweep.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"leased/seed2: unsafe", "linearizability: no linearization explains it",
		"replay: go run ./jepsen-lite/cmd/jepsen --permitd-bin " + filepath.Join(out, "bin/permitd"),
		"--workload leased", "--seed 2 --out /tmp/jl-leased-seed2",
		"strict/seed3: not recovered", "6 runs: 4 valid, 1 unsafe, 0 incomplete, 1 not recovered (2 re-run); 1 violations",
		"(attempt 2)", "[clock:skew-leader]", "exit 1",
	} {
		if !strings.Contains(string(text), s) {
			t.Errorf("sweep.txt lacks %q:\n%s", s, text)
		}
	}
	var back Summary
	js, _ := os.ReadFile(filepath.Join(out, "sweep.json"))
	if err := json.Unmarshal(js, &back); err != nil || back.Totals != sum.Totals || len(back.Runs) != 6 {
		t.Fatalf("sweep.json: %v, %+v", err, back.Totals)
	}
}

// TestSweepNemesisOverride: --nemesis replaces every profile's faults,
// for the runs and their replay commands.
func TestSweepNemesisOverride(t *testing.T) {
	var seen []string
	run := func(_ context.Context, rc runner.Config) (*runner.Summary, error) {
		seen = append(seen, runner.Generate(rc)[0].Fault)
		return &runner.Summary{Verdict: "valid"}, nil
	}
	sum, err := Run(context.Background(), Config{Seeds: []uint64{1, 2}, Workloads: []string{"leased"}, Nemesis: "relay:kill",
		OutDir: t.TempDir(), PermitdBin: "/bin/true", run: run})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen, []string{"relay", "relay"}) || !strings.Contains(sum.Runs[0].Replay, "--nemesis relay:kill ") {
		t.Fatalf("faults %v, replay %q; want relay faults only", seen, sum.Runs[0].Replay)
	}
	if DefaultProfiles["leased"].Nemesis == "relay:kill" {
		t.Fatal("the override changed the default profiles")
	}
}

func TestSweepStopsOnFailure(t *testing.T) {
	f := newFake(map[string][]int{"window/seed1": {runner.ExitSafety}})
	sum, err := Run(context.Background(), Config{Seeds: []uint64{1, 2}, Workloads: []string{"strict", "window", "multi"},
		OutDir: t.TempDir(), PermitdBin: "/bin/true", StopOnFailure: true, Retries: 1, run: f.run})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 2 || sum.Totals.Runs != 2 || !strings.Contains(sum.Stopped, "window/seed1") || sum.ExitCode != runner.ExitSafety {
		t.Fatalf("runs %v, stopped %q, exit %d; want to stop after window/seed1 with exit 1", f.calls, sum.Stopped, sum.ExitCode)
	}
	// Without the flag a failure does not stop the sweep, and the worst
	// verdict decides the exit: incomplete (3) over not recovered (4).
	f = newFake(map[string][]int{"strict/seed1": {runner.ExitLiveness}, "strict/seed2": {runner.ExitHarness}})
	sum, err = Run(context.Background(), Config{Seeds: []uint64{1, 2, 3}, Workloads: []string{"strict"},
		OutDir: t.TempDir(), PermitdBin: "/bin/true", run: f.run})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 3 || sum.ExitCode != runner.ExitHarness || sum.Stopped != "" {
		t.Fatalf("runs %v, exit %d, stopped %q; want all 3 runs (no retries) and exit 3", f.calls, sum.ExitCode, sum.Stopped)
	}
}

// TestSweepTimeBudget: no run starts unless Duration + 30 s fits in what
// is left of MaxTime (each fake run takes 50 s of the fake clock).
func TestSweepTimeBudget(t *testing.T) {
	now := time.Unix(1e9, 0)
	f := newFake(nil)
	f.clock, f.step = &now, 50*time.Second
	sum, err := Run(context.Background(), Config{Seeds: []uint64{1, 2, 3, 4}, Workloads: []string{"strict"}, Duration: 20 * time.Second,
		MaxTime: 2 * time.Minute, OutDir: t.TempDir(), PermitdBin: "/bin/true", run: f.run, now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Totals.Runs != 2 || sum.Planned != 4 || !strings.Contains(sum.Stopped, "time budget") || sum.ExitCode != runner.ExitValid {
		t.Fatalf("%d of %d runs, stopped %q, exit %d; want 2 of 4 stopped by the time budget", sum.Totals.Runs, sum.Planned, sum.Stopped, sum.ExitCode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sum, err = Run(ctx, Config{Seeds: []uint64{1}, OutDir: t.TempDir(), PermitdBin: "/bin/true", run: newFake(nil).run})
	if err != nil || sum.Totals.Runs != 0 || !strings.Contains(sum.Stopped, "interrupted") {
		t.Fatalf("interrupted: %v, %+v", err, sum)
	}
}

// TestSweepRefusesBadPlans: bounds and runner validation are checked
// before anything runs or is built.
func TestSweepRefusesBadPlans(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]Config{
		"relay faults on strict": {Seeds: []uint64{1}, Workloads: []string{"strict", "leased"}, Nemesis: "relay"},
		"too many runs":          {Seeds: []uint64{1, 2, 3}, MaxRuns: 11},
		"too short":              {Seeds: []uint64{1}, Duration: 5 * time.Second},
		"no seeds":               {},
		"bad size":               {Seeds: []uint64{1}, Nodes: 4},
		"bad retries":            {Seeds: []uint64{1}, Retries: -1},
		"output not empty":       {Seeds: []uint64{1}, OutDir: full},
	}
	for name, c := range cases {
		f := newFake(nil)
		c.run = f.run
		c.build = func(context.Context, string, string) error { t.Errorf("%s: built", name); return nil }
		if c.OutDir == "" {
			c.OutDir = filepath.Join(t.TempDir(), "o")
		}
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrInvalid) && !errors.Is(err, runner.ErrInvalid) {
			t.Errorf("%s: %v; want an invalid configuration", name, err)
		}
		if len(f.calls) > 0 {
			t.Errorf("%s: ran %v", name, f.calls)
		}
	}
}
