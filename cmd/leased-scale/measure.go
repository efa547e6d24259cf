package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/worker"
)

// measure.go: one configuration measured — start the register and the
// fleet, wait for convergence, then time a join, a leave, a cut and a
// heal, each until the shares are fair again.

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
	if res.LeaderIdleCores, _, err = reg.idleCores(ctx); err != nil {
		return res, err
	}

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

	f := &fleet{limit: limit, reg: reg, ttl: o.ttl, rejoinEvery: o.rejoinEvery, opts: o}
	if o.relays > 0 {
		if f.relays, err = startRelays(ctx, bin, reg, o.relays); err != nil {
			return res, err
		}
		defer f.relays.stop()
	}
	if o.clients > 0 {
		if f.shared, err = holderClients(reg, o, o.clients, f.relays); err != nil {
			return res, err
		}
		defer closeClients(f.shared)
	}
	if o.gossip == "mem" {
		f.mem = newMemNetwork()
	}
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
	if err := parallel(specs[first:], o.startParallel, func(s spec) error {
		if startCtx.Err() != nil {
			return fmt.Errorf("%d of %d workers started within %v", started.Load()+int64(first), nWorkers, o.startTimeout)
		}
		if err := startOne(s); err != nil {
			return err
		}
		if n := started.Add(1) + int64(first); n%100 == 0 {
			fmt.Fprintf(os.Stderr, "   %d workers started after %.1f s%s\n", n, time.Since(start).Seconds(), f.dropNote())
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
	fmt.Fprintf(os.Stderr, "   window start: %d gossip bytes%s\n", g0, f.dropNote())
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
	fmt.Fprintf(os.Stderr, "   window end: %d gossip bytes%s\n", g1, f.dropNote())
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
	staying := f.live()
	staying = slices.DeleteFunc(staying, func(m *member) bool { return slices.Contains(leaving, m) })
	rejoins0 := rejoinsOf(staying)
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
	// The rejoins the departures caused: once every member that stayed
	// sees the leavers gone, each rejoin loop ticks within a period; two
	// periods and a second leave room for a member whose tick came just
	// before its view changed (the cut changes no membership).
	every := o.rejoinEvery
	if every == 0 {
		every = worker.DefaultRejoinEvery
	}
	settleFrom := time.Now()
	for !seeOnly(staying, len(staying)) {
		if time.Since(settleFrom) > o.phaseTimeout {
			// Not a failed measurement: the count is unknown (-1).
			fmt.Fprintf(os.Stderr, "   leave_rejoins not read: the members that stayed did not all see exactly each other within %v after the heal\n", o.phaseTimeout)
			res.LeaveRejoins = -1
			return res, nil
		}
		if err := sleep(ctx, o.sampleEvery); err != nil {
			return res, err
		}
	}
	if err := sleep(ctx, 2*every+time.Second); err != nil {
		return res, err
	}
	res.LeaveRejoins = rejoinsOf(staying) - rejoins0
	return res, nil
}

// rejoinsOf sums the members' joins of their seed lists after start
// (worker.Stats.GossipRejoins): each a push/pull of the whole member list
// with every seed.
func rejoinsOf(ms []*member) int64 {
	var n int64
	for _, m := range ms {
		n += int64(m.w.Stats().GossipRejoins)
	}
	return n
}

// seeOnly reports whether every member's gossip shows n members.
func seeOnly(ms []*member, n int) bool {
	for _, m := range ms {
		seen := 0
		for _, names := range m.w.Status().Members {
			seen += len(names)
		}
		if seen != n {
			return false
		}
	}
	return true
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
