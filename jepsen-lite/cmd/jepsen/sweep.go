package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner"
	"github.com/permitd/permitd/jepsen-lite/sweep"
)

// runSweep is `jepsen sweep`: many short runs over a seed range and the
// workloads (package sweep); its exit status is the worst verdict.
func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jepsen sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg       sweep.Config
		seeds     string
		workloads string
		verbose   bool
	)
	fs.StringVar(&seeds, "seeds", "", "seeds to run: N-M ranges and N seeds, comma-separated (required), e.g. 1000-1049")
	fs.StringVar(&workloads, "workloads", "all", "comma-separated workloads (strict, window, leased, multi, templated) or all")
	fs.DurationVar(&cfg.Duration, "duration", 20*time.Second, "each run's length (at least 15s; faults from 3s to duration - max(10s, duration/4))")
	fs.StringVar(&cfg.Nemesis, "nemesis", "", "replace every workload's fault list (e.g. relay,worker with --workloads leased); default: each workload's full mix below")
	fs.IntVar(&cfg.Nodes, "nodes", 0, "cluster size of every run, 3 or 5 (default: 5 for odd seeds, 3 for even)")
	fs.StringVar(&cfg.Mode, "mode", runner.ModeAuto, "auto, namespaces or fallback (see jepsen --help)")
	fs.StringVar(&cfg.PermitdBin, "permitd-bin", "", "permitd binary (default: built once into OUT/bin/permitd)")
	fs.StringVar(&cfg.OutDir, "out", "", "sweep directory, absent or empty (default jepsen-lite/out/sweep-<time>)")
	fs.BoolVar(&cfg.StopOnFailure, "stop-on-failure", false, "stop after the first run that is not valid (after its retries); default: go on")
	fs.IntVar(&cfg.Retries, "retries", 1, "re-runs of a run that ended incomplete or not recovered (CPU starvation, mostly); unsafe runs are never re-run; 0: none")
	fs.IntVar(&cfg.MaxRuns, "max-runs", 1000, "refuse a plan of more runs (seeds x workloads)")
	fs.DurationVar(&cfg.MaxTime, "max-time", 12*time.Hour, "start no run that would end after this much wall time")
	fs.BoolVar(&cfg.KeepReports, "keep-reports", false, "keep valid runs' full reports (default: only their summary.json)")
	fs.BoolVar(&verbose, "v", false, "every run's progress lines too")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: jepsen sweep --seeds 1000-1049 [--workloads strict,window,leased,multi] [--duration 20s] [--out DIR]

Runs one short jepsen-lite run per seed and workload, one at a time, each
workload with its full fault mix:
`)
		for _, w := range sweep.Workloads {
			p := sweep.DefaultProfiles[w]
			fmt.Fprintf(fs.Output(), "  %-7s %d workers", w, p.Workers)
			if p.Groups > 1 {
				fmt.Fprintf(fs.Output(), " in %d groups", p.Groups)
			}
			fmt.Fprintf(fs.Output(), ", --nemesis %s\n", p.Nemesis)
		}
		fmt.Fprint(fs.Output(), `builds permitd once, and writes DIR/sweep.txt (a line per run, totals,
each failed run's first violations and the command that replays it alone)
and DIR/sweep.json; each run's report is DIR/<workload>/seed<S> (valid
runs keep only summary.json).

Exit status: the worst verdict: 0 all valid, 1 a run was unsafe, 2 bad
flags or plan, 3 a run was incomplete, 4 a run did not recover.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, done := parse(fs, args, stderr); done {
		return code
	}
	var err error
	if cfg.Seeds, err = sweep.ParseSeeds(seeds); err != nil {
		return failed(stderr, fs.Name(), err, sweep.ErrInvalid)
	}
	if cfg.Workloads, err = sweep.ParseWorkloads(workloads); err != nil {
		return failed(stderr, fs.Name(), err, sweep.ErrInvalid)
	}
	if cfg.OutDir == "" {
		cfg.OutDir = "jepsen-lite/out/sweep-" + time.Now().UTC().Format("20060102T150405Z")
	}
	cfg.Log = stderr
	if verbose {
		cfg.RunLog = stderr
	}
	sum, err := sweep.Run(ctx, cfg)
	if err != nil {
		return failed(stderr, fs.Name(), err, sweep.ErrInvalid)
	}
	fmt.Fprintf(stdout, "%s/sweep.txt: %s (exit %d)\n", cfg.OutDir, sum.Totals.Line(), sum.ExitCode)
	return sum.ExitCode
}
