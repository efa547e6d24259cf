package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/permitd/permitd/transport/worker"
)

// changes.go: the changes a measurement times — a join, a leave, a cut
// and a heal — and the rejoins the leave causes.

// changes times how long the division takes to be fair again after a
// join, a leave, a cut and a heal, then counts the rejoins the leave
// caused.
func (m *measurement) changes(ctx context.Context) error {
	res, f := m.res, m.f
	// Join: 10 % more workers (at least one) in the smallest group, with
	// its workers' demand.
	n := max(1, m.nWorkers/10)
	res.Changed = n
	var joins []workerSpec
	for k := range n {
		joins = append(joins, workerSpec{fmt.Sprintf("j%04d", k), groupName(0), m.demands[0] / float64(m.perGroup[0])})
	}
	var err error
	res.JoinS, res.JoinErr, err = m.phase(ctx, func() error {
		return parallel(joins, 16, func(s workerSpec) error { return m.startOne(ctx, s) })
	})
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	// Leave: as many original workers stopped, from the largest groups.
	var leaving []*member
	for g := m.nGroups - 1; g >= 0 && len(leaving) < n; g-- {
		for _, mb := range f.live() {
			if mb.group == groupName(g) && strings.HasPrefix(mb.name, "w") && len(leaving) < n {
				leaving = append(leaving, mb)
			}
		}
	}
	staying := slices.DeleteFunc(f.live(), func(mb *member) bool { return slices.Contains(leaving, mb) })
	rejoins0 := rejoinsOf(staying)
	res.LeaveS, res.LeaveErr, err = m.phase(ctx, func() error {
		return parallel(leaving, 32, func(mb *member) error { f.stopMember(mb); return nil })
	})
	if err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	if err := m.cutAndHeal(ctx); err != nil {
		return err
	}
	return m.countRejoins(ctx, staying, rejoins0)
}

// cutAndHeal times a partition: the smallest group's register calls
// fail, then succeed again. With one group, half its workers are cut off
// instead (cutting the whole fleet leaves the register's view as it was:
// expiry is applied with the next log entry, and none comes).
func (m *measurement) cutAndHeal(ctx context.Context) error {
	var cut []*member
	for i, mb := range m.f.live() {
		if (m.nGroups > 1 && mb.group == groupName(0)) || (m.nGroups == 1 && i%2 == 0) {
			cut = append(cut, mb)
		}
	}
	m.res.CutWorkers = len(cut)
	setCut := func(v bool) error {
		for _, mb := range cut {
			mb.cut.Store(v)
		}
		return nil
	}
	var err error
	m.res.CutS, m.res.CutErr, err = m.phase(ctx, func() error { return setCut(true) })
	if err != nil {
		return fmt.Errorf("cut: %w", err)
	}
	m.res.HealS, m.res.HealErr, err = m.phase(ctx, func() error { return setCut(false) })
	if err != nil {
		return fmt.Errorf("heal: %w", err)
	}
	return nil
}

// countRejoins records the rejoins the departures caused among staying
// (rejoins0 before the leave): once every member that stayed sees the
// leavers gone, each rejoin loop ticks within a period; two periods and
// a second leave room for a member whose tick came just before its view
// changed (the cut changes no membership).
func (m *measurement) countRejoins(ctx context.Context, staying []*member, rejoins0 int64) error {
	every := m.o.rejoinEvery
	if every == 0 {
		every = worker.DefaultRejoinEvery
	}
	settleFrom := time.Now()
	for !seeOnly(staying, len(staying)) {
		if time.Since(settleFrom) > m.o.phaseTimeout {
			// Not a failed measurement: the count is unknown (-1).
			fmt.Fprintf(os.Stderr, "   leave_rejoins not read: the members that stayed did not all see exactly each other within %v after the heal\n", m.o.phaseTimeout)
			m.res.LeaveRejoins = -1
			return nil
		}
		if err := sleep(ctx, m.o.sampleEvery); err != nil {
			return err
		}
	}
	if err := sleep(ctx, 2*every+time.Second); err != nil {
		return err
	}
	m.res.LeaveRejoins = rejoinsOf(staying) - rejoins0
	return nil
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
