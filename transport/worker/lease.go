package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/permitd/permitd/transport/client"
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
func (w *Worker) call(parent context.Context, f func(context.Context) (client.LeaseGrant, error)) (client.LeaseGrant, error) {
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
		demand := int64(client.MaxDemandMilliPerSec)
		if w.everGranted {
			demand = withHeadroom(w.meter.measure(w.now(), w.cfg.retryNanos))
		}
		w.pendingLease = &client.LeaseRequest{Holder: w.cfg.Name, Group: w.cfg.Group, Weight: w.cfg.Weight,
			DemandMilliPerSec: demand, TTL: time.Duration(w.cfg.ttlNanos), RequestID: w.newRequestIDLocked()}
		w.stats.DemandMilliPermitsPerSec = demand
	}
	q := *w.pendingLease
	w.inFlight = true
	sentAt := w.now()
	w.mu.Unlock()

	res, err := w.call(ctx, func(ctx context.Context) (client.LeaseGrant, error) { return w.cfg.Register.Lease(ctx, w.cfg.Limit, q) })

	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.answeredLocked(sentAt)
	switch {
	case rejected(err):
		w.pendingLease = nil
		w.refusedLocked(now, now+w.cfg.renewNanos, fmt.Errorf("worker: limit %q: %w: lease: %w", w.cfg.Limit, ErrNoPermits, err))
		return
	case err != nil:
		if errors.Is(err, client.ErrNotDelivered) {
			w.pendingLease = nil
		}
		w.failedLocked(now, "lease", err)
		return
	}
	w.pendingLease = nil
	switch res.Status {
	case client.LeaseGranted:
		w.stats.Leases++
		w.installLocked(now, sentAt, res)
		w.log.Debug("lease granted", "lease", res.LeaseID, "permits", res.Permits, "share", res.ShareMilliPerSec)
	case client.LeaseRefused:
		retry := min(max(int64(res.RetryAfter), w.cfg.retryNanos), w.cfg.ttlNanos)
		w.refusedLocked(now, now+retry, fmt.Errorf("worker: limit %q: %w: %w (%s): retry in %v", w.cfg.Limit, ErrNoPermits, errLeaseRefused, res.Detail, time.Duration(retry)))
	default:
		w.refusedLocked(now, now+w.cfg.renewNanos, fmt.Errorf("worker: limit %q: %w: lease %s: %s", w.cfg.Limit, ErrNoPermits, res.Status, res.Detail))
	}
}

// rejected reports whether err is the register's (or the client's)
// definite refusal of a request: the limit does not exist or the request
// is invalid (see Register). Nothing was applied.
func rejected(err error) bool {
	return err != nil && !errors.Is(err, client.ErrNotDelivered) && (errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrInvalid))
}

// renewCall is a renewal: the grant it reports on and the report.
type renewCall struct {
	leaseID, epoch uint64
	rep            client.LeaseReport
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
		w.pendingRenew = &renewCall{leaseID: w.leaseID, epoch: w.epoch, rep: client.LeaseReport{Spent: spent, StolenOut: out,
			StolenIn: w.inSinceReport, DemandMilliPerSec: demand, TTL: time.Duration(w.cfg.ttlNanos), RequestID: w.newRequestIDLocked()}}
		w.inSinceReport = 0
		w.stats.DemandMilliPermitsPerSec = demand
	}
	q := *w.pendingRenew
	w.inFlight = true
	sentAt := w.now()
	w.mu.Unlock()

	res, err := w.call(ctx, func(ctx context.Context) (client.LeaseGrant, error) {
		return w.cfg.Register.Renew(ctx, w.cfg.Limit, q.leaseID, q.epoch, q.rep)
	})

	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.answeredLocked(sentAt)
	if err != nil && !rejected(err) {
		if errors.Is(err, client.ErrNotDelivered) {
			// The register never saw the report: the grant is as it was
			// before the send, and may be spent until its local expiry.
			if g := w.cur; g != nil && g.leaseID == q.leaseID && g.epoch == q.epoch {
				g.closed = false
			}
			w.inSinceReport += q.rep.StolenIn
			w.pendingRenew = nil
		}
		w.failedLocked(now, "renew", err)
		return
	}
	w.pendingRenew = nil
	switch {
	case err != nil:
		w.log.Warn("renewal rejected", "lease", q.leaseID, "error", err)
		w.dropLeaseLocked(now)
		w.refusedLocked(now, now+w.cfg.retryNanos, fmt.Errorf("worker: limit %q: %w: renew: %w", w.cfg.Limit, ErrNoPermits, err))
	case res.Status == client.LeaseGranted:
		w.stats.Renewals++
		w.installLocked(now, sentAt, res)
	case res.Status == client.LeaseFenced:
		w.stats.Fenced++
		w.log.Debug("lease fenced, leasing again", "lease", q.leaseID, "epoch", q.epoch, "detail", res.Detail)
		w.dropLeaseLocked(now)
		w.regErr = nil
		w.nextRegisterNanos = now
	default:
		w.log.Warn("renewal answered unexpectedly", "lease", q.leaseID, "status", res.Status, "detail", res.Detail)
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
func (w *Worker) installLocked(nowNanos, sentAtNanos int64, res client.LeaseGrant) {
	g := &grant{leaseID: res.LeaseID, epoch: res.Epoch, permits: res.Permits, sentAtNanos: sentAtNanos,
		expiryNanos: localExpiry(sentAtNanos, int64(res.ExpiresIn), w.cfg.ttlNanos, w.cfg.marginNanos)}
	w.cur = g
	w.leaseID, w.epoch = res.LeaseID, res.Epoch
	w.share = res.ShareMilliPerSec
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
	var q renewCall
	if p := w.pendingRenew; p != nil {
		// A renew of this grant may have been applied: report the same;
		// if it was, the return is fenced and its new grant expires
		// unspent.
		q = renewCall{leaseID: p.leaseID, epoch: p.epoch, rep: client.LeaseReport{Spent: p.rep.Spent, StolenOut: p.rep.StolenOut,
			StolenIn: p.rep.StolenIn + w.inSinceReport}}
	} else {
		q = renewCall{leaseID: w.leaseID, epoch: w.epoch, rep: client.LeaseReport{StolenIn: w.inSinceReport}}
		if g := w.cur; g != nil && g.leaseID == w.leaseID && g.epoch == w.epoch {
			g.closed = true
			q.rep.Spent, q.rep.StolenOut = g.spent, g.stolenOut
		}
	}
	q.rep.RequestID = w.newRequestIDLocked()
	// Past this the lease has expired at the register (its last grant was
	// decided before the answer arrived), and returning it is moot.
	moot := w.lastGoodNanos + w.cfg.ttlNanos
	w.mu.Unlock()

	for {
		res, err := w.call(ctx, func(ctx context.Context) (client.LeaseGrant, error) {
			return w.cfg.Register.Return(ctx, w.cfg.Limit, q.leaseID, q.epoch, q.rep)
		})
		if rejected(err) {
			w.mu.Lock()
			w.dropLeaseLocked(w.now())
			w.mu.Unlock()
			w.reportStats()
			return fmt.Errorf("worker %q: return lease %d: %w", w.cfg.Name, q.leaseID, err)
		}
		if err == nil {
			w.mu.Lock()
			w.stats.CreditedPermits += res.CreditedPermits
			if res.Status != client.LeaseReturned {
				w.dropLeaseLocked(w.now())
			} else {
				w.cur = nil
				w.leaseID, w.epoch = 0, 0
			}
			w.mu.Unlock()
			w.reportStats()
			if res.Status != client.LeaseReturned && res.Status != client.LeaseFenced {
				return fmt.Errorf("worker %q: return lease %d: %s: %s", w.cfg.Name, q.leaseID, res.Status, res.Detail)
			}
			return nil
		}
		if w.now() >= moot {
			return fmt.Errorf("worker %q: return lease %d: gave up, the lease has expired at the register: %w", w.cfg.Name, q.leaseID, err)
		}
		t := time.NewTimer(time.Duration(w.cfg.retryNanos))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("worker %q: return lease %d (it expires at the register after its TTL): %w", w.cfg.Name, q.leaseID, err)
		case <-t.C:
		}
	}
}
