package worker

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// Acquire waits until n permits can be spent, paced locally, and spends
// them. It fails closed with an error wrapping ErrNoPermits when the worker
// holds no permit and cannot expect one (the register refuses the lease,
// or has left the worker's calls unanswered for UnreachableAfter and
// stealing did not help: the error then also wraps ErrRegisterUnreachable
// and says how long the register has been silent; a shorter silence, such
// as an election, is waited out);
// with ctx's error when ctx ends first (or, wrapping
// context.DeadlineExceeded, at once when the pacing alone would pass ctx's
// deadline); with ErrStopped after Stop.
//
// Permits are handed out at one instant, under the worker's lock, from
// permits that are spendable at that instant (stolen lots first, earliest
// deadline first, then the open grant). If ctx ends while Acquire waits
// for its pacing slot, the slot is lost (never the permits).
func (w *Worker) Acquire(ctx context.Context, n int64) error {
	_, err := w.acquire(ctx, n, false, 0)
	return err
}

// TryAcquire spends n permits if it can within maxWait (pacing and
// waiting for permits included) and reports whether it did. It returns
// false with a nil error when the wait would be longer, and false with the
// errors of Acquire when the worker fails closed. A negative maxWait is
// treated as 0: spend only if no wait is needed.
func (w *Worker) TryAcquire(n int64, maxWait time.Duration) (bool, error) {
	return w.acquire(context.Background(), n, true, max(maxWait, 0))
}

// acquire is Acquire (try false: bounded by ctx) and TryAcquire (try true:
// bounded by maxWait).
func (w *Worker) acquire(ctx context.Context, n int64, try bool, maxWait time.Duration) (bool, error) {
	if n < 1 {
		return false, fmt.Errorf("%w: %d permits (allowed: >= 1)", ErrInvalidPermits, n)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("worker: acquire %d permits: %w", n, err)
	}
	w.mu.Lock()
	if !w.started {
		w.mu.Unlock()
		return false, fmt.Errorf("worker %q: acquire: %w", w.cfg.Name, ErrNotStarted)
	}
	now := w.now()
	deadline := acquireDeadline(ctx, now, try, maxWait)
	w.lease.meter.add(n)
	prepaid, waiting := false, false
	var target uint64
	// finish leaves the loop: it is called with mu held and releases it.
	finish := func(ok bool, err error) (bool, error) {
		if waiting {
			w.steal.waitingPermits -= n
		}
		w.mu.Unlock()
		return ok, err
	}
	for {
		if w.stopping {
			return finish(false, fmt.Errorf("worker %q: acquire: %w", w.cfg.Name, ErrStopped))
		}
		w.expireLocked(now)
		if w.spendableLocked(now) >= n {
			if !prepaid {
				maxWaitNanos := int64(unboundedWait)
				if deadline != math.MaxInt64 {
					maxWaitNanos = max(deadline-now, 0)
				}
				at, ok, err := w.pace.reserve(now, n, maxWaitNanos)
				if err != nil {
					return finish(false, fmt.Errorf("worker: acquire %d permits: %w", n, err))
				}
				if !ok {
					w.lease.meter.hold(min(at, deadline) - now)
					if try {
						return finish(false, nil)
					}
					return finish(false, fmt.Errorf("worker: acquire %d permits: pacing needs %v but the context deadline is in %v: %w",
						n, time.Duration(at-now), time.Duration(deadline-now), context.DeadlineExceeded))
				}
				prepaid = true
				if at > now {
					// The caller is paced (slept or not, it waits for a slot).
					w.lease.meter.hold(at - now)
				}
				if at > now+paceSlackNanos {
					w.mu.Unlock()
					slept := w.sleep(ctx, at-now)
					w.mu.Lock()
					now = w.now()
					if !slept && !w.stopping {
						return finish(false, fmt.Errorf("worker: acquire %d permits: %w", n, ctx.Err()))
					}
					continue // re-check: the grant may have been closed meanwhile
				}
			}
			w.debitLocked(now, n)
			return finish(true, nil)
		}
		if target == 0 {
			target = w.steal.roundsStarted + 1
		}
		// target is the first steal round started after the caller began
		// to wait: cut off from the register, it fails once that round
		// has finished without helping, or at once when its steal grace
		// is over.
		if err := w.lease.failClosed(now, w.steal.roundsDone < target); err != nil {
			return finish(false, err)
		}
		if !waiting {
			w.steal.waitingPermits += n
			waiting = true
		}
		w.kickStealLocked()
		if now >= deadline {
			if try {
				return finish(false, nil)
			}
			return finish(false, fmt.Errorf("worker: acquire %d permits: %w", n, context.DeadlineExceeded))
		}
		now = w.awaitChangeLocked(ctx, now, deadline)
		if err := ctx.Err(); err != nil {
			return finish(false, fmt.Errorf("worker: acquire %d permits: %w", n, err))
		}
	}
}

// acquireDeadline is when an acquire started at now gives up: now plus
// maxWait (try), or its context's deadline, or never (math.MaxInt64).
// Saturating: TryAcquire accepts any max wait, and a context's deadline
// may lie centuries ahead (time.Until saturates too).
func acquireDeadline(ctx context.Context, now int64, try bool, maxWait time.Duration) int64 {
	if try {
		return wire.AddNanos(now, int64(maxWait))
	}
	if dl, ok := ctx.Deadline(); ok {
		return wire.AddNanos(now, int64(time.Until(dl)))
	}
	return math.MaxInt64
}

// awaitChangeLocked waits, without mu (held on entry and on return), for
// the worker's state to change (a grant, a stolen lot, a stop), for its
// retry period, for ctx, or until deadline, whichever comes first; it
// counts the wait as held demand and returns the time it woke at.
func (w *Worker) awaitChangeLocked(ctx context.Context, now, deadline int64) int64 {
	changed := w.changed
	w.mu.Unlock()
	wake := min(deadline-now, w.cfg.retryNanos)
	t := time.NewTimer(time.Duration(wake))
	select {
	case <-changed:
	case <-t.C:
	case <-ctx.Done():
	case <-w.run.done:
	}
	t.Stop()
	w.mu.Lock()
	woke := w.now()
	w.lease.meter.hold(woke - now)
	return woke
}

// paceSlackNanos is the longest pacing wait Acquire does not sleep: the
// permits are handed out up to that long before their pacing slot. A
// timer sleep of a few tens of microseconds takes longer than asked (and a
// caller that overslept catches up at BurstRatio only), so at a share of
// tens of thousands of permits per second, sleeping for every slot would
// spend well below the share. The pacer's slots still advance at the
// share: handing permits out early only lets a worker run up to
// paceSlackNanos*share (+1) permits ahead of its pace, never beyond the
// grant's count, which alone enters the over-grant bound.
const paceSlackNanos = int64(200 * time.Microsecond)

// sleep waits d nanoseconds; false if ctx or the worker ended first.
func (w *Worker) sleep(ctx context.Context, d int64) bool {
	t := time.NewTimer(time.Duration(d))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-w.run.done:
		return false
	}
}

// spendableLocked returns the permits that may be spent at now: the open
// grant's and the unexpired stolen ones.
func (w *Worker) spendableLocked(nowNanos int64) int64 {
	return w.lease.spendable(nowNanos) + w.steal.lots.total(nowNanos)
}

// expireLocked drops the stolen lots past their deadline.
func (w *Worker) expireLocked(nowNanos int64) {
	w.stats.ExpiredUnusedPermits += w.steal.lots.prune(nowNanos)
}

// debitLocked spends n spendable permits at now: stolen lots first (they
// expire unused, while a grant's leftovers are credited back), then the
// grant.
func (w *Worker) debitLocked(nowNanos, n int64) {
	fromLots := min(n, w.steal.lots.total(nowNanos))
	if fromLots > 0 {
		var took func(l lot, k int64)
		if hook := w.cfg.onSpend; hook != nil {
			took = func(l lot, k int64) { hook(l.leaseID, l.epoch, k, true, false) }
		}
		w.steal.lots.take(nowNanos, fromLots, took)
		w.stats.SpentStolenPermits += fromLots
	}
	if rest := n - fromLots; rest > 0 {
		g := w.lease.cur
		if hook := w.cfg.onSpend; hook != nil {
			hook(g.leaseID, g.epoch, rest, false, g.closed)
		}
		g.debit(rest)
	}
	w.stats.SpentPermits += n
}
