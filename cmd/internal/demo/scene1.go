package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/client"
)

// Scene 1 of the demo: clients acquire permits of a strict limit through
// different nodes; the leader is killed once (no graceful handover) to
// show failover.

// use is one permit a scene 1 client got: when, and how long it waited.
type use struct {
	at   time.Time
	wait time.Duration
}

// scene1 runs the demo's first scene until ctx ends: clients on a strict
// limit, and the leader killed once after cfg.KillAfter.
func scene1(ctx context.Context, out io.Writer, c *cluster, cfg Scene1Config) error {
	limit, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: cfg.Rate, Per: time.Second, MaxReserved: int64(cfg.Clients),
		Expiry: time.Duration(float64(time.Second) / cfg.Rate / 10)})
	if err != nil {
		return err
	}
	l, _ := c.leader()
	if _, err := l.node.PutLimit(ctx, fsm.PutLimit{Name: "demo", Config: limit}); err != nil {
		return fmt.Errorf("create limit: %w", err)
	}
	interval := time.Duration(limit.IntervalNanos)
	fmt.Fprintf(out, "limit \"demo\": strict, %g/s (one permit every %v), %d clients\n", cfg.Rate, interval, cfg.Clients)
	uses, err := startScene1Clients(ctx, c, cfg.Clients)
	if err != nil {
		return err
	}
	began := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var all []time.Time
	var second []use
	killed := cfg.KillAfter <= 0
	for {
		select {
		case u, ok := <-uses:
			if !ok {
				summarize(out, all, interval)
				return nil
			}
			all = append(all, u.at)
			second = append(second, u)
		case <-tick.C:
			printScene1Second(out, c, time.Since(began), second)
			second = second[:0]
			if !killed && time.Since(began) >= cfg.KillAfter {
				killed = true
				if l, _ := c.leader(); l != nil {
					fmt.Fprintf(out, "*** killing leader %s (crash, no handover)\n", l.id)
					c.stop(l, true)
				}
			}
		}
	}
}

// startScene1Clients starts n clients acquiring permits of "demo" until
// ctx ends, each starting at another node, and returns the channel of
// their uses, closed once they have all stopped.
func startScene1Clients(ctx context.Context, c *cluster, n int) (<-chan use, error) {
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
				if err := cl.Acquire(ctx, "demo", 1); err != nil {
					continue
				}
				select {
				case uses <- use{at: time.Now(), wait: time.Since(t0)}:
				case <-ctx.Done():
				}
			}
		}()
	}
	go func() { wg.Wait(); close(uses) }()
	return uses, nil
}

// printScene1Second prints the line of the second that ended at elapsed:
// the grants in it, the smallest gap between two, their mean wait and
// the leader.
func printScene1Second(out io.Writer, c *cluster, elapsed time.Duration, second []use) {
	minGap := time.Duration(0)
	var waitSum time.Duration
	for i, u := range second {
		waitSum += u.wait
		if i > 0 {
			if g := u.at.Sub(second[i-1].at); minGap == 0 || g < minGap {
				minGap = g
			}
		}
	}
	meanWait := time.Duration(0)
	if len(second) > 0 {
		meanWait = waitSum / time.Duration(len(second))
	}
	lid, term := "none (election)", uint64(0)
	if l, t := c.leader(); l != nil {
		lid, term = l.id, t
	}
	fmt.Fprintf(out, "t=%3.0fs  grants/s=%3d  min gap=%-10v mean wait=%-10v leader=%s term=%d\n",
		elapsed.Seconds(), len(second), minGap.Round(time.Millisecond), meanWait.Round(time.Millisecond), lid, term)
}

// summarize prints the run's totals and checks the spacing clients saw.
func summarize(out io.Writer, uses []time.Time, interval time.Duration) {
	sort.Slice(uses, func(i, j int) bool { return uses[i].Before(uses[j]) })
	maxWin := mostInWindow(uses, time.Second)
	minGap := time.Duration(0)
	for i := 1; i < len(uses); i++ {
		if g := uses[i].Sub(uses[i-1]); minGap == 0 || g < minGap {
			minGap = g
		}
	}
	bound := int(time.Second/interval) + 1
	fmt.Fprintf(out, "done: %d permits; most in any 1 s window: %d (strict bound floor(W/I)+1 = %d); smallest gap seen by clients: %v (interval %v, less network jitter)\n",
		len(uses), maxWin, bound, minGap.Round(100*time.Microsecond), interval)
}
