package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/client"
)

// Scene 1 of the demo: clients use permits of a strict limit through
// different nodes; the leader is killed once (no graceful handover). It
// checks the strict limit's promise at use time: any two permits used at
// least interval - expiry apart (a permit is used at or after its slot
// and no later than its expiry, expiry after the slot), hence at most
// floor((W + expiry)/interval) + 1 in any window W; and that permits
// resume after the crash.

const scene1Title = "paced clients through a leader crash"

// s1MaxWait is the longest wait a scene 1 client accepts in a reserve.
const s1MaxWait = 2 * time.Second

// use is one permit a scene 1 client used: when, and how long after it
// asked.
type use struct {
	at   time.Time
	wait time.Duration
}

// scene1Bounds are the bounds scene 1 checks, from its limit's config.
type scene1Bounds struct {
	interval, expiry time.Duration
	// minGap is interval - expiry: the least time between two uses.
	minGap time.Duration
	// window is W (1 s); maxInWindow floor((W + expiry)/interval) + 1,
	// the most uses in any window W.
	window      time.Duration
	maxInWindow int
}

// newScene1Bounds computes scene 1's bounds from the strict limit's
// config.
func newScene1Bounds(limit bucket.Config) scene1Bounds {
	i, e, w := time.Duration(limit.IntervalNanos), time.Duration(limit.ExpiryNanos), time.Second
	return scene1Bounds{interval: i, expiry: e, minGap: i - e, window: w, maxInWindow: int((w+e)/i) + 1}
}

// scene1Run is what scene 1 saw: every use (sorted by time), when the
// leader was killed (zero: it was not) and which node it was.
type scene1Run struct {
	uses     []use
	killedAt time.Time
	killed   string
}

// checks are scene 1's checks of run against b.
func (b scene1Bounds) checks(run scene1Run) []check {
	times := make([]time.Time, len(run.uses))
	for i, u := range run.uses {
		times[i] = u.at
	}
	gap := check{what: "smallest gap between any two permits used", got: "not measured (fewer than 2 permits)",
		want: fmt.Sprintf("allowed: ≥ interval - expiry = %s - %s = %s", ms(b.interval), ms(b.expiry), ms(b.minGap))}
	if g, ok := minGap(times); ok {
		gap.got, gap.ok = ms(g.Round(100*time.Microsecond)), g >= b.minGap
	}
	most := mostInWindow(times, b.window)
	checks := []check{gap, {what: fmt.Sprintf("most permits used in any sliding %s window", sec(b.window)), got: fmt.Sprint(most),
		want: fmt.Sprintf("allowed: ≤ floor((W + expiry) / interval) + 1 = floor((%s + %s) / %s) + 1 = %d + 1 = %d",
			ms(b.window), ms(b.expiry), ms(b.interval), b.maxInWindow-1, b.maxInWindow),
		ok: most <= b.maxInWindow}}
	if !run.killedAt.IsZero() {
		// A permit asked for after the crash was decided by the new
		// leader (permits granted before it may still be in use after).
		c := check{what: "permits asked for after the leader's crash and used", got: "0",
			want: "expected: at least one (another node took over)"}
		n, first := 0, time.Time{}
		for _, u := range run.uses {
			if u.at.Add(-u.wait).After(run.killedAt) {
				if n++; first.IsZero() {
					first = u.at
				}
			}
		}
		if n > 0 {
			c.got, c.ok = fmt.Sprintf("%d, the first used %s after the crash", n, secs(first.Sub(run.killedAt))), true
		}
		checks = append(checks, c)
	}
	return checks
}

// minGap is the smallest gap between two of times (sorted); false with
// fewer than two.
func minGap(times []time.Time) (time.Duration, bool) {
	if len(times) < 2 {
		return 0, false
	}
	g := times[1].Sub(times[0])
	for i := 2; i < len(times); i++ {
		g = min(g, times[i].Sub(times[i-1]))
	}
	return g, true
}

// scene1 runs the demo's first scene until ctx ends: clients on a strict
// limit, and the leader killed once after cfg.KillAfter.
func scene1(ctx context.Context, out io.Writer, c *cluster, cfg Scene1Config) sceneResult {
	res := sceneResult{n: 1, title: scene1Title}
	limit, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: cfg.Rate, Per: time.Second, MaxReserved: int64(cfg.Clients),
		Expiry: time.Duration(float64(time.Second) / cfg.Rate / 10)})
	if err != nil {
		res.err = err
		return res
	}
	b := newScene1Bounds(limit)
	kill := ""
	if cfg.KillAfter > 0 && cfg.KillAfter < cfg.Duration {
		kill = fmt.Sprintf(" After %s the leader (the node that decides every permit) is killed without warning; the two other nodes elect a new leader and carry on.", sec(cfg.KillAfter))
	}
	sceneHeader(out, 1, scene1Title, cfg.Duration, fmt.Sprintf(
		"%d clients ask for permits of one limit, %q, each through a different node of the cluster. The limit is strict: one permit every %s (%g a second), and a client must use its permit within the limit's expiry, %s after the permit's time, or drop it.%s "+
			"What it proves: no two permits are used closer than interval - expiry = %s, crash included, so no sliding 1 s window holds more than %d. Each line counts one clock second.",
		cfg.Clients, "demo", ms(b.interval), cfg.Rate, ms(b.expiry), kill, ms(b.minGap), b.maxInWindow))
	l, _ := c.leader()
	if _, err := l.node.PutLimit(ctx, fsm.PutLimit{Name: "demo", Config: limit}); err != nil {
		res.err = fmt.Errorf("create limit: %w", err)
		return res
	}
	var expired atomic.Int64
	uses, err := startScene1Clients(ctx, c, cfg.Clients, &expired)
	if err != nil {
		res.err = err
		return res
	}
	fmt.Fprintf(out, "%-6s %-8s %-13s %-10s %s\n", "time", "permits", "smallest gap", "mean wait", "leader")
	fmt.Fprintf(out, "%-6s %-8s (≥ %s)\n", "", fmt.Sprintf("(≤ %d)", b.maxInWindow), ms(b.minGap))
	began := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var run scene1Run
	var second []use
	var last time.Time // the last use before this second
	lastLeader := ""
	killed := cfg.KillAfter <= 0
	for {
		select {
		case u, ok := <-uses:
			if !ok {
				return finishScene1(out, b, run, expired.Load(), cfg, time.Since(began), res)
			}
			run.uses = append(run.uses, u)
			second = append(second, u)
		case <-tick.C:
			lastLeader = printScene1Second(out, c, time.Since(began), second, last, lastLeader)
			if len(second) > 0 {
				last = second[len(second)-1].at
			}
			second = second[:0]
			if !killed && time.Since(began) >= cfg.KillAfter {
				killed = true
				if l, _ := c.leader(); l != nil {
					fmt.Fprintf(out, "*** %s: killing the leader, %s, without warning (a crash: no handover)\n", sec(time.Since(began).Round(time.Second)), l.id)
					run.killedAt, run.killed = time.Now(), l.id
					c.stop(l, true)
				}
			}
		}
	}
}

// finishScene1 prints scene 1's totals (over took) and checks.
func finishScene1(out io.Writer, b scene1Bounds, run scene1Run, expired int64, cfg Scene1Config, took time.Duration, res sceneResult) sceneResult {
	sort.Slice(run.uses, func(i, j int) bool { return run.uses[i].at.Before(run.uses[j].at) })
	note(out, "%d permits used in %s (%g/s allowed); %d dropped: their expiry had passed before their client could use them (an answer held up by the crash, or a client woken late by a busy machine; dropping them keeps the gap).",
		len(run.uses), secs(took), cfg.Rate, expired)
	note(out, "(mean wait: from asking to using; %d clients share %g permits a second, so each waits about %s.)",
		cfg.Clients, cfg.Rate, secs(time.Duration(float64(cfg.Clients)/cfg.Rate*float64(time.Second))))
	if !run.killedAt.IsZero() {
		longest, at := time.Duration(0), time.Time{}
		for i := 1; i < len(run.uses); i++ {
			if g := run.uses[i].at.Sub(run.uses[i-1].at); g > longest {
				longest, at = g, run.uses[i].at
			}
		}
		if longest > 0 && at.After(run.killedAt) {
			note(out, "(the longest pause, %s, came with the crash of %s: the time to notice it and elect a new leader.)", secs(longest), run.killed)
		}
	}
	res.checks = b.checks(run)
	return res
}

// startScene1Clients starts n clients using permits of "demo" until ctx
// ends, each starting at another node, and returns the channel of their
// uses, closed once they have all stopped. A client uses a permit at or
// after its time, and only if it has not expired when it takes the use's
// time (else it counts it in expired and reserves again): the times it
// reports are uses the promise covers.
func startScene1Clients(ctx context.Context, c *cluster, n int, expired *atomic.Int64) (<-chan use, error) {
	uses := make(chan use, 4096)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		var servers []string
		for k := 0; k < 3; k++ {
			servers = append(servers, c.nodes[(i+k)%3].httpAddr)
		}
		cl, err := client.New(servers, c.sec.clientOptions()...)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				g, err := cl.Reserve(ctx, "demo", 1, s1MaxWait)
				if err != nil || !g.Granted {
					// No node answered (an election) or refused: again
					// shortly, or when the refusal says.
					pause := 20 * time.Millisecond
					if err == nil && g.RetryAfter > 0 {
						pause = min(time.Until(g.ReceivedAt.Add(g.RetryAfter)), time.Second)
					}
					sleepCtx(ctx, pause)
					continue
				}
				if err := g.Wait(ctx); err != nil {
					if errors.Is(err, client.ErrExpired) {
						expired.Add(1)
					}
					continue
				}
				now := time.Now()
				if exp := g.ExpiresAt(); !exp.IsZero() && now.After(exp) {
					expired.Add(1)
					continue
				}
				select {
				case uses <- use{at: now, wait: now.Sub(t0)}:
				case <-ctx.Done():
				}
			}
		}()
	}
	go func() { wg.Wait(); close(uses) }()
	return uses, nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// printScene1Second prints the line of the second that ended at elapsed:
// the permits used in it, the smallest gap between two (with the last
// use before it), their mean wait and the leader (lastLeader: the one
// the previous line named, which it returns updated).
func printScene1Second(out io.Writer, c *cluster, elapsed time.Duration, second []use, last time.Time, lastLeader string) string {
	times := make([]time.Time, 0, len(second)+1)
	if !last.IsZero() {
		times = append(times, last)
	}
	var waitSum time.Duration
	for _, u := range second {
		times = append(times, u.at)
		waitSum += u.wait
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	gap, wait := "-", "-"
	if g, ok := minGap(times); ok && len(second) > 0 {
		gap = ms(g.Round(100 * time.Microsecond)) // as the check prints it
	}
	if len(second) > 0 {
		wait = ms((waitSum / time.Duration(len(second))).Round(time.Millisecond))
	}
	leader := "none: electing a leader..."
	if l, _ := c.leader(); l != nil {
		leader = l.id
		if lastLeader != "" && lastLeader != l.id {
			leader += " (new leader)"
		}
		lastLeader = l.id
	}
	fmt.Fprintf(out, "%-6s %-8d %-13s %-10s %s\n", sec(elapsed.Round(time.Second)), len(second), gap, wait, leader)
	return lastLeader
}
