package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// leaseanswer.go: how the lease state takes the register's answers to a
// lease, a renewal and a return (see leaseState for the model).

// answer takes, at now, the register's answer (res, or err when no answer
// came) to a, the lease or renewal last sent.
func (s *leaseState) answer(nowNanos int64, a leaseAction, res client.LeaseGrant, err error) leaseOutcome {
	if !s.inFlight || (a.op != opLease && a.op != opRenew) {
		return leaseOutcome{}
	}
	s.inFlight = false
	s.lastRTTNanos = nowNanos - a.atNanos
	if err == nil || rejected(err) {
		s.silentSinceNanos = -1 // the register answered
	}
	if a.op == opLease {
		return s.leaseAnswer(nowNanos, a, res, err)
	}
	return s.renewAnswer(nowNanos, a, res, err)
}

// leaseAnswer takes the answer to a lease request.
func (s *leaseState) leaseAnswer(nowNanos int64, a leaseAction, res client.LeaseGrant, err error) leaseOutcome {
	limit := s.p.limit
	switch {
	case rejected(err):
		s.pendingLease = nil
		return s.refused(nowNanos+s.p.renewNanos, fmt.Errorf("worker: limit %q: %w: lease: %w", limit, ErrNoPermits, err))
	case err != nil:
		if s.undelivered(err) {
			s.pendingLease = nil
		}
		return s.failed(nowNanos, "lease", err)
	}
	s.pendingLease = nil
	switch res.Status {
	case client.LeaseGranted:
		s.counters.leases++
		s.install(nowNanos, a.atNanos, res)
		return leaseOutcome{event: evGranted, msg: "lease granted", kv: []any{"lease", res.LeaseID, "permits", res.Permits, "share", res.ShareMilliPerSec}}
	case client.LeaseFenced:
		// A retried lease whose first send was applied, but whose grant
		// expired before the retry arrived (a register slower than the
		// worker's request timeout): that lease is over at the register.
		// Lease again at once, with a new request.
		s.counters.fenced++
		s.regErr, s.regRefusal = nil, nil
		s.nextCallNanos = nowNanos
		return leaseOutcome{event: evFenced, msg: "lease answered fenced (its grant expired before the retry arrived), leasing again",
			kv: []any{"lease", res.LeaseID, "detail", res.Detail}}
	case client.LeaseRefused:
		retry := min(max(int64(res.RetryAfter), s.p.retryNanos), s.p.ttlNanos)
		return s.refused(nowNanos+retry, fmt.Errorf("worker: limit %q: %w: %w (%s): retry in %v", limit, ErrNoPermits, errLeaseRefused, res.Detail, time.Duration(retry)))
	}
	return s.refused(nowNanos+s.p.renewNanos, fmt.Errorf("worker: limit %q: %w: lease %s: %s", limit, ErrNoPermits, res.Status, res.Detail))
}

// renewAnswer takes the answer to a renewal.
func (s *leaseState) renewAnswer(nowNanos int64, a leaseAction, res client.LeaseGrant, err error) leaseOutcome {
	limit := s.p.limit
	if err != nil && !rejected(err) {
		if s.undelivered(err) {
			// The register never saw the report: the grant is as it was
			// before the send, and may be spent until its usable-until.
			if g := s.cur; g != nil && g.leaseID == a.leaseID && g.epoch == a.epoch {
				// What it spent of the kept permits is now simply spent.
				g.closed, g.spent, g.kept, g.keptSpent = false, g.spent+g.keptSpent, 0, 0
			}
			s.inSinceReport += a.report.StolenIn
			s.pendingRenew = nil
		}
		return s.failed(nowNanos, "renew", err)
	}
	s.pendingRenew = nil
	switch {
	case err != nil:
		s.dropLease()
		o := s.refused(nowNanos+s.p.retryNanos, fmt.Errorf("worker: limit %q: %w: renew: %w", limit, ErrNoPermits, err))
		o.warn, o.msg, o.kv = true, "renewal rejected", []any{"lease", a.leaseID, "error", err}
		return o
	case res.Status == client.LeaseGranted:
		s.counters.renewals++
		var keptSpent int64
		if g := s.cur; g != nil && g.leaseID == a.leaseID && g.epoch == a.epoch {
			keptSpent = g.keptSpent
		}
		s.install(nowNanos, a.atNanos, res)
		// The kept permits are the new grant's first ones: those spent
		// while the renewal was in flight are spent of it.
		s.cur.spent = min(keptSpent, res.Permits)
		s.counters.leasedPermits -= min(a.report.Kept, res.Permits)
		return leaseOutcome{event: evGranted}
	case res.Status == client.LeaseFenced:
		s.counters.fenced++
		s.dropLease()
		s.regErr = nil
		s.nextCallNanos = nowNanos
		return leaseOutcome{event: evFenced, msg: "lease fenced, leasing again", kv: []any{"lease", a.leaseID, "epoch", a.epoch, "detail", res.Detail}}
	}
	s.dropLease()
	o := s.refused(nowNanos+s.p.retryNanos, fmt.Errorf("worker: limit %q: %w: renew %s: %s", limit, ErrNoPermits, res.Status, res.Detail))
	o.warn, o.msg, o.kv = true, "renewal answered unexpectedly", []any{"lease", a.leaseID, "status", res.Status, "detail", res.Detail}
	return o
}

// undelivered reports whether err proves that the pending request never
// reached the register: ErrNotDelivered, and no earlier send of the same
// request got an ambiguous failure (else maybeApplied is set: from then
// on the request is only sent again as it was).
func (s *leaseState) undelivered(err error) bool {
	if !errors.Is(err, client.ErrNotDelivered) {
		s.maybeApplied = true
		return false
	}
	return !s.maybeApplied
}

// failed records a call that got no answer: retry after RetryEvery.
func (s *leaseState) failed(nowNanos int64, op string, err error) leaseOutcome {
	s.counters.registerFails++
	s.regErr = fmt.Errorf("%s: %w", op, err)
	s.nextCallNanos = nowNanos + s.p.retryNanos
	return leaseOutcome{event: evFailed, err: s.regErr, msg: "register call failed", kv: []any{"op", op, "error", err}}
}

// refused records an answer that gave no lease: retry at retryAt.
func (s *leaseState) refused(retryAtNanos int64, err error) leaseOutcome {
	s.regErr = nil
	s.regRefusal = err
	s.nextCallNanos = retryAtNanos
	return leaseOutcome{event: evRefused, err: err, msg: "no lease", kv: []any{"error", err}}
}

// install makes a granting answer the current grant. Its usable-until
// counts from sentAt, when the request was sent, not from now.
func (s *leaseState) install(nowNanos, sentAtNanos int64, res client.LeaseGrant) {
	g := &grant{leaseID: res.LeaseID, epoch: res.Epoch, permits: res.Permits, sentAtNanos: sentAtNanos,
		expiryNanos: localExpiry(sentAtNanos, int64(res.ExpiresIn), s.p.ttlNanos, s.p.marginNanos)}
	s.cur = g
	s.leaseID, s.epoch = res.LeaseID, res.Epoch
	s.share = res.ShareMilliPerSec
	s.everGranted = true
	s.counters.leasedPermits += res.Permits
	s.counters.creditedPermits += res.CreditedPermits
	s.regErr, s.regRefusal = nil, nil
	s.lastGoodNanos = nowNanos
	s.nextRenewNanos = sentAtNanos + s.p.renewNanos
	if g.expiryNanos <= nowNanos {
		// A replayed answer whose grant already expired: renew at once
		// (the register fences it and the worker leases again).
		s.nextRenewNanos = nowNanos
	}
	s.nextCallNanos = s.nextRenewNanos
}

// dropLease forgets a lease the register no longer knows: what was left
// of its grant expired at the register.
func (s *leaseState) dropLease() {
	if g := s.cur; g != nil {
		s.counters.expiredUnusedPermits += g.left()
	}
	s.cur = nil
	s.leaseID, s.epoch = 0, 0
}

// returnCall returns the call to send at now to return the lease (opNone:
// no lease). A lease or renewal sent without an answer goes first, again
// as it was (opLease, opRenew): the register may have applied it, and then
// holds a lease or an epoch the worker does not know, which a return of
// the grant before it would not close (it would be answered fenced, and
// the lease would stay open until its TTL); a copy the register applied
// is answered from its dedup table. Then the return (opReturn) closes the
// current grant and reports on it. A return sent without an answer is
// sent again as it was.
func (s *leaseState) returnCall(nowNanos int64) leaseAction {
	if s.pendingReturn == nil {
		switch {
		case s.leaseID == 0 && s.pendingLease != nil, s.leaseID != 0 && s.pendingRenew != nil:
			return s.send(nowNanos)
		case s.leaseID == 0:
			return leaseAction{op: opNone}
		}
		q := renewCall{leaseID: s.leaseID, epoch: s.epoch, rep: client.LeaseReport{StolenIn: s.inSinceReport}}
		if g := s.curGrant(); g != nil {
			g.closed = true
			q.rep.Spent, q.rep.StolenOut = g.spent, g.stolenOut
		}
		q.rep.RequestID = s.newRequestID()
		s.pendingReturn = &q
	}
	s.inFlight, s.callSentNanos = true, nowNanos
	q := s.pendingReturn
	return leaseAction{op: opReturn, atNanos: nowNanos, leaseID: q.leaseID, epoch: q.epoch, report: q.rep}
}

// returnStep is what to do after a return's answer: done (with err when
// the lease could not be returned), or send the return again at
// retryAtNanos.
type returnStep struct {
	done         bool
	err          error
	retryAtNanos int64
}

// returnAnswer takes, at now, the answer to the return a. A failed call
// is sent again after RetryEvery, until the lease has expired at the
// register anyway: a TTL after the last good answer (its last grant was
// decided before that answer arrived).
func (s *leaseState) returnAnswer(nowNanos int64, a leaseAction, res client.LeaseGrant, err error) returnStep {
	if !s.inFlight || a.op != opReturn {
		return returnStep{}
	}
	s.inFlight = false
	s.lastRTTNanos = nowNanos - a.atNanos
	name := s.p.holder
	switch {
	case rejected(err):
		s.pendingReturn = nil
		s.dropLease()
		return returnStep{done: true, err: fmt.Errorf("worker %q: return lease %d: %w", name, a.leaseID, err)}
	case err == nil:
		s.pendingReturn, s.pendingRenew = nil, nil
		s.counters.creditedPermits += res.CreditedPermits
		if res.Status != client.LeaseReturned {
			s.dropLease()
		} else {
			s.cur = nil
			s.leaseID, s.epoch = 0, 0
		}
		if res.Status != client.LeaseReturned && res.Status != client.LeaseFenced {
			return returnStep{done: true, err: fmt.Errorf("worker %q: return lease %d: %s: %s", name, a.leaseID, res.Status, res.Detail)}
		}
		return returnStep{done: true}
	case nowNanos >= s.lastGoodNanos+s.p.ttlNanos:
		return returnStep{done: true, err: fmt.Errorf("worker %q: return lease %d: gave up, the lease has expired at the register: %w", name, a.leaseID, err)}
	}
	return returnStep{retryAtNanos: nowNanos + s.p.retryNanos}
}
