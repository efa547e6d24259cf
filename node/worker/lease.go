package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/permitd/permitd/fsm"
)

// The lease manager: one goroutine opens the lease, renews it every
// RenewEvery with a report on the current grant, retries failed calls, and
// re-leases when fenced. Stop returns the lease.

// errLeaseRefused marks a refusal that passes by itself (the holder still
// holds a lease, or the limit is full): Start does not fail on it.
var errLeaseRefused = errors.New("lease refused")

// leaseLoop runs the lease manager until Stop.
func (w *Worker) leaseLoop() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		d := w.nextRegisterNanos - w.now()
		w.mu.Unlock()
		if d > 0 {
			t := time.NewTimer(time.Duration(d))
			select {
			case <-t.C:
			case <-w.done:
				t.Stop()
				return
			}
		}
		select {
		case <-w.done:
			return
		default:
		}
		w.registerStep(w.runCtx)
	}
}

// registerStep opens a lease if the worker has none, else renews it.
func (w *Worker) registerStep(ctx context.Context) {
	w.mu.Lock()
	hasLease := w.leaseID != 0
	w.mu.Unlock()
	if hasLease {
		w.renew(ctx)
	} else {
		w.openLease(ctx)
	}
	w.reportStats()
}

// call runs one register call bounded by RequestTimeout.
func (w *Worker) call(parent context.Context, f func(context.Context) (fsm.LeaseResult, error)) (fsm.LeaseResult, error) {
	ctx, cancel := context.WithTimeout(parent, time.Duration(w.cfg.requestNanos))
	defer cancel()
	return f(ctx)
}

// openLease sends (or resends) a lease request.
func (w *Worker) openLease(ctx context.Context) {
	w.mu.Lock()
	if w.pendingLease == nil {
		// Before anything is measured, claim the most: the first grants
		// split the rate by weight; later leases report the measurement.
		demand := fsm.MaxDemandMilliPermitsPerSec
		if w.everGranted {
			demand = withHeadroom(w.meter.measure(w.now(), w.cfg.retryNanos))
		}
		w.pendingLease = &fsm.Lease{Limit: w.cfg.Limit, Holder: w.cfg.Name, Group: w.cfg.Group, Weight: w.cfg.Weight,
			DemandMilliPermitsPerSec: demand, TTLNanos: w.cfg.ttlNanos, RequestID: w.newRequestIDLocked()}
		w.stats.DemandMilliPermitsPerSec = demand
	}
	q := *w.pendingLease
	w.inFlight = true
	sentAt := w.now()
	w.mu.Unlock()

	res, err := w.call(ctx, func(ctx context.Context) (fsm.LeaseResult, error) { return w.cfg.Register.Lease(ctx, w.cfg.Limit, q) })

	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.answeredLocked(sentAt)
	if err != nil {
		if errors.Is(err, ErrNotDelivered) {
			w.pendingLease = nil
		}
		w.failedLocked(now, "lease", err)
		return
	}
	w.pendingLease = nil
	switch res.Status {
	case fsm.LeaseGranted:
		w.stats.Leases++
		w.installLocked(now, sentAt, res)
		w.log.Debug("lease granted", "lease", res.LeaseID, "permits", res.Permits, "share", res.ShareMilliPermitsPerSec)
	case fsm.LeaseRefused:
		retry := min(max(res.RetryAfterNanos, w.cfg.retryNanos), w.cfg.ttlNanos)
		w.refusedLocked(now, now+retry, fmt.Errorf("worker: limit %q: %w: %w (%s): retry in %v", w.cfg.Limit, ErrNoPermits, errLeaseRefused, res.Detail, time.Duration(retry)))
	default:
		w.refusedLocked(now, now+w.cfg.renewNanos, fmt.Errorf("worker: limit %q: %w: lease %s: %s", w.cfg.Limit, ErrNoPermits, res.Status, res.Detail))
	}
}

// renew sends (or resends) the renewal of the current lease. Sending it
// closes the current grant: nothing more of it is spent or given away,
// unless the call fails with ErrNotDelivered.
func (w *Worker) renew(ctx context.Context) {
	w.mu.Lock()
	if w.pendingRenew == nil {
		var spent, out int64
		if g := w.cur; g != nil && g.leaseID == w.leaseID && g.epoch == w.epoch {
			g.closed = true
			spent, out = g.spent, g.stolenOut
		}
		demand := w.meter.reportDemand(w.now(), w.cfg.retryNanos, w.share)
		w.pendingRenew = &fsm.Renew{Report: fsm.Report{Limit: w.cfg.Limit, LeaseID: w.leaseID, Epoch: w.epoch, SpentPermits: spent, StolenOutPermits: out, StolenInPermits: w.inSinceReport}, DemandMilliPermitsPerSec: demand, TTLNanos: w.cfg.ttlNanos, RequestID: w.newRequestIDLocked()}
		w.inSinceReport = 0
		w.stats.DemandMilliPermitsPerSec = demand
	}
	q := *w.pendingRenew
	w.inFlight = true
	sentAt := w.now()
	w.mu.Unlock()

	res, err := w.call(ctx, func(ctx context.Context) (fsm.LeaseResult, error) { return w.cfg.Register.Renew(ctx, w.cfg.Limit, q) })

	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.answeredLocked(sentAt)
	if err != nil {
		if errors.Is(err, ErrNotDelivered) {
			// The register never saw the report: the grant is as it was
			// before the send, and may be spent until its local expiry.
			if g := w.cur; g != nil && g.leaseID == q.LeaseID && g.epoch == q.Epoch {
				g.closed = false
			}
			w.inSinceReport += q.StolenInPermits
			w.pendingRenew = nil
		}
		w.failedLocked(now, "renew", err)
		return
	}
	w.pendingRenew = nil
	switch res.Status {
	case fsm.LeaseGranted:
		w.stats.Renewals++
		w.installLocked(now, sentAt, res)
	case fsm.LeaseFenced:
		w.stats.Fenced++
		w.log.Debug("lease fenced, leasing again", "lease", q.LeaseID, "epoch", q.Epoch, "detail", res.Detail)
		w.dropLeaseLocked(now)
		w.regErr = nil
		w.nextRegisterNanos = now
	default:
		w.log.Warn("renewal rejected", "lease", q.LeaseID, "status", res.Status, "detail", res.Detail)
		w.dropLeaseLocked(now)
		w.refusedLocked(now, now+w.cfg.retryNanos, fmt.Errorf("worker: limit %q: %w: renew %s: %s", w.cfg.Limit, ErrNoPermits, res.Status, res.Detail))
	}
}

// answeredLocked records the end of a register call sent at sentAt and
// returns the time.
func (w *Worker) answeredLocked(sentAtNanos int64) int64 {
	now := w.now()
	w.inFlight = false
	w.lastRTTNanos = now - sentAtNanos
	return now
}

// failedLocked records a call that got no answer: retry soon.
func (w *Worker) failedLocked(nowNanos int64, op string, err error) {
	w.stats.RegisterFails++
	w.regErr = fmt.Errorf("%s: %w", op, err)
	w.nextRegisterNanos = nowNanos + w.cfg.retryNanos
	w.log.Debug("register call failed", "op", op, "error", err)
	w.broadcastLocked()
}

// refusedLocked records an answer that gave no lease.
func (w *Worker) refusedLocked(nowNanos, retryAtNanos int64, err error) {
	w.regErr = nil
	w.regRefusal = err
	w.nextRegisterNanos = retryAtNanos
	w.log.Debug("no lease", "error", err)
	w.broadcastLocked()
}

// installLocked makes a granting answer the current grant. Its local
// expiry counts from sentAt, when the request was sent, not from now.
func (w *Worker) installLocked(nowNanos, sentAtNanos int64, res fsm.LeaseResult) {
	g := &grant{leaseID: res.LeaseID, epoch: res.Epoch, permits: res.Permits, sentAtNanos: sentAtNanos,
		expiryNanos: localExpiry(sentAtNanos, res.ExpiresInNanos, w.cfg.ttlNanos, w.cfg.marginNanos)}
	w.cur = g
	w.leaseID, w.epoch = res.LeaseID, res.Epoch
	w.share = res.ShareMilliPermitsPerSec
	w.everGranted = true
	w.stats.LeasedPermits += res.Permits
	w.stats.CreditedPermits += res.CreditedPermits
	w.regErr, w.regRefusal = nil, nil
	w.lastGoodNanos = nowNanos
	w.nextRenewNanos = sentAtNanos + w.cfg.renewNanos
	if g.expiryNanos <= nowNanos {
		// A replayed answer whose grant already expired: renew at once
		// (the register fences it and the worker leases again).
		w.nextRenewNanos = nowNanos
	}
	w.nextRegisterNanos = w.nextRenewNanos
	w.pace.trimBacklog(nowNanos, w.cfg.renewNanos/4)
	w.updatePaceLocked(nowNanos)
	w.broadcastLocked()
}

// dropLeaseLocked forgets a lease the register no longer knows: what was
// left of its grant expired at the register.
func (w *Worker) dropLeaseLocked(nowNanos int64) {
	if g := w.cur; g != nil {
		w.stats.ExpiredUnusedPermits += g.left()
	}
	w.cur = nil
	w.leaseID, w.epoch = 0, 0
	w.broadcastLocked()
}

// updatePaceLocked sets the pacer to the share, or, without a share, to
// the measured demand (at least one permit per second), so that stolen
// permits can still be spread.
func (w *Worker) updatePaceLocked(nowNanos int64) {
	rate := w.share
	if rate <= 0 {
		rate = max(w.meter.current(nowNanos), 1000)
	}
	if err := w.pace.setRate(nowNanos, rate); err != nil {
		w.log.Error("cannot set the pacing rate", "rate_milli", rate, "error", err)
	}
}

// returnLease closes the current grant and returns the lease, retrying a
// failed call until ctx is done or the lease has expired at the register
// anyway (a TTL after the last good answer).
func (w *Worker) returnLease(ctx context.Context) error {
	w.mu.Lock()
	if w.leaseID == 0 {
		w.mu.Unlock()
		return nil
	}
	var q fsm.Return
	if p := w.pendingRenew; p != nil {
		// A renew of this grant may have been applied: report the same;
		// if it was, the return is fenced and its new grant expires
		// unspent.
		q = fsm.Return{Report: fsm.Report{LeaseID: p.LeaseID, Epoch: p.Epoch, SpentPermits: p.SpentPermits, StolenOutPermits: p.StolenOutPermits, StolenInPermits: p.StolenInPermits + w.inSinceReport}}
	} else {
		q = fsm.Return{Report: fsm.Report{LeaseID: w.leaseID, Epoch: w.epoch, StolenInPermits: w.inSinceReport}}
		if g := w.cur; g != nil && g.leaseID == w.leaseID && g.epoch == w.epoch {
			g.closed = true
			q.SpentPermits, q.StolenOutPermits = g.spent, g.stolenOut
		}
	}
	q.Limit = w.cfg.Limit
	q.RequestID = w.newRequestIDLocked()
	// Past this the lease has expired at the register (its last grant was
	// decided before the answer arrived), and returning it is moot.
	moot := w.lastGoodNanos + w.cfg.ttlNanos
	w.mu.Unlock()

	for {
		res, err := w.call(ctx, func(ctx context.Context) (fsm.LeaseResult, error) { return w.cfg.Register.Return(ctx, w.cfg.Limit, q) })
		if err == nil {
			w.mu.Lock()
			w.stats.CreditedPermits += res.CreditedPermits
			if res.Status != fsm.LeaseReturned {
				w.dropLeaseLocked(w.now())
			} else {
				w.cur = nil
				w.leaseID, w.epoch = 0, 0
			}
			w.mu.Unlock()
			w.reportStats()
			if res.Status != fsm.LeaseReturned && res.Status != fsm.LeaseFenced {
				return fmt.Errorf("worker %q: return lease %d: %s: %s", w.cfg.Name, q.LeaseID, res.Status, res.Detail)
			}
			return nil
		}
		if w.now() >= moot {
			return fmt.Errorf("worker %q: return lease %d: gave up, the lease has expired at the register: %w", w.cfg.Name, q.LeaseID, err)
		}
		t := time.NewTimer(time.Duration(w.cfg.retryNanos))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("worker %q: return lease %d (it expires at the register after its TTL): %w", w.cfg.Name, q.LeaseID, err)
		case <-t.C:
		}
	}
}
