package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/permitd/permitd/node"
)

// overload.go: permitd bench --mode overload, the overload
// measurement as one command. On one cluster:
//
//  1. a closed-loop warm-up pass, not counted;
//  2. --capacity-passes closed-loop passes of --capacity-duration at
//     --capacity-concurrency: the capacity before;
//  3. an open loop at --overload-factor x the median of those passes,
//     for --duration, with --concurrency outstanding;
//  4. the same closed-loop passes again: the capacity after.
//
// Every pass and the open loop start with --warmup. The capacity is the
// median of every pass, before and after. A single closed-loop pass is a
// poor denominator on a shared virtual machine: six consecutive 4 s
// passes on one idle cluster of the 2-vCPU machine this was built on
// read 8 500 down to 6 701 decisions/s while the machine's CPU steal
// rose from 1 to 9 %, which bench therefore reports for every phase.
//
// With --control the open loop is replaced by a closed loop like the
// passes, at --capacity-concurrency for --duration: nothing is
// overloaded, so its ratio to the capacity is what the method itself
// reads on this machine. Runs with and without --control, alternated on
// fresh clusters, separate what the overload costs from how far the
// machine's speed drifts between the passes and the middle phase.

// OverloadResult is bench --mode overload's report.
type OverloadResult struct {
	// Factor is the open loop's rate in multiples of the capacity
	// measured before it.
	Factor float64 `json:"factor"`
	// Control is true when the middle phase was a closed loop at the
	// passes' concurrency (--control) instead of the open loop; Factor
	// and OfferedRPS are then 0.
	Control bool `json:"control"`
	// CapacityBeforeRPS and CapacityAfterRPS are the closed-loop passes'
	// goodputs, decisions/s; CapacityRPS is the median of all of them.
	CapacityBeforeRPS []float64 `json:"capacity_before_rps"`
	CapacityAfterRPS  []float64 `json:"capacity_after_rps"`
	CapacityRPS       float64   `json:"capacity_rps"`
	// OfferedRPS is the open loop's target rate: Factor x the median
	// before (Open.ThroughputRPS is what it sent).
	OfferedRPS float64 `json:"offered_rps"`
	// Open is the middle phase's report: the open loop's, or with
	// Control the closed loop's; GoodputRatio its goodput over
	// CapacityRPS.
	Open         Result  `json:"open"`
	GoodputRatio float64 `json:"goodput_ratio"`
	// StealPct is the CPU steal of the machine bench runs on (the time
	// its virtual CPUs waited while the hypervisor ran something else,
	// in percent of all its CPUs' time) over the passes before, the open
	// loop and the passes after; -1 where /proc/stat cannot be read. It
	// is the cluster's too only when bench shares its machine.
	StealPct [3]float64 `json:"steal_pct"`
	// GeneratorCores is bench's own CPU time over the same phases'
	// wall time, in cores; -1 where it cannot be read. On a machine
	// shared with the cluster, what the open loop takes beyond the
	// passes is taken from the nodes.
	GeneratorCores [3]float64 `json:"generator_cores"`
	// ReservesPerBatch is the mean reserves a reserve entry carried and
	// CommitMillis the mean time an entry took from submission to
	// applied, over the same phases, from the --servers' /v1/status
	// (commits.go: the leader must be among them); -1 where they
	// could not be read, and CommitReadError then says why (the first
	// failed reading). Short batches under overload are the node's doing;
	// slower commits of full ones are its disk's and its machine's.
	ReservesPerBatch [3]float64 `json:"reserves_per_batch"`
	CommitMillis     [3]float64 `json:"commit_ms"`
	CommitReadError  string     `json:"commit_read_error,omitempty"`
	// LeaderHeld is "yes" if the open loop ended with the leader and
	// term it started with, "no" if not, "unknown" if either was not
	// read.
	LeaderHeld string `json:"leader_held"`
}

// benchRunner runs one bench pass (bench, or a test's fake).
type benchRunner func(context.Context, Config) (Result, error)

// Overload runs the overload measurement described above on
// the cluster of b: each pass with bench, reading the machine, this
// process and the nodes between phases.
func Overload(ctx context.Context, b Config) (OverloadResult, error) {
	return overload(ctx, b, Run, phaseSampler(ctx, b))
}

// overload runs the overload measurement described above, each pass
// with run, reading the machine between phases with sample.
func overload(ctx context.Context, b Config, run benchRunner, sample func() phaseSample) (OverloadResult, error) {
	res := OverloadResult{Factor: b.OverloadFactor, Control: b.Control}
	p := capacityPasses{b: b, run: run, closed: b}
	p.closed.Mode, p.closed.Concurrency = "closed", b.CapacityConcurrency
	p.closed.Duration, p.closed.MaxRequests = b.CapacityDuration, 0
	// The warm-up pass: a fresh cluster's first seconds (its log file
	// growing, its connections and goroutines starting) are not its
	// capacity.
	if _, err := p.pass(ctx, "the warm-up pass"); err != nil {
		return res, err
	}
	var s [4]phaseSample
	s[0] = sample()
	var err error
	if res.CapacityBeforeRPS, err = p.passes(ctx, "before"); err != nil {
		return res, err
	}
	s[1] = sample()
	res.OfferedRPS = b.OverloadFactor * median(res.CapacityBeforeRPS)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted before the %s: %w", middleName(b.Control), err)
	}
	middle := b
	middle.Mode, middle.OpenRate, middle.Create = "open", res.OfferedRPS, false
	if b.Control {
		res.Factor, res.OfferedRPS = 0, 0
		middle = p.closed
		middle.Duration = b.Duration
	}
	if res.Open, err = run(ctx, middle); err != nil {
		return res, fmt.Errorf("the %s: %w", middleName(b.Control), err)
	}
	s[2] = sample()
	if res.CapacityAfterRPS, err = p.passes(ctx, "after"); err != nil {
		return res, err
	}
	s[3] = sample()
	res.summarize(s)
	return res, nil
}

// capacityPasses runs overload's closed-loop passes (closed: b's
// settings for them) with run.
type capacityPasses struct {
	b      Config
	run    benchRunner
	closed Config
}

// pass runs one closed-loop pass and returns its goodput; what names it
// in an error. A pass that decided nothing, or had more than 1% errors,
// is an error. Only the first pass creates the limits.
func (p *capacityPasses) pass(ctx context.Context, what string) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("interrupted before %s: %w", what, err)
	}
	r, err := p.run(ctx, p.closed)
	p.closed.Create = false
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if r.Requests == 0 || r.GoodputRPS <= 0 {
		return 0, fmt.Errorf("%s: no reserve was decided in %v (is the cluster up and --limit reservable, with --capacity-concurrency at most the nodes' bound?)", what, p.b.CapacityDuration)
	}
	if r.Errors > r.Requests/100 {
		return 0, fmt.Errorf("%s: %d errors in %d requests, more than the 1%% allowed (first: %s)", what, r.Errors, r.Requests, r.FirstError)
	}
	return r.GoodputRPS, nil
}

// passes runs --capacity-passes passes, when ("before" or "after") the
// open loop, and returns their goodputs.
func (p *capacityPasses) passes(ctx context.Context, when string) ([]float64, error) {
	var out []float64
	for k := range p.b.CapacityPasses {
		g, err := p.pass(ctx, fmt.Sprintf("capacity pass %d of %d %s the open loop", k+1, p.b.CapacityPasses, when))
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// summarize fills in what the passes, the middle phase and the samples
// s taken between the phases give: the capacity and the goodput ratio,
// each phase's steal, generator CPU and reserve entries, and whether the
// leader held.
func (res *OverloadResult) summarize(s [4]phaseSample) {
	// Every pass decided something: the median is > 0.
	res.CapacityRPS = median(append(slices.Clone(res.CapacityBeforeRPS), res.CapacityAfterRPS...))
	res.GoodputRatio = res.Open.GoodputRPS / res.CapacityRPS
	for i := range 3 {
		from, to := s[i], s[i+1]
		res.StealPct[i] = from.ticks.pctUntil(to.ticks)
		res.GeneratorCores[i] = from.coresUntil(to)
		res.ReservesPerBatch[i] = from.commits.batchUntil(to.commits)
		res.CommitMillis[i] = from.commits.commitMillisUntil(to.commits)
	}
	res.CommitReadError = firstCommitError(s[0].commits, s[1].commits, s[2].commits, s[3].commits)
	switch o := res.Open; {
	case o.LeaderBefore == "" || o.LeaderAfter == "":
		res.LeaderHeld = "unknown"
	case o.LeaderBefore == o.LeaderAfter && o.TermBefore == o.TermAfter:
		res.LeaderHeld = "yes"
	default:
		res.LeaderHeld = "no"
	}
}

// PrintOverload prints an overload report as text.
func PrintOverload(w io.Writer, r OverloadResult) {
	fmt.Fprintf(w, "capacity (closed loop, median of %d passes) %.0f decisions/s; before %s, after %s\n",
		len(r.CapacityBeforeRPS)+len(r.CapacityAfterRPS), r.CapacityRPS, rates(r.CapacityBeforeRPS), rates(r.CapacityAfterRPS))
	if r.Control {
		fmt.Fprintf(w, "control: a closed loop like the passes in place of the open loop (nothing overloaded), sent %.0f/s\n", r.Open.ThroughputRPS)
	} else {
		fmt.Fprintf(w, "open loop at %.3g x the capacity before: offered %.0f/s, sent %.0f/s\n", r.Factor, r.OfferedRPS, r.Open.ThroughputRPS)
	}
	PrintResult(w, r.Open)
	fmt.Fprintf(w, "goodput %.1f%% of capacity; leader held: %s; this machine's CPU steal before / during / after: %s; bench's own CPU: %s cores\n",
		100*r.GoodputRatio, r.LeaderHeld, perPhase(r.StealPct, 1, "%"), perPhase(r.GeneratorCores, 2, ""))
	fmt.Fprintf(w, "reserve entries before / during / after (the nodes' /v1/status): %s reserves each, committed in %s ms\n",
		perPhase(r.ReservesPerBatch, 1, ""), perPhase(r.CommitMillis, 2, ""))
	if r.CommitReadError != "" {
		fmt.Fprintf(w, "(the reserve entries: %s)\n", r.CommitReadError)
	}
}

// middleName names the phase between the passes.
func middleName(control bool) string {
	if control {
		return "control closed loop"
	}
	return "open loop"
}

func rates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, ", ")
}

// perPhase formats the readings of the three phases with digits
// decimals and unit, "unknown" for a negative (unreadable) one.
func perPhase(xs [3]float64, digits int, unit string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		if x < 0 {
			parts[i] = "unknown"
		} else {
			parts[i] = strconv.FormatFloat(x, 'f', digits, 64) + unit
		}
	}
	return strings.Join(parts, " / ")
}

// median is the middle of xs (the mean of the two middle ones for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// phaseSample is what bench reads between two phases: the machine's CPU
// ticks, bench's own CPU time, the wall clock and the nodes'
// reserve-commit counters.
type phaseSample struct {
	ticks   cpuTicks
	selfCPU time.Duration // -1 if unreadable
	at      time.Time
	commits commitReading
}

// phaseSampler returns what reads the machine, this process and the
// nodes of --servers now.
func phaseSampler(ctx context.Context, b Config) func() phaseSample {
	hc := benchHTTPClient(1, b.TLS)
	servers := b.Servers
	return func() phaseSample {
		// The nodes first, then the machine: the status reads (a few
		// milliseconds, at most statusReadTimeout) then count in the
		// wall time of the phase that just ended, not of the next.
		commits := readCommits(ctx, hc, servers, b)
		return phaseSample{ticks: readSteal(), selfCPU: readSelfCPU(), at: time.Now(), commits: commits}
	}
}

// readSelfCPU is this process's user and system CPU time, -1 if it
// cannot be read.
func readSelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// coresUntil is this process's CPU time between s and later over the
// wall time between them, or -1 if either reading failed or no time
// passed.
func (s phaseSample) coresUntil(later phaseSample) float64 {
	wall := later.at.Sub(s.at)
	if s.selfCPU < 0 || later.selfCPU < s.selfCPU || wall <= 0 {
		return -1
	}
	return float64(later.selfCPU-s.selfCPU) / float64(wall)
}

// cpuTicks is the machine's CPU time from /proc/stat's "cpu" line, in
// clock ticks: steal and the total of every field; ok false where it
// cannot be read.
type cpuTicks struct {
	steal, total uint64
	ok           bool
}

// readSteal reads this machine's CPU ticks from /proc/stat.
func readSteal() cpuTicks {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTicks{}
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	return parseCPUTicks(line)
}

// parseCPUTicks reads the aggregate "cpu" line of /proc/stat: user nice
// system idle iowait irq softirq steal [guest guest_nice]. Guest time is
// already counted in user and nice, so only the first eight fields make
// the total.
func parseCPUTicks(line string) cpuTicks {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}
	}
	var t cpuTicks
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTicks{}
		}
		t.total += v
		if i == 7 {
			t.steal = v
		}
	}
	t.ok = true
	return t
}

// pctUntil is the steal between t and later as a percentage of all CPU
// time then, or -1 if either reading failed or no time passed.
func (t cpuTicks) pctUntil(later cpuTicks) float64 {
	if !t.ok || !later.ok || later.total <= t.total || later.steal < t.steal {
		return -1
	}
	return 100 * float64(later.steal-t.steal) / float64(later.total-t.total)
}

// The defaults of the flags of --mode overload.
const (
	DefaultOverloadFactor      = 3
	DefaultCapacityPasses      = 3
	DefaultCapacityDuration    = 5 * time.Second
	DefaultCapacityConcurrency = node.DefaultMaxPendingReserves
	// DefaultOverloadConcurrency is --concurrency in overload mode when
	// it is not given: outstanding requests enough for the open loop to
	// overload any bound the capacity passes can fill.
	DefaultOverloadConcurrency = 32768
	// MaxOverloadFactor bounds --overload-factor.
	MaxOverloadFactor = 100
)
