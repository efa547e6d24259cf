package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/cmd/internal/testhooks"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/worker"
)

// Scene 2 of the demo: a leased limit spent by three groups of in-process
// workers (two each, one closed-loop caller per worker) through the demo's
// cluster; group C's register access is cut for a while.

// Groups are the groups of scene 2; the last one is partitioned.
var Groups = []string{"A", "B", "C"}

// scene2Limit is the name of scene 2's leased limit.
const scene2Limit = "fleet"

// scene2 is scene 2 as it runs: its tuning, when group C is cut off from
// the register, the workers' lease TTL and numbers, and the cluster.
type scene2 struct {
	Scene2Config
	cutAfter, cutFor         time.Duration
	ttl                      time.Duration
	workersPerGroup, callers int
	sceneEnv
}

// newScene2 is scene 2 as cfg tunes it on env: group C cut off from 1/4
// to 1/2 of the scene, two workers a group with one caller each, a lease
// TTL of 1 s.
func newScene2(cfg Scene2Config, env sceneEnv) scene2 {
	return scene2{Scene2Config: cfg, cutAfter: cfg.Duration / 4, cutFor: cfg.Duration / 4, ttl: time.Second,
		workersPerGroup: 2, callers: 1, sceneEnv: env}
}

// member is one of scene 2's workers and its group (an index of Groups).
type member struct {
	w     *worker.Worker
	group int
}

// scene2Tally counts what the callers spent: every permit's time, and
// per group the permits and the refusals (failing closed) of the current
// second.
type scene2Tally struct {
	mu               sync.Mutex
	spends           []time.Time
	perGroup, failed []int
}

// runScene2 runs scene 2 and prints a line per second and a summary. It
// returns an error if the scene could not run or the fleet exceeded the
// over-grant bound.
func runScene2(ctx context.Context, out io.Writer, sc scene2) error {
	pool, err := sc.makeLimit(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nscene 2: leased limit %q, %g/s (C = %d, O = %d), %d workers in groups %s, TTL %v; group %s cut off from the register at t=%v for %v\n(per second: each group's permits spent and its share as its workers last heard it from the register)\n",
		scene2Limit, sc.Rate, pool.BurstPermits, pool.MaxOutstandingPermits, sc.workersPerGroup*len(Groups),
		strings.Join(Groups, ", "), sc.ttl, Groups[len(Groups)-1], sc.cutAfter, sc.cutFor)

	c, err := client.New(sc.servers, append(sc.sec.clientOptions(), client.WithLogger(sc.logger.Named("client")), client.WithAttemptTimeout(max(sc.ttl/4, 50*time.Millisecond)))...)
	if err != nil {
		return err
	}
	// Group C reaches the register through a fault switch that the scene
	// sets to drop (every call fails as never delivered) for a while.
	partitioned := testhooks.NewFaultyRegister(c)
	members, err := sc.startWorkers(ctx, c, partitioned)
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		for _, m := range members {
			_ = m.w.Stop(stopCtx)
		}
	}()
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithTimeout(ctx, sc.Duration)
	defer cancel()
	tally := &scene2Tally{perGroup: make([]int, len(Groups)), failed: make([]int, len(Groups))}
	wg := sc.startCallers(runCtx, members, tally)
	sc.printSeconds(runCtx, out, members, tally, partitioned)
	wg.Wait()
	return sc.verdict(out, pool, tally.spends)
}

// makeLimit makes scene 2's limit, leased, and returns its lease pool.
func (sc scene2) makeLimit(ctx context.Context) (fsm.LeasePoolInfo, error) {
	l := sc.leader()
	if l == nil {
		return fsm.LeasePoolInfo{}, fmt.Errorf("scene 2: no leader")
	}
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: sc.Rate, Per: time.Second})
	if err != nil {
		return fsm.LeasePoolInfo{}, err
	}
	if _, err := l.PutLimit(ctx, fsm.PutLimit{Name: scene2Limit, Config: cfg}); err != nil {
		return fsm.LeasePoolInfo{}, fmt.Errorf("scene 2: create limit: %w", err)
	}
	if _, err := l.PutLeasePolicy(ctx, fsm.LeasePolicy{Limit: scene2Limit, Leased: true}); err != nil {
		return fsm.LeasePoolInfo{}, fmt.Errorf("scene 2: lease policy: %w", err)
	}
	pool, _, err := l.LeaseView(ctx, scene2Limit)
	if err != nil {
		return fsm.LeasePoolInfo{}, fmt.Errorf("scene 2: lease view: %w", err)
	}
	return pool, nil
}

// startWorkers starts the workers of every group, gossiping with each
// other; the last group's register is partitioned. It returns the
// workers started, also with an error (the caller stops them).
func (sc scene2) startWorkers(ctx context.Context, c *client.Client, partitioned *testhooks.FaultyRegister) ([]member, error) {
	var members []member
	gossipAddrs, err := loopbackAddrs(sc.workersPerGroup * len(Groups))
	if err != nil {
		return nil, err
	}
	for gi, g := range Groups {
		for k := 0; k < sc.workersPerGroup; k++ {
			var reg worker.Register = c
			if gi == len(Groups)-1 {
				reg = partitioned
			}
			mlc, err := demoGossip(gossipAddrs[len(members)])
			if err != nil {
				return members, err
			}
			var join []string
			if len(members) > 0 {
				join = gossipAddrs[:1]
			}
			// C's cut is a partition, not an election: its workers call
			// the register unreachable after a TTL of silence rather than
			// the default 3 s, so that a short scene shows them fail
			// closed.
			w, err := worker.New(worker.Config{Name: fmt.Sprintf("%s%d", strings.ToLower(g), k+1), Group: g, Limit: scene2Limit,
				Register: reg, Gossip: mlc, Join: join, TTL: sc.ttl, UnreachableAfter: sc.ttl, Logger: sc.logger.Named("worker")})
			if err != nil {
				return members, err
			}
			if err := w.Start(ctx); err != nil {
				return members, err
			}
			members = append(members, member{w, gi})
		}
	}
	return members, nil
}

// startCallers starts sc.callers closed-loop callers per worker, which
// record every permit they spend in t until runCtx ends.
func (sc scene2) startCallers(runCtx context.Context, members []member, t *scene2Tally) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, m := range members {
		for range sc.callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for runCtx.Err() == nil {
					err := m.w.Acquire(runCtx, 1)
					t.mu.Lock()
					if err == nil {
						t.spends = append(t.spends, time.Now())
						t.perGroup[m.group]++
					} else if errors.Is(err, worker.ErrNoPermits) {
						t.failed[m.group]++
					}
					t.mu.Unlock()
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
	return &wg
}

// printSeconds prints a line a second until runCtx ends, and cuts the
// last group off from the register at sc.cutAfter for sc.cutFor.
func (sc scene2) printSeconds(runCtx context.Context, out io.Writer, members []member, t *scene2Tally, partitioned *testhooks.FaultyRegister) {
	last := Groups[len(Groups)-1]
	began := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	cut, cutDone := false, false
	for runCtx.Err() == nil {
		select {
		case <-runCtx.Done():
			continue
		case <-tick.C:
		}
		el := time.Since(began)
		t.mu.Lock()
		counts, fails := append([]int(nil), t.perGroup...), append([]int(nil), t.failed...)
		clear(t.perGroup)
		clear(t.failed)
		t.mu.Unlock()
		fmt.Fprintln(out, secondLine(el, counts, fails, members, cut))
		switch {
		case !cut && !cutDone && el >= sc.cutAfter:
			cut = true
			partitioned.SetFault(testhooks.RegisterFaultDrop)
			fmt.Fprintf(out, "*** cutting group %s off from the register\n", last)
		case cut && el >= sc.cutAfter+sc.cutFor:
			cut, cutDone = false, true
			partitioned.SetFault(testhooks.RegisterFaultNone)
			fmt.Fprintf(out, "*** group %s reconnected\n", last)
		}
	}
}

// secondLine is the line of the second that ended at el: each group's
// permits spent (counts), whether it failed closed, and its share as its
// workers last heard it from the register.
func secondLine(el time.Duration, counts, fails []int, members []member, cut bool) string {
	shares := make([]float64, len(Groups))
	for _, m := range members {
		shares[m.group] += float64(m.w.Stats().ShareMilliPermitsPerSec) / 1000
	}
	var b strings.Builder
	fmt.Fprintf(&b, "t=%3.0fs ", el.Seconds())
	for gi, g := range Groups {
		fmt.Fprintf(&b, " %s: %4d/s share %6.1f/s", g, counts[gi], shares[gi])
		if fails[gi] > 0 {
			fmt.Fprintf(&b, " (failing closed)")
		}
	}
	if cut {
		fmt.Fprintf(&b, "   [%s PARTITIONED from the register]", Groups[len(Groups)-1])
	}
	return b.String()
}

// verdict prints the scene's summary and checks the bound: at most
// C + O + floor(W/I) + 1 permits in any window W (1 s).
func (sc scene2) verdict(out io.Writer, pool fsm.LeasePoolInfo, spends []time.Time) error {
	sort.Slice(spends, func(i, j int) bool { return spends[i].Before(spends[j]) })
	maxWin := mostInWindow(spends, time.Second)
	bound := pool.BurstPermits + pool.MaxOutstandingPermits + int64(time.Second)/pool.IntervalNanos + 1
	verdict := "within the bound"
	if int64(maxWin) > bound {
		verdict = "ABOVE THE BOUND"
	}
	fmt.Fprintf(out, "scene 2 done: %d permits in %v (%.0f/s, limit %g/s); most in any 1 s window: %d, bound C + O + floor(W/I) + 1 = %d: %s\n",
		len(spends), sc.Duration, float64(len(spends))/sc.Duration.Seconds(), sc.Rate, maxWin, bound, verdict)
	if int64(maxWin) > bound {
		return fmt.Errorf("scene 2: the fleet spent %d permits in a 1 s window, above the bound %d", maxWin, bound)
	}
	return nil
}

// demoGossip is memberlist's LAN configuration for an in-process worker
// gossiping on addr (a loopback HOST:PORT), with a short push/pull
// interval so that the small fleet converges quickly, and quiet.
func demoGossip(addr string) (*memberlist.Config, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	c := memberlist.DefaultLANConfig()
	c.BindAddr, c.BindPort = host, p
	c.AdvertiseAddr, c.AdvertisePort = host, p
	c.PushPullInterval = 200 * time.Millisecond
	c.LogOutput = io.Discard
	return c, nil
}
