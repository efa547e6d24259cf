package sweep

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner"
)

// RunResult is one planned run's outcome (its last attempt's verdict).
type RunResult struct {
	Name     string `json:"name"`
	Workload string `json:"workload"`
	Seed     uint64 `json:"seed"`
	Nodes    int    `json:"nodes"`
	// Mode is the mode that ran (namespaces or fallback).
	Mode     string `json:"mode,omitempty"`
	Verdict  string `json:"verdict"`
	ExitCode int    `json:"exit_code"`
	// Violations counts, per checker that failed, its violations.
	Violations map[string]int `json:"violations,omitempty"`
	// FirstViolations are the first violation of each failed checker.
	FirstViolations []string `json:"first_violations,omitempty"`
	// Faults are the run's scheduled faults, KIND:VARIANT.
	Faults []string `json:"faults,omitempty"`
	// Errors are the run's harness errors (the first few).
	Errors      []string  `json:"errors,omitempty"`
	WallSeconds float64   `json:"wall_seconds"`
	Out         string    `json:"out"`
	Replay      string    `json:"replay"`
	Attempts    []Attempt `json:"attempts"`
}

// Attempt is one run of a planned run (more than one when it was re-run).
type Attempt struct {
	Verdict     string  `json:"verdict"`
	ExitCode    int     `json:"exit_code"`
	WallSeconds float64 `json:"wall_seconds"`
	Out         string  `json:"out"`
}

func (r RunResult) attempt() Attempt {
	return Attempt{Verdict: r.Verdict, ExitCode: r.ExitCode, WallSeconds: r.WallSeconds, Out: r.Out}
}

// maxErrors bounds RunResult.Errors.
const maxErrors = 5

// resultOf is what a sweep keeps of one run: s, or err if the runner
// refused it.
func resultOf(p Planned, c Config, dir string, s *runner.Summary, err error) RunResult {
	res := RunResult{Name: p.Name(), Workload: p.Workload, Seed: p.Seed, Nodes: p.Nodes, Out: dir,
		Replay: p.Replay(c)}
	if err != nil || s == nil {
		res.Verdict, res.ExitCode = "incomplete", runner.ExitHarness
		if err != nil {
			res.Errors = []string{err.Error()}
		}
		return res
	}
	res.Mode, res.Verdict, res.ExitCode, res.WallSeconds = s.Mode, s.Verdict, s.ExitCode, s.WallSeconds
	for _, ck := range s.Checkers {
		if ck.Valid {
			continue
		}
		n, ok := ck.Details["violations_total"].(int)
		if !ok {
			n = len(ck.Violations)
		}
		if res.Violations == nil {
			res.Violations = map[string]int{}
		}
		res.Violations[ck.Name] = n
		if len(ck.Violations) > 0 {
			res.FirstViolations = append(res.FirstViolations, ck.Name+": "+ck.Violations[0])
		}
	}
	for _, ev := range s.Schedule {
		res.Faults = append(res.Faults, ev.Fault+":"+ev.Variant)
	}
	res.Errors = s.Errors[:min(len(s.Errors), maxErrors)]
	return res
}

// Line is the run in one line: name, size, verdict, violations, time,
// faults.
func (r RunResult) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s n=%d  %-13s", r.Name, r.Nodes, r.Verdict)
	if len(r.Attempts) > 1 {
		fmt.Fprintf(&b, " (attempt %d)", len(r.Attempts))
	}
	fmt.Fprintf(&b, " %5.1fs", r.WallSeconds)
	if len(r.Violations) > 0 {
		names := make([]string, 0, len(r.Violations))
		for name := range r.Violations {
			names = append(names, name)
		}
		slices.Sort(names)
		for i, name := range names {
			names[i] = fmt.Sprintf("%s=%d", name, r.Violations[name])
		}
		fmt.Fprintf(&b, "  violations: %s", strings.Join(names, " "))
	}
	if len(r.Faults) > 0 {
		fmt.Fprintf(&b, "  [%s]", strings.Join(r.Faults, " "))
	}
	return b.String()
}

// Totals counts runs by verdict.
type Totals struct {
	Runs         int `json:"runs"`
	Valid        int `json:"valid"`
	Unsafe       int `json:"unsafe"`
	Incomplete   int `json:"incomplete"`
	NotRecovered int `json:"not_recovered"`
	// Retried counts runs that needed more than one attempt.
	Retried int `json:"retried"`
	// Violations sums every failed checker's violations.
	Violations  int     `json:"violations"`
	WallSeconds float64 `json:"wall_seconds"`
}

func (t *Totals) add(r RunResult) {
	t.Runs++
	switch r.ExitCode {
	case runner.ExitValid:
		t.Valid++
	case runner.ExitSafety:
		t.Unsafe++
	case runner.ExitLiveness:
		t.NotRecovered++
	default:
		t.Incomplete++
	}
	if len(r.Attempts) > 1 {
		t.Retried++
	}
	for _, n := range r.Violations {
		t.Violations += n
	}
	for _, a := range r.Attempts {
		t.WallSeconds += a.WallSeconds
	}
}

// Line is the totals in one line.
func (t Totals) Line() string {
	return fmt.Sprintf("%d runs: %d valid, %d unsafe, %d incomplete, %d not recovered (%d re-run); %d violations",
		t.Runs, t.Valid, t.Unsafe, t.Incomplete, t.NotRecovered, t.Retried, t.Violations)
}

// Summary is a sweep's result, written as sweep.json.
type Summary struct {
	Seeds         []uint64           `json:"seeds"`
	Workloads     []string           `json:"workloads"`
	Profiles      map[string]Profile `json:"profiles"`
	DurationNanos int64              `json:"duration_ns"`
	Mode          string             `json:"mode,omitempty"`
	PermitdBin    string             `json:"permitd_bin"`
	// Planned is the plan's length; Runs holds the runs carried out.
	Planned    int                `json:"planned"`
	Runs       []RunResult        `json:"runs"`
	Totals     Totals             `json:"totals"`
	ByWorkload map[string]*Totals `json:"by_workload"`
	// Stopped says why the sweep ended before its plan did ("" if it
	// did not).
	Stopped     string    `json:"stopped,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	WallSeconds float64   `json:"wall_seconds"`
	// ExitCode is the worst verdict: 1 if any run was unsafe, else 3 if
	// any was incomplete, else 4 if any did not recover, else 0.
	ExitCode int `json:"exit_code"`
}

func (s *Summary) add(r RunResult) {
	s.Runs = append(s.Runs, r)
	s.Totals.add(r)
	if s.ByWorkload == nil {
		s.ByWorkload = map[string]*Totals{}
	}
	if s.ByWorkload[r.Workload] == nil {
		s.ByWorkload[r.Workload] = &Totals{}
	}
	s.ByWorkload[r.Workload].add(r)
}

func (s *Summary) finish(wall time.Duration) {
	s.WallSeconds = wall.Seconds()
	switch t := s.Totals; {
	case t.Unsafe > 0:
		s.ExitCode = runner.ExitSafety
	case t.Incomplete > 0:
		s.ExitCode = runner.ExitHarness
	case t.NotRecovered > 0:
		s.ExitCode = runner.ExitLiveness
	default:
		s.ExitCode = runner.ExitValid
	}
}

// Text is the compact summary (sweep.txt): a line per run, the totals
// and the totals per workload, then the failed runs with their first
// violations and the command that replays each.
func (s *Summary) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "jepsen-lite sweep: %d seeds × %s, %v per run, %s\n", len(s.Seeds), strings.Join(s.Workloads, ","), time.Duration(s.DurationNanos), s.PermitdBin)
	for _, r := range s.Runs {
		fmt.Fprintln(&b, r.Line())
	}
	fmt.Fprintf(&b, "\ntotal: %s; %d of %d planned runs; %s wall\n", s.Totals.Line(), len(s.Runs), s.Planned, time.Duration(s.WallSeconds*float64(time.Second)).Round(time.Second))
	for _, w := range s.Workloads {
		if t := s.ByWorkload[w]; t != nil {
			fmt.Fprintf(&b, "  %-7s %s; %.1fs per run\n", w, t.Line(), t.WallSeconds/float64(max(t.Runs, 1)))
		}
	}
	if s.Stopped != "" {
		fmt.Fprintf(&b, "stopped: %s\n", s.Stopped)
	}
	for _, r := range s.Runs {
		if r.ExitCode == runner.ExitValid {
			continue
		}
		fmt.Fprintf(&b, "\n%s: %s (report %s)\n", r.Name, r.Verdict, r.Out)
		for _, v := range r.FirstViolations {
			fmt.Fprintf(&b, "  %s\n", v)
		}
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "  error: %s\n", e)
		}
		fmt.Fprintf(&b, "  replay: %s\n", r.Replay)
	}
	fmt.Fprintf(&b, "exit %d\n", s.ExitCode)
	return b.String()
}

// write writes sweep.json and sweep.txt into dir.
func (s *Summary) write(dir string) error {
	js, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sweep.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sweep.txt"), []byte(s.Text()), 0o644); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return nil
}
