// Command leased-scale measures how permitd's leased path scales with the
// number of workers and groups on one leased limit (issue 13, point 4).
//
// The register is real and separate: three `permitd agent` processes on
// loopback (built from ./cmd/permitd unless --permitd names a binary),
// each with its own raft-boltdb data directory in a temporary directory,
// fsync on. The workers are in this process (a thousand worker processes
// do not fit a small machine): transport/worker.Worker, each with its own
// memberlist on loopback UDP/TCP, talking HTTP to the register through one
// shared *client.Client whose first server is the leader. The leader's CPU
// is read from /proc/PID/stat, so it is the register's alone.
//
// For every configuration (workers x groups, a group count above the
// worker count is skipped) it starts a fresh register and fleet, offers an
// open-loop demand of 1.5x the limit's rate split unevenly over the
// groups, waits for a warm-up, and measures over a window: register log
// entries and lease commands per second, the leader's CPU (cores, and
// per lease command), memberlist bytes sent per worker per second, and the
// fairness error of the register's own lease view. Then it measures the
// time to converge after a join (10 % more workers into the smallest
// group), a leave (as many workers stopped from the largest groups) and a
// partition (the smallest group's register calls fail; then healed).
//
// It writes the results as JSON and an SVG chart (see the README's
// "Leased path" section for the definitions and the measured numbers).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// options are the command's flags.
type options struct {
	workers, groups []int
	ratePerWorker   float64
	ttl             time.Duration
	warmup, window  time.Duration
	sampleEvery     time.Duration
	phaseTimeout    time.Duration
	tolerance       float64
	hold            int
	deadline        time.Duration
	startTimeout    time.Duration
	permitd         string
	jsonOut, svgOut string
	fromJSON        string
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func main() {
	var o options
	var workers, groups string
	flag.StringVar(&workers, "workers", "10,100", "worker counts (1000 does not fit a 2-core machine: see the README)")
	flag.StringVar(&groups, "groups", "1,10,50", "group counts (a count above the worker count is skipped)")
	flag.Float64Var(&o.ratePerWorker, "rate-per-worker", 100, "the limit's rate is this times the worker count, permits/s; the fleet is offered 1.5x that")
	flag.DurationVar(&o.ttl, "ttl", 0, "lease TTL (0: the worker's default, 2s, renewed every TTL/2)")
	flag.DurationVar(&o.warmup, "warmup", 4*time.Second, "wait after the fleet started before measuring")
	flag.DurationVar(&o.window, "window", 15*time.Second, "steady-state measurement window")
	flag.DurationVar(&o.sampleEvery, "sample-every", 250*time.Millisecond, "lease view sampling period while waiting for convergence")
	flag.DurationVar(&o.phaseTimeout, "phase-timeout", 30*time.Second, "longest wait for convergence after a join, leave, cut or heal")
	flag.Float64Var(&o.tolerance, "tolerance", 0.02, "converged: every group's share within this fraction of its target (and exactly the right leases active)")
	flag.IntVar(&o.hold, "hold", 4, "converged only if it stays so for this many samples")
	flag.DurationVar(&o.startTimeout, "start-timeout", 150*time.Second, "longest time to start one configuration's workers")
	flag.DurationVar(&o.deadline, "deadline", 20*time.Minute, "hard deadline of the whole sweep")
	flag.StringVar(&o.permitd, "permitd", "", "permitd binary (default: go build ./cmd/permitd into a temporary directory)")
	flag.StringVar(&o.jsonOut, "json", "leased-scale.json", "write the results here (- for stdout, empty for none)")
	flag.StringVar(&o.svgOut, "svg", "leased-scale.svg", "write the chart here (empty for none)")
	flag.StringVar(&o.fromJSON, "from-json", "", "do not measure: redraw the chart and table from this results file")
	flag.Parse()
	var err error
	if o.workers, err = parseInts(workers); err == nil {
		o.groups, err = parseInts(groups)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "leased-scale:", err)
		os.Exit(2)
	}
	// The deadline is hard: a run stuck past it (a worker's Start or
	// Stop that does not return) ends the process; the agents die with it.
	time.AfterFunc(o.deadline+30*time.Second, func() {
		fmt.Fprintln(os.Stderr, "leased-scale: hard deadline passed; exiting")
		os.Exit(3)
	})
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "leased-scale:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	var rep report
	if o.fromJSON != "" {
		b, err := os.ReadFile(o.fromJSON)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", o.fromJSON, err)
		}
	} else {
		sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		ctx, cancel := context.WithTimeout(sigCtx, o.deadline)
		defer cancel()
		tmp, err := os.MkdirTemp("", "leased-scale-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		bin := o.permitd
		if bin == "" {
			if bin, err = buildPermitd(ctx, tmp); err != nil {
				return err
			}
		}
		rep = report{Started: time.Now().UTC().Format(time.RFC3339), TTL: o.ttl.String(), Tolerance: o.tolerance,
			RatePerWorker: o.ratePerWorker, Window: o.window.String(), Warmup: o.warmup.String()}
		if o.ttl == 0 {
			rep.TTL = "2s (default)"
		}
		for _, w := range o.workers {
			for _, g := range o.groups {
				if g > w {
					fmt.Fprintf(os.Stderr, "skip %d workers in %d groups\n", w, g)
					continue
				}
				if ctx.Err() != nil {
					rep.Notes = append(rep.Notes, fmt.Sprintf("%d workers in %d groups: not run, deadline reached", w, g))
					continue
				}
				fmt.Fprintf(os.Stderr, "== %d workers in %d groups\n", w, g)
				res, err := measure(ctx, o, bin, tmp, w, g)
				if err != nil {
					fmt.Fprintf(os.Stderr, "   failed: %v\n", err)
					res.Error = err.Error()
				}
				rep.Results = append(rep.Results, res)
				printRow(os.Stderr, res)
				// Written after every configuration: a sweep cut short keeps
				// what it measured.
				if err := writeJSON(o.jsonOut, rep); err != nil {
					return err
				}
			}
		}
		rep.Growth = growth(rep.Results)
	}
	if o.fromJSON == "" {
		if err := writeJSON(o.jsonOut, rep); err != nil {
			return err
		}
	}
	if o.svgOut != "" {
		f, err := os.Create(o.svgOut)
		if err != nil {
			return err
		}
		if err := writeSVG(f, "permitd leased path: one limit, "+rep.TTL+" TTL, 3-node register on loopback", chartPanels(rep), 3); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	writeTable(os.Stdout, rep)
	return nil
}

// report is the JSON output.
type report struct {
	Started       string             `json:"started"`
	TTL           string             `json:"ttl"`
	RatePerWorker float64            `json:"rate_per_worker"`
	Tolerance     float64            `json:"tolerance"`
	Warmup        string             `json:"warmup"`
	Window        string             `json:"window"`
	Results       []result           `json:"results"`
	Growth        map[string]float64 `json:"growth_exponents,omitempty"`
	Notes         []string           `json:"notes,omitempty"`
}

// result is one configuration's measurements. Times are seconds; -1: not
// converged within the phase timeout.
type result struct {
	Workers int     `json:"workers"`
	Groups  int     `json:"groups"`
	Rate    float64 `json:"rate_permits_per_sec"`
	StartS  float64 `json:"start_seconds"`

	WindowS            float64 `json:"window_seconds"`
	EntriesPerSec      float64 `json:"raft_entries_per_sec"`
	CommandsPerSec     float64 `json:"lease_commands_per_sec"`
	RenewalsPerSec     float64 `json:"renewals_per_sec"`
	LeaderCores        float64 `json:"leader_cores"`
	LeaderIdleCores    float64 `json:"leader_idle_cores"`
	LeaderRenewalCores float64 `json:"leader_renewal_cores"`
	FollowerCores      float64 `json:"follower_cores_max"`
	LeaderUsPerCommand float64 `json:"leader_cpu_us_per_command"`
	GossipBytesPerWS   float64 `json:"gossip_bytes_per_worker_per_sec"`
	FairnessErr        float64 `json:"fairness_error"`
	FairnessErrGroup   string  `json:"fairness_error_group"`
	TargetErr          float64 `json:"target_error"`
	SpentPerSec        float64 `json:"spent_permits_per_sec"`

	JoinS      float64 `json:"converge_join_seconds"`
	LeaveS     float64 `json:"converge_leave_seconds"`
	CutS       float64 `json:"converge_cut_seconds"`
	HealS      float64 `json:"converge_heal_seconds"`
	JoinErr    float64 `json:"join_final_error"`
	LeaveErr   float64 `json:"leave_final_error"`
	CutErr     float64 `json:"cut_final_error"`
	HealErr    float64 `json:"heal_final_error"`
	Changed    int     `json:"workers_joined_and_left"`
	CutWorkers int     `json:"workers_cut"`

	Error string `json:"error,omitempty"`
}

// measure runs one configuration on a fresh register and fleet.
func measure(ctx context.Context, o options, bin, tmp string, nWorkers, nGroups int) (res result, err error) {
	res = result{Workers: nWorkers, Groups: nGroups, JoinS: -1, LeaveS: -1, CutS: -1, HealS: -1}
	dir, err := os.MkdirTemp(tmp, fmt.Sprintf("w%d-g%d-", nWorkers, nGroups))
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	reg, err := startRegister(ctx, bin, dir)
	if err != nil {
		return res, err
	}
	defer reg.stop()

	// The leader's CPU with no workers: raft heartbeats and timers.
	idle := 3 * time.Second
	c0, err := reg.cpuSeconds(reg.leaderPID())
	if err != nil {
		return res, err
	}
	if err := sleep(ctx, idle); err != nil {
		return res, err
	}
	c1, _ := reg.cpuSeconds(reg.leaderPID())
	res.LeaderIdleCores = (c1 - c0) / idle.Seconds()

	const limit = "scale"
	rate := o.ratePerWorker * float64(nWorkers)
	res.Rate = rate
	if _, err := reg.cl.PutLimit(ctx, limit, client.LimitSpec{Algorithm: "strict", Rate: rate, Per: time.Second}); err != nil {
		return res, fmt.Errorf("put limit: %w", err)
	}
	if _, err := reg.cl.PutLeasePolicy(ctx, limit, client.LeasePolicy{Leased: true}); err != nil {
		return res, fmt.Errorf("lease policy: %w", err)
	}
	rateMilli := int64(math.Round(rate * 1000))

	f := &fleet{limit: limit, reg: reg, ttl: o.ttl}
	defer func() {
		_ = parallel(f.live(), 32, func(m *member) error { f.stopMember(m); return nil })
	}()
	demands := groupDemands(1.5*rate, nGroups)
	perGroup := make([]int, nGroups)
	for i := range nWorkers {
		perGroup[i%nGroups]++
	}
	type spec struct {
		name, group string
		demand      float64
	}
	var specs []spec
	for i := range nWorkers {
		g := i % nGroups
		specs = append(specs, spec{fmt.Sprintf("w%04d", i), groupName(g), demands[g] / float64(perGroup[g])})
	}
	start := time.Now()
	startOne := func(s spec) error {
		_, err := f.startMember(ctx, s.name, s.group, s.demand)
		if err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		return nil
	}
	first := min(3, len(specs))
	for _, s := range specs[:first] {
		if err := startOne(s); err != nil {
			return res, err
		}
	}
	var started atomic.Int64
	startCtx, cancelStart := context.WithTimeout(ctx, o.startTimeout)
	defer cancelStart()
	if err := parallel(specs[first:], 16, func(s spec) error {
		if startCtx.Err() != nil {
			return fmt.Errorf("%d of %d workers started within %v", started.Load()+int64(first), nWorkers, o.startTimeout)
		}
		if err := startOne(s); err != nil {
			return err
		}
		if n := started.Add(1) + int64(first); n%100 == 0 {
			fmt.Fprintf(os.Stderr, "   %d workers started after %.1f s\n", n, time.Since(start).Seconds())
		}
		return nil
	}); err != nil {
		return res, err
	}
	res.StartS = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "   %d workers started in %.1f s\n", nWorkers, res.StartS)
	if err := sleep(ctx, o.warmup); err != nil {
		return res, err
	}

	// target is the division the register should reach: the max-min
	// division of what the live, connected workers report, which is
	// their offered demand plus the worker's 10 % headroom; and the
	// holders that should have an active lease.
	target := func() (map[string]int64, []string) {
		d := map[string]int64{}
		var names []string
		for _, m := range f.live() {
			if m.cut.Load() {
				continue
			}
			milli := int64(m.demand * 1000)
			d[m.group] += milli + milli/10
			names = append(names, m.name)
		}
		slices.Sort(names)
		fair, _ := fairShares(rateMilli, d, nil)
		return fair, names
	}

	// Steady state.
	view := func() (client.LeasePool, error) {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return reg.cl.Leases(c, limit)
	}
	p0, err := view()
	if err != nil {
		return res, fmt.Errorf("lease view: %w", err)
	}
	s0, err := reg.leaderStatus(ctx)
	if err != nil {
		return res, err
	}
	cpu0, err := reg.allCPU()
	if err != nil {
		return res, err
	}
	g0, granted0, t0 := f.gossipOut.Load(), f.granted.Load(), time.Now()
	const fairnessSamples = 5
	for k := range fairnessSamples {
		if err := sleep(ctx, o.window/fairnessSamples); err != nil {
			return res, err
		}
		if k == fairnessSamples-1 {
			break // the last reading is the window's end
		}
		p, err := view()
		if err != nil {
			return res, fmt.Errorf("lease view: %w", err)
		}
		res.noteFairness(p, rateMilli, target)
	}
	cpu1, err := reg.allCPU()
	if err != nil {
		return res, err
	}
	g1, granted1, t1 := f.gossipOut.Load(), f.granted.Load(), time.Now()
	s1, err := reg.leaderStatus(ctx)
	if err != nil {
		return res, err
	}
	p1, err := view()
	if err != nil {
		return res, err
	}
	res.noteFairness(p1, rateMilli, target)
	win := t1.Sub(t0).Seconds()
	res.WindowS = win
	res.EntriesPerSec = float64(s1.AppliedIndex-s0.AppliedIndex) / win
	cmds := (p1.LeasesOpened + p1.Renewals + p1.Returns + p1.Fenced) - (p0.LeasesOpened + p0.Renewals + p0.Returns + p0.Fenced)
	res.CommandsPerSec = float64(cmds) / win
	res.RenewalsPerSec = float64(p1.Renewals-p0.Renewals) / win
	lcpu := cpu1[reg.leader] - cpu0[reg.leader]
	res.LeaderCores = lcpu / win
	for i := range cpu0 {
		if i != reg.leader {
			res.FollowerCores = max(res.FollowerCores, (cpu1[i]-cpu0[i])/win)
		}
	}
	res.LeaderRenewalCores = max(res.LeaderCores-res.LeaderIdleCores, 0)
	if cmds > 0 {
		res.LeaderUsPerCommand = res.LeaderRenewalCores * win / float64(cmds) * 1e6
	}
	res.GossipBytesPerWS = float64(g1-g0) / float64(nWorkers) / win
	res.SpentPerSec = float64(granted1-granted0) / win

	// Join: 10 % more workers (at least one) in the smallest group, with
	// its workers' demand.
	n := max(1, nWorkers/10)
	res.Changed = n
	var joins []spec
	for k := range n {
		joins = append(joins, spec{fmt.Sprintf("j%04d", k), groupName(0), demands[0] / float64(perGroup[0])})
	}
	res.JoinS, res.JoinErr, err = phase(ctx, o, view, rateMilli, target, func() error { return parallel(joins, 16, startOne) })
	if err != nil {
		return res, fmt.Errorf("join: %w", err)
	}
	// Leave: as many original workers stopped, from the largest groups.
	var leaving []*member
	for g := nGroups - 1; g >= 0 && len(leaving) < n; g-- {
		for _, m := range f.live() {
			if m.group == groupName(g) && strings.HasPrefix(m.name, "w") && len(leaving) < n {
				leaving = append(leaving, m)
			}
		}
	}
	res.LeaveS, res.LeaveErr, err = phase(ctx, o, view, rateMilli, target, func() error {
		return parallel(leaving, 32, func(m *member) error { f.stopMember(m); return nil })
	})
	if err != nil {
		return res, fmt.Errorf("leave: %w", err)
	}
	// Partition: the smallest group's register calls fail, then succeed
	// again. With one group, half its workers are cut off instead (cutting
	// the whole fleet leaves the register's view as it was: expiry is
	// applied with the next log entry, and none comes).
	var cut []*member
	for i, m := range f.live() {
		if (nGroups > 1 && m.group == groupName(0)) || (nGroups == 1 && i%2 == 0) {
			cut = append(cut, m)
		}
	}
	res.CutWorkers = len(cut)
	setCut := func(v bool) error {
		for _, m := range cut {
			m.cut.Store(v)
		}
		return nil
	}
	res.CutS, res.CutErr, err = phase(ctx, o, view, rateMilli, target, func() error { return setCut(true) })
	if err != nil {
		return res, fmt.Errorf("cut: %w", err)
	}
	res.HealS, res.HealErr, err = phase(ctx, o, view, rateMilli, target, func() error { return setCut(false) })
	if err != nil {
		return res, fmt.Errorf("heal: %w", err)
	}
	return res, nil
}

// noteFairness records the fairness errors of one lease view: against
// the register's own division of its reported demands, and against the
// target division of the offered demands (with the worker's headroom).
func (r *result) noteFairness(p client.LeasePool, rateMilli int64, target func() (map[string]int64, []string)) {
	v := groupsOf(p.Leases)
	if e, g, err := registerFairnessError(v, rateMilli); err == nil && e >= r.FairnessErr {
		r.FairnessErr, r.FairnessErrGroup = e, g
	}
	fair, _ := target()
	e, _ := fairnessError(v, fair, rateMilli)
	r.TargetErr = max(r.TargetErr, e)
}

// phase runs event, then samples the register's lease view every
// sampleEvery until the fleet has converged (convergedAt with the
// tolerance and hold) or the phase timeout passed. It returns the time to
// converge in seconds (-1: not within the timeout) and the last sample's
// error against the target.
func phase(ctx context.Context, o options, view func() (client.LeasePool, error), rateMilli int64,
	target func() (map[string]int64, []string), event func() error) (float64, float64, error) {
	start := time.Now()
	if err := event(); err != nil {
		return -1, -1, err
	}
	var samples []sample
	for time.Since(start) < o.phaseTimeout {
		at := time.Since(start)
		p, err := view()
		if err != nil {
			if ctx.Err() != nil {
				return -1, -1, ctx.Err()
			}
			continue
		}
		v := groupsOf(p.Leases)
		fair, names := target()
		e, _ := fairnessError(v, fair, rateMilli)
		var holders []string
		for _, g := range v {
			holders = append(holders, g.HoldersInGroup...)
		}
		slices.Sort(holders)
		samples = append(samples, sample{AtNanos: int64(at), Err: e, Members: sameSet(holders, names)})
		if c := convergedAt(samples, o.tolerance, o.hold); c >= 0 {
			return time.Duration(c).Seconds(), e, nil
		}
		if err := sleep(ctx, o.sampleEvery-time.Since(start.Add(at))); err != nil {
			return -1, -1, err
		}
	}
	last := -1.0
	if len(samples) > 0 {
		last = samples[len(samples)-1].Err
	}
	return -1, last, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func printRow(w io.Writer, r result) {
	fmt.Fprintf(w, "   entries/s %.1f  commands/s %.1f  leader %.3f cores (idle %.3f)  %.0f µs/command  gossip %.0f B/worker/s  fairness %.2f %% (target %.2f %%)  join %.1f s  leave %.1f s  cut %.1f s  heal %.1f s\n",
		r.EntriesPerSec, r.CommandsPerSec, r.LeaderCores, r.LeaderIdleCores, r.LeaderUsPerCommand, r.GossipBytesPerWS,
		100*r.FairnessErr, 100*r.TargetErr, r.JoinS, r.LeaveS, r.CutS, r.HealS)
}

// writeJSON writes the report to path (- for stdout, empty for nowhere).
func writeJSON(path string, rep report) error {
	if path == "" || (path == "-" && rep.Growth == nil) {
		return nil
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	b = append(b, '\n')
	if path == "-" {
		_, err := os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
