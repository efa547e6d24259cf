package sweep

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner"
)

// Config configures a sweep. Zero values select the defaults documented
// on each field.
type Config struct {
	// Seeds are the seeds to run (see ParseSeeds); Workloads the
	// workloads for each (default Workloads).
	Seeds     []uint64
	Workloads []string
	// Profiles are the workloads' profiles (default DefaultProfiles).
	Profiles map[string]Profile
	// Nodes, if 3 or 5, fixes every run's cluster size (default 0:
	// alternating, see Profile.Nodes).
	Nodes int
	// Nemesis, if set, replaces every profile's fault list (a sweep
	// aimed at some faults: "relay,worker" for the leased workload).
	Nemesis string
	// Duration is each run's length (default 20s; at least the runner's
	// 15s).
	Duration time.Duration
	// Mode is the runner's mode (default auto).
	Mode string
	// PermitdBin is the permitd binary; empty builds one into
	// OutDir/bin/permitd from ModuleRoot (default: found from the
	// working directory) before the first run.
	PermitdBin string
	ModuleRoot string
	// OutDir receives the runs' reports and the sweep's summary; it must
	// be absent or empty.
	OutDir string
	// StopOnFailure stops the sweep after the first run that is not
	// valid (after its retries); otherwise the sweep goes on.
	StopOnFailure bool
	// Retries is how many times a run that ended incomplete or not
	// recovered is run again with the same seed (0: never; the jepsen
	// command's default is 1). Unsafe runs are never re-run.
	Retries int
	// MaxRuns bounds the plan (default 1000): a longer plan is refused
	// before anything runs. Retries do not count.
	MaxRuns int
	// MaxTime bounds the sweep's wall time (default 12h): no run starts
	// unless its expected length (Duration + 30s) fits in what is left.
	MaxTime time.Duration
	// KeepReports keeps every file of valid runs; by default a valid
	// run keeps only its summary.json.
	KeepReports bool
	// Log receives a line per run (nil: discarded); RunLog each run's
	// own progress lines (nil: discarded).
	Log    io.Writer
	RunLog io.Writer

	// run and build replace runner.Run and runner.BuildPermitd (tests).
	run   func(context.Context, runner.Config) (*runner.Summary, error)
	build func(ctx context.Context, root, dst string) error
	// now replaces time.Now (tests).
	now func() time.Time
}

// Limits on a sweep.
const (
	defaultMaxRuns  = 1000
	defaultMaxTime  = 12 * time.Hour
	defaultDuration = 20 * time.Second
)

func (c Config) withDefaults() (Config, error) {
	if len(c.Seeds) == 0 {
		return c, fmt.Errorf("%w: no seeds; give --seeds, for example 1000-1049", ErrInvalid)
	}
	if len(c.Workloads) == 0 {
		c.Workloads = Workloads
	}
	if c.Profiles == nil {
		c.Profiles = DefaultProfiles
	}
	if c.Nemesis != "" {
		profiles := make(map[string]Profile, len(c.Profiles))
		for w, p := range c.Profiles {
			p.Nemesis = c.Nemesis
			profiles[w] = p
		}
		c.Profiles = profiles
	}
	if c.Duration == 0 {
		c.Duration = defaultDuration
	}
	if c.Nodes != 0 && c.Nodes != 3 && c.Nodes != 5 {
		return c, fmt.Errorf("%w: %d nodes; allowed: 3, 5, or 0 to alternate", ErrInvalid, c.Nodes)
	}
	if c.Retries < 0 || c.Retries > 5 {
		return c, fmt.Errorf("%w: %d retries; allowed: 0 to 5", ErrInvalid, c.Retries)
	}
	if c.MaxRuns == 0 {
		c.MaxRuns = defaultMaxRuns
	}
	if c.MaxTime == 0 {
		c.MaxTime = defaultMaxTime
	}
	if c.MaxRuns < 0 || c.MaxTime < 0 {
		return c, fmt.Errorf("%w: max runs %d, max time %v; allowed: > 0", ErrInvalid, c.MaxRuns, c.MaxTime)
	}
	if c.OutDir == "" {
		return c, fmt.Errorf("%w: no output directory; give --out DIR", ErrInvalid)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.run == nil {
		c.run = runner.Run
	}
	if c.build == nil {
		c.build = runner.BuildPermitd
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// Run carries out the sweep and writes its summary. It returns an error
// (and no summary) for a bad configuration, a plan over its bounds, a
// planned run the runner would refuse, an output directory it cannot
// use or a build that failed; every run's problems are in the summary,
// whose ExitCode is the worst verdict.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	plan, err := Plan(c.Seeds, c.Workloads, c.Profiles, c.Nodes)
	if err != nil {
		return nil, err
	}
	if len(plan) > c.MaxRuns {
		return nil, fmt.Errorf("%w: %d seeds × %d workloads = %d runs; at most %d (--max-runs)", ErrInvalid, len(c.Seeds), len(c.Workloads), len(plan), c.MaxRuns)
	}
	for _, p := range plan { // refuse a bad plan before hours of runs
		rc, err := p.RunConfig(c, filepath.Join(c.OutDir, p.Name()))
		if err == nil {
			err = runner.Validate(rc)
		}
		if err != nil {
			return nil, fmt.Errorf("sweep: run %s: %w", p.Name(), err)
		}
	}
	if err := runner.PrepareOut(c.OutDir); err != nil {
		return nil, err
	}
	start := c.now()
	if c.PermitdBin == "" {
		if c.PermitdBin, err = c.buildOnce(ctx); err != nil {
			return nil, err
		}
	}
	sum := &Summary{Seeds: c.Seeds, Workloads: c.Workloads, Profiles: c.Profiles, DurationNanos: int64(c.Duration),
		Mode: c.Mode, PermitdBin: c.PermitdBin, Planned: len(plan), StartedAt: start}
	for i, p := range plan {
		if reason := c.stopBefore(ctx, sum, start); reason != "" {
			sum.Stopped = reason
			break
		}
		res := c.runOne(ctx, p)
		sum.add(res)
		fmt.Fprintf(c.Log, "sweep [%d/%d %s] %s\n", i+1, len(plan), c.now().Sub(start).Round(time.Second), res.Line())
	}
	sum.finish(c.now().Sub(start))
	if err := sum.write(c.OutDir); err != nil {
		return sum, err
	}
	fmt.Fprintf(c.Log, "sweep: %s; %s\n", sum.Totals.Line(), filepath.Join(c.OutDir, "sweep.txt"))
	return sum, nil
}

// stopBefore returns why the sweep stops before its next run, or "".
func (c Config) stopBefore(ctx context.Context, sum *Summary, start time.Time) string {
	switch {
	case ctx.Err() != nil:
		return "interrupted: " + ctx.Err().Error()
	case c.StopOnFailure && sum.Totals.Runs > sum.Totals.Valid:
		last := sum.Runs[len(sum.Runs)-1]
		return fmt.Sprintf("stopped at the first failed run (--stop-on-failure): %s", last.Name)
	case c.now().Sub(start)+expectedWall(c.Duration) > c.MaxTime:
		return fmt.Sprintf("time budget: the next run (about %v) would end after --max-time %v", expectedWall(c.Duration), c.MaxTime)
	}
	return ""
}

// runOne runs p, again while it ends incomplete or not recovered and
// retries are left, and returns its result (the last attempt's verdict).
func (c Config) runOne(ctx context.Context, p Planned) RunResult {
	var res RunResult
	for attempt := 0; ; attempt++ {
		dir := filepath.Join(c.OutDir, p.Name())
		if attempt > 0 {
			dir += fmt.Sprintf("-retry%d", attempt)
		}
		rc, err := p.RunConfig(c, dir)
		var s *runner.Summary
		if err == nil {
			rc.Log = c.RunLog
			s, err = c.run(ctx, rc)
		}
		prev := res
		res = resultOf(p, c, dir, s, err)
		res.Attempts = append(prev.Attempts, res.attempt())
		if res.ExitCode == runner.ExitValid && !c.KeepReports {
			res.Errors = append(res.Errors, pruneReport(dir)...)
		}
		if ctx.Err() != nil || attempt >= c.Retries || (res.ExitCode != runner.ExitHarness && res.ExitCode != runner.ExitLiveness) {
			return res
		}
		fmt.Fprintf(c.Log, "sweep: %s ended %s: running it again (retry %d of %d; on a loaded machine that is mostly CPU starvation)\n", p.Name(), res.Verdict, attempt+1, c.Retries)
	}
}

// buildOnce builds permitd into OutDir/bin/permitd.
func (c Config) buildOnce(ctx context.Context) (string, error) {
	root := c.ModuleRoot
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("sweep: %w", err)
		}
		if root, err = runner.FindModuleRoot(wd); err != nil {
			return "", err
		}
	}
	bin, err := filepath.Abs(filepath.Join(c.OutDir, "bin", "permitd"))
	if err != nil {
		return "", fmt.Errorf("sweep: %w", err)
	}
	fmt.Fprintf(c.Log, "sweep: building %s once\n", bin)
	if err := c.build(ctx, root, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// pruneReport removes every file of a valid run's report but
// summary.json.
func pruneReport(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // the run wrote nothing (a test's fake run)
	}
	var errs []string
	for _, e := range entries {
		if e.Name() == "summary.json" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, "pruning the report: "+err.Error())
		}
	}
	return errs
}
