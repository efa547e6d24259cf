package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/worker"
)

// Scene 2 of the demo: a leased limit spent by three groups of in-process
// workers (two each, one closed-loop caller per worker) through the demo's
// cluster; group C's register access is cut for a while.

// demoGroups are the groups of scene 2; the last one is partitioned.
var demoGroups = []string{"A", "B", "C"}

// scene2 tunes scene 2: the limit's rate, how long it runs and when group
// C is cut off from the register.
type scene2 struct {
	rate                     float64
	duration                 time.Duration
	cutAfter, cutFor         time.Duration
	ttl                      time.Duration
	logger                   hclog.Logger
	servers                  []string
	leader                   func() *node.Node
	workersPerGroup, callers int
	// secure asks for a secured cluster; sec is its material (nil when
	// plain), shared with scene 1.
	secure bool
	sec    *demoSecurity
}

// runScene2 runs scene 2 and prints a line per second and a summary. It
// returns an error if the scene could not run or the fleet exceeded the
// over-grant bound.
func runScene2(ctx context.Context, out io.Writer, sc scene2) error {
	const limit = "fleet"
	l := sc.leader()
	if l == nil {
		return fmt.Errorf("scene 2: no leader")
	}
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: sc.rate, Per: time.Second})
	if err != nil {
		return err
	}
	if _, err := l.PutLimit(ctx, fsm.PutLimit{Name: limit, Config: cfg}); err != nil {
		return fmt.Errorf("scene 2: create limit: %w", err)
	}
	if _, err := l.PutLeasePolicy(ctx, fsm.LeasePolicy{Limit: limit, Leased: true}); err != nil {
		return fmt.Errorf("scene 2: lease policy: %w", err)
	}
	pool, _, err := l.LeaseView(ctx, limit)
	if err != nil {
		return fmt.Errorf("scene 2: lease view: %w", err)
	}
	fmt.Fprintf(out, "\nscene 2: leased limit %q, %g/s (C = %d, O = %d), %d workers in groups %s, TTL %v; group %s cut off from the register at t=%v for %v\n(per second: each group's permits spent and its share as its workers last heard it from the register)\n",
		limit, sc.rate, pool.BurstPermits, pool.MaxOutstandingPermits, sc.workersPerGroup*len(demoGroups),
		strings.Join(demoGroups, ", "), sc.ttl, demoGroups[len(demoGroups)-1], sc.cutAfter, sc.cutFor)

	c, err := client.New(sc.servers, append(sc.sec.clientOptions(), client.WithLogger(sc.logger.Named("client")), client.WithAttemptTimeout(max(sc.ttl/4, 50*time.Millisecond)))...)
	if err != nil {
		return err
	}
	// Group C reaches the register through a fault switch that the scene
	// sets to drop (every call fails as never delivered) for a while.
	var cut atomic.Bool
	partitioned := newFaultyRegister(c)
	type member struct {
		w     *worker.Worker
		group int
	}
	var members []member
	gossipAddrs, err := loopbackAddrs(sc.workersPerGroup * len(demoGroups))
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		for _, m := range members {
			_ = m.w.Stop(stopCtx)
		}
	}()
	for gi, g := range demoGroups {
		for k := 0; k < sc.workersPerGroup; k++ {
			var reg worker.Register = c
			if gi == len(demoGroups)-1 {
				reg = partitioned
			}
			mlc, err := gossipConfig(gossipAddrs[len(members)], 200*time.Millisecond)
			if err != nil {
				return err
			}
			mlc.LogOutput = io.Discard
			var join []string
			if len(members) > 0 {
				join = gossipAddrs[:1]
			}
			// C's cut is a partition, not an election: its workers call
			// the register unreachable after a TTL of silence rather than
			// the default 3 s, so that a short scene shows them fail
			// closed.
			w, err := worker.New(worker.Config{Name: fmt.Sprintf("%s%d", strings.ToLower(g), k+1), Group: g, Limit: limit,
				Register: reg, Gossip: mlc, Join: join, TTL: sc.ttl, UnreachableAfter: sc.ttl, Logger: sc.logger.Named("worker")})
			if err != nil {
				return err
			}
			if err := w.Start(ctx); err != nil {
				return err
			}
			members = append(members, member{w, gi})
		}
	}

	// One closed-loop caller per worker records every permit it spends.
	var mu sync.Mutex
	var spends []time.Time
	perGroup := make([]int, len(demoGroups))
	failed := make([]int, len(demoGroups))
	runCtx, cancel := context.WithTimeout(ctx, sc.duration)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range members {
		for range sc.callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for runCtx.Err() == nil {
					err := m.w.Acquire(runCtx, 1)
					mu.Lock()
					if err == nil {
						spends = append(spends, time.Now())
						perGroup[m.group]++
					} else if errors.Is(err, worker.ErrNoPermits) {
						failed[m.group]++
					}
					mu.Unlock()
					if errors.Is(err, worker.ErrNoPermits) {
						// Failing closed: try again a little later.
						select {
						case <-runCtx.Done():
						case <-time.After(50 * time.Millisecond):
						}
					}
				}
			}()
		}
	}

	began := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	cutDone := false
	for runCtx.Err() == nil {
		select {
		case <-runCtx.Done():
			continue
		case <-tick.C:
		}
		el := time.Since(began)
		mu.Lock()
		counts, fails := append([]int(nil), perGroup...), append([]int(nil), failed...)
		clear(perGroup)
		clear(failed)
		mu.Unlock()
		shares := make([]float64, len(demoGroups))
		for _, m := range members {
			shares[m.group] += float64(m.w.Stats().ShareMilliPermitsPerSec) / 1000
		}
		var b strings.Builder
		fmt.Fprintf(&b, "t=%3.0fs ", el.Seconds())
		for gi, g := range demoGroups {
			fmt.Fprintf(&b, " %s: %4d/s share %6.1f/s", g, counts[gi], shares[gi])
			if fails[gi] > 0 {
				fmt.Fprintf(&b, " (failing closed)")
			}
		}
		if cut.Load() {
			fmt.Fprintf(&b, "   [%s PARTITIONED from the register]", demoGroups[len(demoGroups)-1])
		}
		fmt.Fprintln(out, b.String())
		switch {
		case !cut.Load() && !cutDone && el >= sc.cutAfter:
			cut.Store(true)
			partitioned.setFault(registerFaultDrop)
			fmt.Fprintf(out, "*** cutting group %s off from the register\n", demoGroups[len(demoGroups)-1])
		case cut.Load() && el >= sc.cutAfter+sc.cutFor:
			cut.Store(false)
			partitioned.setFault(registerFaultNone)
			partitioned.setFault(registerFaultNone)
			cutDone = true
			fmt.Fprintf(out, "*** group %s reconnected\n", demoGroups[len(demoGroups)-1])
		}
	}
	cut.Store(false)
	wg.Wait()

	// The bound: at most C + O + floor(W/I) + 1 permits in any window W.
	sort.Slice(spends, func(i, j int) bool { return spends[i].Before(spends[j]) })
	maxWin, j := 0, 0
	for i := range spends {
		for spends[i].Sub(spends[j]) >= time.Second {
			j++
		}
		maxWin = max(maxWin, i-j+1)
	}
	bound := pool.BurstPermits + pool.MaxOutstandingPermits + int64(time.Second)/pool.IntervalNanos + 1
	verdict := "within the bound"
	if int64(maxWin) > bound {
		verdict = "ABOVE THE BOUND"
	}
	fmt.Fprintf(out, "scene 2 done: %d permits in %v (%.0f/s, limit %g/s); most in any 1 s window: %d, bound C + O + floor(W/I) + 1 = %d: %s\n",
		len(spends), sc.duration, float64(len(spends))/sc.duration.Seconds(), sc.rate, maxWin, bound, verdict)
	if int64(maxWin) > bound {
		return fmt.Errorf("scene 2: the fleet spent %d permits in a 1 s window, above the bound %d", maxWin, bound)
	}
	return nil
}
