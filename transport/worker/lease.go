package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// The lease manager: the shell around leaseState. One goroutine asks the
// state what to do, waits or sends the call, and feeds the answer back;
// Stop returns the lease. The decisions are all leaseState's.

// leaseLoop runs the lease manager until Stop.
func (w *Worker) leaseLoop() {
	defer w.run.wg.Done()
	for {
		select {
		case <-w.run.done:
			return
		default:
		}
		w.mu.Lock()
		if w.stopping {
			// Stop is under way (it closes done next): no new call, so
			// that Stop waits for none it did not find.
			w.mu.Unlock()
			return
		}
		now := w.now()
		a := w.lease.next(now)
		w.mu.Unlock()
		switch a.op {
		case opLease, opRenew:
			w.exchange(w.run.ctx, a)
			continue
		case opNone: // a call under way (none is, outside this loop): check again later
			a.atNanos = now + w.cfg.retryNanos
		}
		t := time.NewTimer(time.Duration(a.atNanos - now))
		select {
		case <-t.C:
		case <-w.run.done:
			t.Stop()
			return
		}
	}
}

// registerStep sends the call the lease state asks for now, due or not (a
// lease if the worker has none, else a renewal), and takes its answer.
func (w *Worker) registerStep(ctx context.Context) {
	w.mu.Lock()
	a := w.lease.send(w.now())
	w.mu.Unlock()
	w.exchange(ctx, a)
}

// exchange sends a, a lease or renewal, feeds the answer to the lease
// state and acts on its outcome.
func (w *Worker) exchange(ctx context.Context, a leaseAction) {
	if a.op != opLease && a.op != opRenew {
		return
	}
	res, err := w.call(ctx, a)

	w.mu.Lock()
	now := w.now()
	o := w.lease.answer(now, a, res, err)
	switch {
	case o.msg == "":
	case o.warn:
		w.log.Warn(o.msg, o.kv...)
	default:
		w.log.Debug(o.msg, o.kv...)
	}
	if o.event == evGranted {
		w.pace.trimBacklog(now, w.cfg.renewNanos/4)
		w.updatePaceLocked(now)
	}
	if o.event != evIgnored {
		w.broadcastLocked()
	}
	w.mu.Unlock()
	w.reportStats()
}

// call sends a to the register, bounded by RequestTimeout.
func (w *Worker) call(parent context.Context, a leaseAction) (client.LeaseGrant, error) {
	ctx, cancel := context.WithTimeout(parent, time.Duration(w.cfg.requestNanos))
	defer cancel()
	r, limit := w.cfg.Register, w.cfg.Limit
	switch a.op {
	case opLease:
		return r.Lease(ctx, limit, a.lease)
	case opRenew:
		return r.Renew(ctx, limit, a.leaseID, a.epoch, a.report)
	case opReturn:
		return r.Return(ctx, limit, a.leaseID, a.epoch, a.report)
	}
	return client.LeaseGrant{}, fmt.Errorf("worker: no register call for op %d", a.op)
}

// updatePaceLocked sets the pacer to the share, or, without a share, to
// the measured demand (at least one permit per second), so that stolen
// permits can still be spread.
func (w *Worker) updatePaceLocked(nowNanos int64) {
	rate := w.lease.share
	if rate <= 0 {
		rate = max(w.lease.meter.current(nowNanos), 1000)
	}
	if err := w.pace.setRate(nowNanos, rate); err != nil {
		w.log.Error("cannot set the pacing rate", "rate_milli", rate, "error", err)
	}
}

// returnLease returns the lease: first a lease or renewal sent without an
// answer, again as it was (see leaseState.returnCall), then the return of
// the current grant. A failed call is retried after RetryEvery until ctx
// is done or the lease has expired at the register anyway (a TTL after
// the last good answer).
func (w *Worker) returnLease(ctx context.Context) error {
	for {
		w.mu.Lock()
		a := w.lease.returnCall(w.now())
		w.mu.Unlock()
		var st returnStep
		switch a.op {
		case opNone:
			return nil
		case opLease, opRenew:
			if st = w.settle(ctx, a); st.retryAtNanos == 0 && !st.done {
				continue // answered: now return what it left
			}
		default:
			res, err := w.call(ctx, a)
			w.mu.Lock()
			st = w.lease.returnAnswer(w.now(), a, res, err)
			if st.done {
				w.broadcastLocked()
			}
			w.mu.Unlock()
			if st.done && (err == nil || rejected(err)) {
				w.reportStats()
			}
		}
		if st.done {
			return st.err
		}
		t := time.NewTimer(time.Duration(st.retryAtNanos - w.now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("worker %q: return lease %d (it expires at the register after its TTL): %w", w.cfg.Name, a.leaseID, ctx.Err())
		case <-t.C:
		}
	}
}

// settle sends a, a lease or renewal that got no answer, again at Stop
// and takes its answer (the next returnCall returns what it granted). No
// answer again: retry after RetryEvery, or give up once the lease has
// expired at the register anyway.
func (w *Worker) settle(ctx context.Context, a leaseAction) returnStep {
	res, err := w.call(ctx, a)
	w.mu.Lock()
	now := w.now()
	o := w.lease.answer(now, a, res, err)
	lastGood := w.lease.lastGoodNanos
	w.mu.Unlock()
	if o.event != evFailed {
		return returnStep{}
	}
	if now >= lastGood+w.cfg.ttlNanos {
		what := "renewal"
		if a.op == opLease {
			what = "lease"
		}
		return returnStep{done: true, err: fmt.Errorf("worker %q: return lease %d: gave up on the %s without an answer (the lease expires at the register after its TTL): %w",
			w.cfg.Name, a.leaseID, what, err)}
	}
	return returnStep{retryAtNanos: now + w.cfg.retryNanos}
}
