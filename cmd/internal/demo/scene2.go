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
// cluster; the last group's register access is cut for a while. It checks
// the leased limit's over-grant bound (fsm's package doc) over the whole
// fleet, that the cut-off group spends nothing once what it held has
// expired (the worker's fail-closed rule, transport/worker's doc), and that
// it spends again after it is reconnected.

const scene2Title = "leased workers, one group cut off"

// Groups are the groups of scene 2; the last one is cut off from the
// register. (Not "C": that letter is the pool's burst in the bound.)
var Groups = []string{"A", "B", "X"}

// scene2Limit is the name of scene 2's leased limit.
const scene2Limit = "fleet"

// scene2 is scene 2 as it runs: its tuning, when the last group is cut
// off from the register, the workers' lease TTL, request timeout and
// steal grace, their numbers, and the cluster.
type scene2 struct {
	Scene2Config
	cutAfter, cutFor                time.Duration
	ttl, requestTimeout, stealGrace time.Duration
	workersPerGroup, callers        int
	sceneEnv
}

// newScene2 is scene 2 as cfg tunes it on env: the last group cut off
// from 1/4 to 3/4 of the scene, two workers a group with one caller each,
// a lease TTL of 1 s, register calls of at most 250 ms, stealing for 2
// TTLs after the last answer (the worker's default).
func newScene2(cfg Scene2Config, env sceneEnv) scene2 {
	return scene2{Scene2Config: cfg, cutAfter: cfg.Duration / 4, cutFor: cfg.Duration / 2,
		ttl: time.Second, requestTimeout: 250 * time.Millisecond, stealGrace: 2 * time.Second,
		workersPerGroup: 2, callers: 1, sceneEnv: env}
}

// member is one of scene 2's workers and its group (an index of Groups).
type member struct {
	w     *worker.Worker
	group int
}

// spend is one permit a scene 2 caller spent: when, and its group (an
// index of Groups).
type spend struct {
	at    time.Time
	group int
}

// scene2Tally counts what the callers spent: every permit, and per group
// the permits and the refusals (failing closed) of the current second.
type scene2Tally struct {
	mu               sync.Mutex
	spends           []spend
	perGroup, failed []int
}

// scene2Run is what scene 2 saw: every permit spent, and when the last
// group was cut off and reconnected (zero: it was not).
type scene2Run struct {
	spends               []spend
	cutAt, reconnectedAt time.Time
}

// scene2Bounds are the bounds scene 2 checks, from the pool and the
// workers' configuration.
type scene2Bounds struct {
	// c and o are the pool's C (burst) and O (most outstanding), interval
	// its I, window W (1 s), and fleetMax C + O + floor(W/I) + 1.
	c, o             int64
	interval, window time.Duration
	fleetMax         int64
	// quiet is how long after the cut the cut-off group may still spend:
	// its last answer came at most requestTimeout after the cut, it
	// steals for stealGrace after that answer, and a grant or stolen
	// permits last at most a TTL.
	requestTimeout, stealGrace, ttl, quiet time.Duration
}

// newScene2Bounds computes scene 2's bounds.
func newScene2Bounds(pool fsm.LeasePoolInfo, requestTimeout, stealGrace, ttl time.Duration) scene2Bounds {
	w := time.Second
	return scene2Bounds{c: pool.BurstPermits, o: pool.MaxOutstandingPermits, interval: time.Duration(pool.IntervalNanos), window: w,
		fleetMax:       pool.BurstPermits + pool.MaxOutstandingPermits + int64(w)/pool.IntervalNanos + 1,
		requestTimeout: requestTimeout, stealGrace: stealGrace, ttl: ttl, quiet: requestTimeout + stealGrace + ttl}
}

// checks are scene 2's checks of run against b.
func (b scene2Bounds) checks(run scene2Run, began time.Time) []check {
	sort.Slice(run.spends, func(i, j int) bool { return run.spends[i].at.Before(run.spends[j].at) })
	times := make([]time.Time, len(run.spends))
	for i, s := range run.spends {
		times[i] = s.at
	}
	most := int64(mostInWindow(times, b.window))
	checks := []check{{what: fmt.Sprintf("most permits the fleet spent in any sliding %s window", sec(b.window)), got: fmt.Sprint(most),
		want: fmt.Sprintf("allowed: ≤ C + O + floor(W / I) + 1 = %d + %d + %d + 1 = %d",
			b.c, b.o, int64(b.window/b.interval), b.fleetMax),
		ok: most <= b.fleetMax}}
	if run.cutAt.IsZero() || run.reconnectedAt.IsZero() {
		return append(checks, check{what: "group " + Groups[len(Groups)-1] + " cut off", got: "the scene ended before the cut was over",
			want: "expected: a cut and a reconnection"})
	}
	x := len(Groups) - 1
	from := run.cutAt.Add(b.quiet)
	var during, after int
	for _, s := range run.spends {
		switch {
		case s.group != x:
		case s.at.After(from) && s.at.Before(run.reconnectedAt):
			during++
		case !s.at.Before(run.reconnectedAt):
			after++
		}
	}
	rel := func(t time.Time) string { return strconv.FormatFloat(t.Sub(began).Seconds(), 'f', 2, 64) + " s" }
	quiet := check{what: fmt.Sprintf("permits group %s spent cut off, from %s to its reconnection at %s", Groups[x], rel(from), rel(run.reconnectedAt)),
		got: fmt.Sprint(during),
		want: fmt.Sprintf("allowed: 0 after cut + request timeout + steal grace + TTL = %s + %s + %s + %s = %s (its last lease and the permits it borrowed have expired)",
			rel(run.cutAt), sec(b.requestTimeout), sec(b.stealGrace), sec(b.ttl), rel(from)),
		ok: during == 0}
	if !from.Before(run.reconnectedAt) {
		quiet.got, quiet.ok = "not measured: the cut was too short", false
	}
	back := check{what: fmt.Sprintf("permits group %s spent after its reconnection", Groups[x]), got: fmt.Sprint(after),
		want: "expected: at least one (it leases again)", ok: after > 0}
	return append(checks, quiet, back)
}

// runScene2 runs scene 2, prints a line per second and its checks.
func runScene2(ctx context.Context, out io.Writer, sc scene2) sceneResult {
	res := sceneResult{n: 2, title: scene2Title}
	pool, err := sc.makeLimit(ctx)
	if err != nil {
		res.err = err
		return res
	}
	b := newScene2Bounds(pool, sc.requestTimeout, sc.stealGrace, sc.ttl)
	x := Groups[len(Groups)-1]
	sceneHeader(out, 2, scene2Title, sc.Duration, fmt.Sprintf(
		"%d workers (in this process) in groups %s share one limit, %q, of %g permits a second. A worker does not ask the cluster for each permit: "+
			"it leases a share of the rate for %s (the lease's TTL), spends it on its own and renews the lease as it goes. From %s to %s group %s cannot reach the cluster "+
			"(the workers still reach each other): it spends what it holds, borrows from the other groups, then refuses to spend (it fails closed) until it is reconnected, "+
			"while the other groups get its part. What it proves: however permits move, the whole fleet never spends more than C + O + floor(W / I) + 1 = %d in any "+
			"sliding window W of %s, where C = %d is the most permits the cluster keeps in store for the workers (the burst), O = %d the most the workers hold unspent at once, "+
			"and I = %s the time between two permits at %g/s%s; and that group %s spends nothing once what it held has expired. Each line: what each group spent in that clock second and, in brackets, its share (the permits a second the cluster lets it spend now).",
		sc.workersPerGroup*len(Groups), strings.Join(Groups, ", "), scene2Limit, sc.Rate, sec(sc.ttl), sec(sc.cutAfter), sec(sc.cutAfter+sc.cutFor), x,
		b.fleetMax, sec(b.window), b.c, b.o, ms3(b.interval), sc.Rate, intervalNote(b.window, b.interval), x))

	c, err := client.New(sc.servers, append(sc.sec.clientOptions(), client.WithLogger(sc.logger.Named("client")), client.WithAttemptTimeout(max(sc.ttl/4, 50*time.Millisecond)))...)
	if err != nil {
		res.err = err
		return res
	}
	// The last group reaches the register through a fault switch that
	// the scene sets to drop (every call fails as never delivered) for a
	// while.
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
		res.err = err
		return res
	}
	runCtx, cancel := context.WithTimeout(ctx, sc.Duration)
	defer cancel()
	tally := &scene2Tally{perGroup: make([]int, len(Groups)), failed: make([]int, len(Groups))}
	began := time.Now()
	wg := sc.startCallers(runCtx, members, tally)
	run := sc.printSeconds(runCtx, out, members, tally, partitioned, b)
	wg.Wait()
	run.spends = tally.spends
	elapsed := time.Since(began)
	note(out, "%d permits spent in %s: %.0f/s on average (the limit: %g/s); the bound allows short bursts of what is stored and held, never more on average.",
		len(run.spends), secs(elapsed), float64(len(run.spends))/elapsed.Seconds(), sc.Rate)
	res.checks = b.checks(run, began)
	return res
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
			// The cut is a partition, not an election: the workers call
			// the register unreachable after a TTL of silence rather than
			// the default 3 s, so that a short scene shows them fail
			// closed.
			w, err := worker.New(worker.Config{Name: fmt.Sprintf("%s%d", strings.ToLower(g), k+1), Group: g, Limit: scene2Limit,
				Register: reg, Gossip: mlc, Join: join, TTL: sc.ttl, UnreachableAfter: sc.ttl,
				RequestTimeout: sc.requestTimeout, StealGrace: sc.stealGrace, Logger: sc.logger.Named("worker")})
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
						t.spends = append(t.spends, spend{time.Now(), m.group})
						t.perGroup[m.group]++
					} else if errors.Is(err, worker.ErrNoPermits) {
						t.failed[m.group]++
					}
					t.mu.Unlock()
					if errors.Is(err, worker.ErrNoPermits) {
						// Failing closed: try again a little later.
						sleepCtx(runCtx, 50*time.Millisecond)
					}
				}
			}()
		}
	}
	return &wg
}

// printSeconds prints a line a second until runCtx ends, and cuts the
// last group off from the register at sc.cutAfter for sc.cutFor; it
// returns when it did both.
func (sc scene2) printSeconds(runCtx context.Context, out io.Writer, members []member, t *scene2Tally, partitioned *testhooks.FaultyRegister, b scene2Bounds) scene2Run {
	var run scene2Run
	x := Groups[len(Groups)-1]
	fmt.Fprintf(out, "%-6s", "time")
	for _, g := range Groups {
		fmt.Fprintf(out, " %-14s", "group "+g)
	}
	fmt.Fprintf(out, " %s\n%-6s", "fleet", "")
	for range Groups {
		fmt.Fprintf(out, " %-14s", "spent (share)")
	}
	fmt.Fprintf(out, " (≤ %d)\n", b.fleetMax)
	began := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	cut := false
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
		case !cut && run.cutAt.IsZero() && el >= sc.cutAfter:
			cut = true
			partitioned.SetFault(testhooks.RegisterFaultDrop)
			run.cutAt = time.Now()
			fmt.Fprintf(out, "*** %s: cutting group %s off from the cluster\n", sec(el.Round(time.Second)), x)
		case cut && el >= sc.cutAfter+sc.cutFor:
			cut = false
			partitioned.SetFault(testhooks.RegisterFaultNone)
			run.reconnectedAt = time.Now()
			fmt.Fprintf(out, "*** %s: group %s reconnected\n", sec(el.Round(time.Second)), x)
		}
	}
	return run
}

// secondLine is the line of the second that ended at el: each group's
// permits spent (counts) and its share as its workers last heard it from
// the register, the fleet's permits, and which groups are cut off or
// failing closed.
func secondLine(el time.Duration, counts, fails []int, members []member, cut bool) string {
	shares := make([]float64, len(Groups))
	for _, m := range members {
		shares[m.group] += float64(m.w.Stats().ShareMilliPermitsPerSec) / 1000
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s", sec(el.Round(time.Second)))
	total := 0
	var notes []string
	for gi := range Groups {
		fmt.Fprintf(&b, " %-14s", fmt.Sprintf("%4d (%.0f)", counts[gi], shares[gi]))
		total += counts[gi]
		if gi == len(Groups)-1 && cut {
			notes = append(notes, Groups[gi]+" cut off")
		}
		if fails[gi] > 0 {
			notes = append(notes, Groups[gi]+" failing closed")
		}
	}
	fmt.Fprintf(&b, " %4d", total)
	if len(notes) > 0 {
		fmt.Fprintf(&b, "   %s", strings.Join(notes, ", "))
	}
	return b.String()
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
