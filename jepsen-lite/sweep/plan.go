package sweep

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner"
)

// ErrInvalid is wrapped by every error about a sweep's configuration.
var ErrInvalid = errors.New("sweep: invalid configuration")

// Profile is how a sweep runs one workload.
type Profile struct {
	// Workers and Groups are the run's client workers and groups.
	Workers int `json:"workers"`
	Groups  int `json:"groups,omitempty"`
	// Nodes is the cluster size, 3 or 5; 0 alternates by seed (5 for
	// odd seeds, 3 for even ones).
	Nodes int `json:"nodes,omitempty"`
	// Nemesis is the --nemesis list: every fault kind that applies to
	// the workload.
	Nemesis string `json:"nemesis"`
}

// DefaultProfiles are the workloads' profiles: the full fault mix each
// workload accepts (reconfig: strict and leased; worker and relay:
// leased).
var DefaultProfiles = map[string]Profile{
	runner.WorkloadStrict: {Workers: 8, Nemesis: "partition,kill,pause,clock,loss,snapshot,transfer,reconfig"},
	runner.WorkloadWindow: {Workers: 8, Nemesis: "partition,kill,pause,clock,loss,snapshot,transfer"},
	runner.WorkloadLeased: {Workers: 6, Groups: 3, Nemesis: "partition,kill,pause,clock,loss,snapshot,transfer,reconfig,worker,relay"},
	runner.WorkloadMulti:  {Workers: 4, Nemesis: "partition,kill,pause,clock,loss,snapshot,transfer"},
	// templated: the seed draws the template's algorithm (seed mod 3),
	// its key cap, the override and the template's delete and re-put.
	runner.WorkloadTemplated: {Workers: 8, Nemesis: "partition,kill,pause,clock,loss,snapshot,transfer"},
}

// Workloads are the workloads a sweep runs by default, in plan order.
var Workloads = []string{runner.WorkloadStrict, runner.WorkloadWindow, runner.WorkloadLeased, runner.WorkloadMulti, runner.WorkloadTemplated}

// maxSeeds bounds a seed list, so a typo in a range cannot plan years.
const maxSeeds = 10_000

// ParseSeeds parses a seed list: comma-separated seeds and inclusive
// ranges, "1000-1049" or "1,5,20-29". Seeds are kept in the order given,
// without repeats.
func ParseSeeds(s string) ([]uint64, error) {
	var out []uint64
	seen := map[uint64]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: seed %q: want N or N-M (non-negative integers)", ErrInvalid, part)
		}
		to := from
		if isRange {
			if to, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 64); err != nil || to < from {
				return nil, fmt.Errorf("%w: seed range %q: want N-M with N <= M", ErrInvalid, part)
			}
		}
		if to-from >= maxSeeds {
			return nil, fmt.Errorf("%w: seed range %q has more than %d seeds", ErrInvalid, part, maxSeeds)
		}
		for seed := from; ; seed++ {
			if !seen[seed] {
				seen[seed] = true
				out = append(out, seed)
			}
			if seed == to {
				break
			}
		}
		if len(out) > maxSeeds {
			return nil, fmt.Errorf("%w: seeds %q: more than %d", ErrInvalid, s, maxSeeds)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no seeds in %q; want for example 1000-1049", ErrInvalid, s)
	}
	return out, nil
}

// ParseWorkloads parses a comma-separated workload list ("all": every
// workload).
func ParseWorkloads(s string) ([]string, error) {
	if strings.TrimSpace(s) == "all" {
		return slices.Clone(Workloads), nil
	}
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" || slices.Contains(out, w) {
			continue
		}
		if !slices.Contains(Workloads, w) {
			return nil, fmt.Errorf("%w: workload %q; allowed: %s, or all", ErrInvalid, w, strings.Join(Workloads, ", "))
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no workloads in %q", ErrInvalid, s)
	}
	return out, nil
}

// Planned is one run of a plan.
type Planned struct {
	Workload string `json:"workload"`
	Seed     uint64 `json:"seed"`
	Nodes    int    `json:"nodes"`
	Workers  int    `json:"workers"`
	Groups   int    `json:"groups,omitempty"`
	Nemesis  string `json:"nemesis"`
}

// Plan expands seeds × workloads into runs, seed by seed (every workload
// of a seed before the next seed), with each workload's profile; nodes,
// if not 0, fixes the cluster size of every run.
func Plan(seeds []uint64, workloads []string, profiles map[string]Profile, nodes int) ([]Planned, error) {
	var out []Planned
	for _, seed := range seeds {
		for _, w := range workloads {
			p, ok := profiles[w]
			if !ok {
				return nil, fmt.Errorf("%w: no profile for workload %q", ErrInvalid, w)
			}
			n := cmpOr(nodes, p.Nodes)
			if n == 0 {
				n = 3
				if seed%2 == 1 {
					n = 5
				}
			}
			out = append(out, Planned{Workload: w, Seed: seed, Nodes: n, Workers: p.Workers, Groups: p.Groups, Nemesis: p.Nemesis})
		}
	}
	return out, nil
}

// cmpOr returns the first of a, b that is not 0.
func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// Name is the run's directory under the sweep's output, and its label.
func (p Planned) Name() string { return fmt.Sprintf("%s/seed%d", p.Workload, p.Seed) }

// RunConfig is p as one run's configuration.
func (p Planned) RunConfig(c Config, outDir string) (runner.Config, error) {
	specs, err := runner.ParseNemeses(p.Nemesis)
	if err != nil {
		return runner.Config{}, err
	}
	return runner.Config{
		Nodes: p.Nodes, Workers: p.Workers, Groups: p.Groups, Workload: p.Workload, Mode: c.Mode,
		Nemeses: specs, Duration: c.Duration, Seed: p.Seed, OutDir: outDir, PermitdBin: c.PermitdBin,
		ModuleRoot: c.ModuleRoot, Command: p.Replay(c),
	}, nil
}

// Command is the jepsen command line that replays p alone into outDir.
func (p Planned) Command(c Config, outDir string) string {
	args := []string{"go run ./jepsen-lite/cmd/jepsen"}
	if c.PermitdBin != "" {
		args = append(args, "--permitd-bin", c.PermitdBin)
	}
	if c.Mode != "" && c.Mode != runner.ModeAuto {
		args = append(args, "--mode", c.Mode)
	}
	args = append(args, "--nodes", strconv.Itoa(p.Nodes), "--workers", strconv.Itoa(p.Workers))
	if p.Groups > 1 {
		args = append(args, "--groups", strconv.Itoa(p.Groups))
	}
	args = append(args, "--workload", p.Workload, "--nemesis", p.Nemesis,
		"--duration", c.Duration.String(), "--seed", strconv.FormatUint(p.Seed, 10), "--out", outDir)
	return strings.Join(args, " ")
}

// Replay is the command that replays p alone, into /tmp/jl-WORKLOAD-seedS.
func (p Planned) Replay(c Config) string {
	return p.Command(c, "/tmp/jl-"+strings.ReplaceAll(p.Name(), "/", "-"))
}

// expectedWall is how long one run of duration d takes at most in the
// usual case: the workload, the cluster's start and settle, the checks
// and the report (about 10 s on 2 cores, more under load).
func expectedWall(d time.Duration) time.Duration { return d + 30*time.Second }
