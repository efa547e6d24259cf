package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/jepsen-lite/runner/nemesis"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
)

// workerGroup is the running workers and the errors they ended with.
type workerGroup struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []string
}

// runWorkload runs the workers, the observer and the nemesis for the
// run's duration, then stops them and records what they did.
func (x *execution) runWorkload() error {
	cfg, sum := x.r.cfg, x.sum
	wctx, stopWorkers := context.WithCancel(x.ctx)
	x.onExit(stopWorkers)
	if err := x.startFleet(); err != nil {
		return err
	}
	x.wl = workload.New(x.r.workloadConfig(), x.r.start, x.hw, fakeapi.NewUnixClient(x.sock), x.li.Name, x.servers, x.fl)
	x.obs = cluster.NewObserver(x.cl, x.ct, x.r.start)
	var bg sync.WaitGroup
	bg.Go(func() { x.obs.Run(wctx) })
	if x.fl != nil {
		bg.Go(func() { x.fl.Poll(wctx) })
	}
	workers := x.startWorkers(wctx)
	if x.li.Templated != nil {
		bg.Go(func() { x.templateChanges(wctx) })
	}
	nm, healAt, nemDone := x.startNemesis()

	_ = wait.Sleep(x.ctx, time.Until(x.r.start.Add(cfg.Duration)))
	<-nemDone // heals (without ctx) even when interrupted
	sum.HealNanos = int64(healAt)
	for _, rec := range nm.Records() {
		sum.HealNanos = max(sum.HealNanos, rec.EndNanos)
	}
	stopWorkers()
	if !wait.Group(&workers.wg, 30*time.Second) {
		sum.Errors = append(sum.Errors, "workers did not stop within 30s")
	}
	workers.mu.Lock()
	sum.Errors = append(sum.Errors, workers.errs...)
	workers.mu.Unlock()
	sum.EndNanos = int64(time.Since(x.r.start))
	bg.Wait()
	sum.Nemeses = nm.Records()
	sum.LeaderChanges = x.obs.LeaderChanges()
	sum.Workers = x.wl.Stats()
	x.r.logf("workers: %d grants of %d permits, %d of several permits (in %d multi-permit turns); %d refused, %d failed (%d never delivered), %d unknown",
		sum.Workers.Granted, sum.Workers.PermitsGranted, sum.Workers.MultiPermitGrants, sum.Workers.MultiPermitTurns,
		sum.Workers.Refused, sum.Workers.Failed, sum.Workers.NotDelivered, sum.Workers.Unknown)
	if x.fl != nil {
		x.finishFleet()
	}
	if x.ctx.Err() != nil {
		sum.Errors = append(sum.Errors, "interrupted: "+x.ctx.Err().Error())
	}
	return nil
}

// startFleet lays out and launches the worker sidecars (leased workload
// only); they are stopped when execute returns.
func (x *execution) startFleet() error {
	if x.r.cfg.Workload != WorkloadLeased {
		return nil
	}
	fl, err := workload.NewFleet(x.bin, x.r.workloadConfig(), x.li.Name, x.servers, x.r.logf)
	if err != nil {
		return fmt.Errorf("laying out the worker sidecars: %w", err)
	}
	x.fl = fl
	x.onExit(func() { fl.StopAll(5 * time.Second) })
	if err := fl.Launch(x.ctx, x.r.start); err != nil {
		return fmt.Errorf("starting the worker sidecars: %w", err)
	}
	x.r.logf("leased: %v", fl)
	return nil
}

// startWorkers starts the configured number of workers.
func (x *execution) startWorkers(ctx context.Context) *workerGroup {
	g := &workerGroup{}
	for id := range x.r.cfg.Workers {
		g.wg.Go(func() {
			if err := x.wl.Run(ctx, id); err != nil {
				g.mu.Lock()
				g.errs = append(g.errs, fmt.Sprintf("worker %d: %v", id, err))
				g.mu.Unlock()
			}
		})
	}
	return g
}

// startNemesis starts the nemesis on the run's schedule; done closes once
// it has healed (even when interrupted).
func (x *execution) startNemesis() (nm *nemesis.Nemesis, healAt time.Duration, done <-chan struct{}) {
	cfg, li := x.r.cfg, x.li
	deps := nemesis.Deps{Cluster: x.cl, Control: x.ct, History: x.hw, Start: x.r.start, Workers: x.wl.Pool(), Admin: x.admin, Logf: x.r.logf,
		Limit: nemesis.Limit{Name: li.Name, Strict: cfg.Workload == WorkloadStrict, IntervalNanos: li.IntervalNanos, MaxReserved: li.MaxReserved, ExpiryNanos: li.ExpiryNanos}}
	if x.fl != nil {
		deps.Sidecars = x.fl
	}
	nm = nemesis.New(cfg.nemesisConfig(), deps)
	healAt = cfg.Duration - cfg.Tail
	nemDone := make(chan struct{})
	go func() { defer close(nemDone); nm.Run(x.ctx, x.sum.Schedule, healAt) }()
	x.r.logf("workload: %d workers on %s, %d scheduled faults, final heal at %v, end at %v", cfg.Workers, li.Name, len(x.sum.Schedule), healAt, cfg.Duration)
	return nm, healAt, nemDone
}

// finishFleet ends the worker sidecars' work and records their summary.
func (x *execution) finishFleet() {
	fl, sum, li := x.fl, x.sum, x.li
	fl.Finish(context.WithoutCancel(x.ctx))
	sum.Leased = fl.Summary(li.BurstPermits, li.MaxOutstandingPermits, li.WindowFormula)
	for _, rr := range sum.Leased.Relays {
		x.r.logf("relay %s (upstream %s, for %v, %d restarts): %d commands in %d batches (%d batched), %d failed batches, %d refused",
			rr.Name, rr.Upstream, rr.Workers, rr.Restarts, rr.Stats.Commands, rr.Stats.Batches, rr.Stats.BatchedCommands, rr.Stats.FailedBatches, rr.Stats.Refused)
	}
	for _, w := range fl.UnexpectedExits() {
		sum.Errors = append(sum.Errors, "worker "+w+" exited on its own (see its log)")
	}
}
