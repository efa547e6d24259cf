package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/cmd/internal/cluster"
	"github.com/permitd/permitd/transport/client"
)

// measure.go: one configuration measured — start the register and the
// fleet, wait for convergence, then time a join, a leave, a cut and a
// heal, each until the shares are fair again.

// setup is where a sweep runs: the permitd binary its registers run and
// the temporary directory their data directories go in.
type setup struct{ bin, tmp string }

// scaleLimit is the leased limit every configuration measures.
const scaleLimit = "scale"

// putLeasedLimit makes scaleLimit a strict limit of rate permits/s, and
// leased.
func putLeasedLimit(ctx context.Context, reg *register, rate float64) error {
	if _, err := reg.Client.PutLimit(ctx, scaleLimit, client.LimitSpec{Algorithm: "strict", Rate: rate, Per: time.Second}); err != nil {
		return fmt.Errorf("put limit: %w", err)
	}
	if _, err := reg.Client.PutLeasePolicy(ctx, scaleLimit, client.LeasePolicy{Leased: true}); err != nil {
		return fmt.Errorf("lease policy: %w", err)
	}
	return nil
}

// groupSplit divides demand between nGroups groups (groupDemands) and n
// holders between the groups, holder i in group i mod nGroups: it
// returns each group's demand and holders.
func groupSplit(demand float64, n, nGroups int) (demands []float64, perGroup []int) {
	demands = groupDemands(demand, nGroups)
	perGroup = make([]int, nGroups)
	for i := range n {
		perGroup[i%nGroups]++
	}
	return demands, perGroup
}

// measurement is one configuration of the sweep as it runs: the options,
// the register and the fleet, the limit's rate in millipermits/s, each
// group's demand and workers, and the result so far.
type measurement struct {
	o                 options
	reg               *register
	f                 *fleet
	nWorkers, nGroups int
	rateMilli         int64
	demands           []float64
	perGroup          []int
	res               *result
}

// workerSpec is a worker to start: its name, group and demand.
type workerSpec struct {
	name, group string
	demand      float64
}

// measure runs one configuration on a fresh register and fleet.
func measure(ctx context.Context, o options, s setup, nWorkers, nGroups int) (res result, err error) {
	res = result{Workers: nWorkers, Groups: nGroups, JoinS: -1, LeaveS: -1, CutS: -1, HealS: -1}
	dir, err := os.MkdirTemp(s.tmp, fmt.Sprintf("w%d-g%d-", nWorkers, nGroups))
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	reg, err := cluster.Start(ctx, s.bin, dir)
	if err != nil {
		return res, err
	}
	defer reg.Stop()

	// The leader's CPU with no workers: raft heartbeats and timers.
	if res.LeaderIdleCores, _, err = idleCores(ctx, reg); err != nil {
		return res, err
	}
	rate := o.ratePerWorker * float64(nWorkers)
	res.Rate = rate
	if err := putLeasedLimit(ctx, reg, rate); err != nil {
		return res, err
	}
	m := &measurement{o: o, reg: reg, nWorkers: nWorkers, nGroups: nGroups, rateMilli: int64(math.Round(rate * 1000)), res: &res,
		f: &fleet{limit: scaleLimit, reg: reg, ttl: o.ttl, rejoinEvery: o.rejoinEvery, opts: o}}
	m.demands, m.perGroup = groupSplit(1.5*rate, nWorkers, nGroups)
	stop, err := m.startFleet(ctx, s.bin)
	defer stop()
	if err != nil {
		return res, err
	}
	if err := m.steadyState(ctx); err != nil {
		return res, err
	}
	if err := m.changes(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// startFleet starts what the fleet needs as the options say (relays,
// shared clients, an in-memory gossip network), then its workers, and
// waits for the warm-up. stop stops what it started, also after an
// error.
func (m *measurement) startFleet(ctx context.Context, bin string) (stop func(), err error) {
	f, o := m.f, m.o
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if o.relays > 0 {
		if f.relays, err = startRelays(ctx, bin, m.reg, o.relays); err != nil {
			return stop, err
		}
		stops = append(stops, f.relays.stop)
	}
	if o.clients > 0 {
		if f.shared, err = holderClients(m.reg, o, o.clients, f.relays); err != nil {
			return stop, err
		}
		stops = append(stops, func() { closeClients(f.shared) })
	}
	if o.gossip == "mem" {
		f.mem = newMemNetwork()
	}
	stops = append(stops, func() {
		_ = parallel(f.live(), 32, func(mb *member) error { f.stopMember(mb); return nil })
	})
	if err := m.startWorkers(ctx); err != nil {
		return stop, err
	}
	return stop, sleep(ctx, o.warmup)
}

// startOne starts the worker s.
func (m *measurement) startOne(ctx context.Context, s workerSpec) error {
	if _, err := m.f.startMember(ctx, s.name, s.group, s.demand); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	return nil
}

// startWorkers starts the configuration's workers: three first, the
// gossip's seeds, then the others, o.startParallel at once, within
// o.startTimeout.
func (m *measurement) startWorkers(ctx context.Context) error {
	var specs []workerSpec
	for i := range m.nWorkers {
		g := i % m.nGroups
		specs = append(specs, workerSpec{fmt.Sprintf("w%04d", i), groupName(g), m.demands[g] / float64(m.perGroup[g])})
	}
	start := time.Now()
	first := min(3, len(specs))
	for _, s := range specs[:first] {
		if err := m.startOne(ctx, s); err != nil {
			return err
		}
	}
	var started atomic.Int64
	startCtx, cancelStart := context.WithTimeout(ctx, m.o.startTimeout)
	defer cancelStart()
	if err := parallel(specs[first:], m.o.startParallel, func(s workerSpec) error {
		if startCtx.Err() != nil {
			return fmt.Errorf("%d of %d workers started within %v", started.Load()+int64(first), m.nWorkers, m.o.startTimeout)
		}
		if err := m.startOne(ctx, s); err != nil {
			return err
		}
		if n := started.Add(1) + int64(first); n%100 == 0 {
			fmt.Fprintf(os.Stderr, "   %d workers started after %.1f s%s\n", n, time.Since(start).Seconds(), m.f.dropNote())
		}
		return nil
	}); err != nil {
		return err
	}
	m.res.StartS = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "   %d workers started in %.1f s\n", m.nWorkers, m.res.StartS)
	return nil
}

// target is the division the register should reach: the max-min
// division of what the live, connected workers report, which is their
// offered demand plus the worker's 10 % headroom; and the holders that
// should have an active lease.
func (m *measurement) target() (map[string]int64, []string) {
	d := map[string]int64{}
	var names []string
	for _, mb := range m.f.live() {
		if mb.cut.Load() {
			continue
		}
		milli := int64(mb.demand * 1000)
		d[mb.group] += milli + milli/10
		names = append(names, mb.name)
	}
	slices.Sort(names)
	fair, _ := fairShares(m.rateMilli, d, nil)
	return fair, names
}

// view reads the register's lease view of the limit.
func (m *measurement) view(ctx context.Context) (client.LeasePool, error) {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m.reg.Client.Leases(c, scaleLimit)
}

// windowReading is what the steady state's window starts or ends with:
// the lease view, the leader's status, every node's CPU seconds, the
// fleet's gossip bytes and permits, and when.
type windowReading struct {
	pool            client.LeasePool
	status          client.Status
	cpu             []float64
	gossip, granted int64
	at              time.Time
}

// steadyState measures the fleet over o.window: the register's log
// entries, lease commands and CPU, the gossip, the permits spent, and
// the fairness of the division sampled in between.
func (m *measurement) steadyState(ctx context.Context) error {
	var w0, w1 windowReading
	var err error
	if w0.pool, err = m.view(ctx); err != nil {
		return fmt.Errorf("lease view: %w", err)
	}
	if w0.status, err = m.reg.LeaderStatus(ctx); err != nil {
		return err
	}
	if w0.cpu, err = m.reg.AllCPU(); err != nil {
		return err
	}
	w0.gossip, w0.granted, w0.at = m.f.gossipOut.Load(), m.f.granted.Load(), time.Now()
	fmt.Fprintf(os.Stderr, "   window start: %d gossip bytes%s\n", w0.gossip, m.f.dropNote())
	const fairnessSamples = 5
	for k := range fairnessSamples {
		if err := sleep(ctx, m.o.window/fairnessSamples); err != nil {
			return err
		}
		if k == fairnessSamples-1 {
			break // the last reading is the window's end
		}
		p, err := m.view(ctx)
		if err != nil {
			return fmt.Errorf("lease view: %w", err)
		}
		m.res.noteFairness(p, m.rateMilli, m.target)
	}
	if w1.cpu, err = m.reg.AllCPU(); err != nil {
		return err
	}
	w1.gossip, w1.granted, w1.at = m.f.gossipOut.Load(), m.f.granted.Load(), time.Now()
	fmt.Fprintf(os.Stderr, "   window end: %d gossip bytes%s\n", w1.gossip, m.f.dropNote())
	if w1.status, err = m.reg.LeaderStatus(ctx); err != nil {
		return err
	}
	if w1.pool, err = m.view(ctx); err != nil {
		return err
	}
	m.res.noteFairness(w1.pool, m.rateMilli, m.target)
	m.res.noteWindow(w0, w1, m.reg.Leader, m.nWorkers)
	return nil
}

// noteWindow records the steady state's rates between w0 and w1: the
// log entries, lease commands and renewals, the leader's (leader is its
// index) and the busiest follower's CPU, the gossip per worker and the
// permits spent.
func (r *result) noteWindow(w0, w1 windowReading, leader, nWorkers int) {
	win := w1.at.Sub(w0.at).Seconds()
	r.WindowS = win
	r.EntriesPerSec = float64(w1.status.AppliedIndex-w0.status.AppliedIndex) / win
	p0, p1 := w0.pool, w1.pool
	cmds := (p1.LeasesOpened + p1.Renewals + p1.Returns + p1.Fenced) - (p0.LeasesOpened + p0.Renewals + p0.Returns + p0.Fenced)
	r.CommandsPerSec = float64(cmds) / win
	r.RenewalsPerSec = float64(p1.Renewals-p0.Renewals) / win
	r.LeaderCores = (w1.cpu[leader] - w0.cpu[leader]) / win
	for i := range w0.cpu {
		if i != leader {
			r.FollowerCores = max(r.FollowerCores, (w1.cpu[i]-w0.cpu[i])/win)
		}
	}
	r.LeaderRenewalCores = max(r.LeaderCores-r.LeaderIdleCores, 0)
	if cmds > 0 {
		r.LeaderUsPerCommand = r.LeaderRenewalCores * win / float64(cmds) * 1e6
	}
	r.GossipBytesPerWS = float64(w1.gossip-w0.gossip) / float64(nWorkers) / win
	r.SpentPerSec = float64(w1.granted-w0.granted) / win
}

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
// o.sampleEvery until the fleet has converged (convergedAt with the
// tolerance and hold) or the phase timeout passed. It returns the time to
// converge in seconds (-1: not within the timeout) and the last sample's
// error against the target.
func (m *measurement) phase(ctx context.Context, event func() error) (float64, float64, error) {
	o := m.o
	start := time.Now()
	if err := event(); err != nil {
		return -1, -1, err
	}
	var samples []sample
	for time.Since(start) < o.phaseTimeout {
		at := time.Since(start)
		p, err := m.view(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return -1, -1, ctx.Err()
			}
			continue
		}
		v := groupsOf(p.Leases)
		fair, names := m.target()
		e, _ := fairnessError(v, fair, m.rateMilli)
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

// sleep waits d, or until ctx ends (its error).
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
