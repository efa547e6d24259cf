package fsm

import (
	"container/heap"
	"fmt"
	"math"
	"time"
)

// leaseops.go: the lease commands as Apply decides them: lease, renew and
// return (one by one, or a CmdLeaseBatch of them), and the lease policy.
// Every decision on a lease, renew or return is a leaseOutcome in absolute
// cluster time (what the dedup table keeps); the LeaseResult is that
// outcome seen from the entry's now. The size of a grant is in
// leasegrant.go, the book it changes in leasebook.go.

// leaseOutcome is the decision on one lease, renew or return.
type leaseOutcome struct {
	op     CommandType
	status LeaseStatus
	// leaseID and epoch: see LeaseResult.
	leaseID, epoch uint64
	// permits, share and credited: see LeaseResult.
	permits, share, credited int64
	// atNanos is, when Granted, the grant's expiry and, when Refused, the
	// earliest time the lease could be opened.
	atNanos int64
	detail  string
}

// resultAt expresses o relative to nowNanos (>= the time of the decision).
func (o *leaseOutcome) resultAt(nowNanos int64) LeaseResult {
	res := LeaseResult{Status: o.status, LeaseID: o.leaseID, Epoch: o.epoch, Permits: o.permits,
		ShareMilliPermitsPerSec: o.share, CreditedPermits: o.credited, Detail: o.detail}
	switch o.status {
	case LeaseGranted:
		res.ExpiresInNanos = -1
		if o.atNanos > nowNanos {
			res.ExpiresInNanos = o.atNanos - nowNanos
		}
	case LeaseRefused:
		res.RetryAfterNanos = 1
		if o.atNanos > nowNanos {
			res.RetryAfterNanos = o.atNanos - nowNanos
		}
	}
	return res
}

// opName names a lease command in messages.
func opName(op CommandType) string {
	switch op {
	case CmdLease:
		return "lease"
	case CmdRenew:
		return "renew"
	case CmdReturn:
		return "return"
	}
	return "reserve"
}

// leaseCommand answers a known request ID from the dedup table, or decides
// the command and records its outcome under a new one.
func (s *state) leaseCommand(nowNanos int64, op CommandType, requestID string, decide func() leaseOutcome) LeaseResult {
	if requestID != "" {
		kind := ""
		if rec := s.leaseDedup.lookup(requestID); rec != nil {
			if rec.lease.op == op {
				res := rec.lease.resultAt(nowNanos)
				res.Duplicate = true
				return res
			}
			kind = opName(rec.lease.op)
		} else if _, waiting := s.waits.byRequestID[requestID]; waiting || s.dedup.lookup(requestID) != nil {
			kind = "reserve"
		}
		if kind != "" {
			return LeaseResult{Status: LeaseInvalid, Duplicate: true, Detail: boundDetail(fmt.Sprintf(
				"request id %q was used by a %s, not a %s: use a new id for a new command", requestID, kind, opName(op)))}
		}
	}
	o := decide()
	o.op = op
	o.detail = boundDetail(o.detail)
	if requestID != "" {
		lo := o
		s.leaseDedup.add(dedupRecord{id: requestID, recordedAtNanos: nowNanos, lease: &lo})
	}
	return o.resultAt(nowNanos)
}

// leasedLimit returns the limit and pool a lease command addresses, or the
// outcome that ends it: UnknownLimit, or Invalid if the limit is not
// leased.
func (s *state) leasedLimit(name string) (*limit, *leasePool, *leaseOutcome) {
	if why := s.templatedDetail(name); why != "" {
		// The same whether the key lives or was dropped.
		return nil, nil, &leaseOutcome{status: LeaseInvalid, detail: why}
	}
	l, ok := s.limits[name]
	if !ok {
		return nil, nil, &leaseOutcome{status: LeaseUnknownLimit}
	}
	if l.pool == nil {
		return nil, nil, &leaseOutcome{status: LeaseInvalid, detail: fmt.Sprintf(
			"limit %q is not leased: its permits are reserved one request at a time (a lease policy with Leased=true makes it leased)", name)}
	}
	return l, l.pool, nil
}

// checkExpiry rejects a TTL that would take the expiry past the int64
// timeline (cluster time 292 years after the origin).
func checkExpiry(nowNanos, ttlNanos int64, limit string) *leaseOutcome {
	if nowNanos > math.MaxInt64-ttlNanos {
		return &leaseOutcome{status: LeaseInvalid, detail: fmt.Sprintf(
			"limit %q: cluster time %d plus TTL %dns overflows int64", limit, nowNanos, ttlNanos)}
	}
	return nil
}

// lease opens a lease: its holder must not hold one on the limit already,
// and the limit must hold fewer than MaxLeasesPerLimit leases. The new
// lease gets the next ID, epoch 1 and a first grant (see grant).
func (s *state) lease(nowNanos int64, q *Lease) LeaseResult {
	return s.leaseCommand(nowNanos, CmdLease, q.RequestID, func() leaseOutcome {
		l, p, stop := s.leasedLimit(q.Limit)
		if stop != nil {
			return *stop
		}
		if stop := checkExpiry(nowNanos, q.TTLNanos, q.Limit); stop != nil {
			return *stop
		}
		if old := p.byHolder[q.Holder]; old != nil {
			return leaseOutcome{status: LeaseRefused, leaseID: old.id, epoch: old.epoch, atNanos: old.expiresAtNanos, detail: fmt.Sprintf(
				"holder %q already holds lease %d (epoch %d) on limit %q: renew or return it", q.Holder, old.id, old.epoch, q.Limit)}
		}
		if len(p.leases) >= MaxLeasesPerLimit {
			return leaseOutcome{status: LeaseRefused, atNanos: p.earliestEventNanos(), detail: fmt.Sprintf(
				"limit %q holds %d leases (allowed: at most %d)", q.Limit, len(p.leases), MaxLeasesPerLimit)}
		}
		interval := l.conf.cfg.IntervalNanos
		p.accrue(nowNanos, interval)
		s.lastLeaseID++
		ls := &lease{limit: l.name, pool: p, id: s.lastLeaseID, epoch: 1, active: true,
			holder: q.Holder, group: q.Group, weight: q.Weight, demand: q.DemandMilliPermitsPerSec}
		p.addLease(ls)
		p.grant(nowNanos, ls, q.TTLNanos, interval, 0, 0)
		heap.Push(&s.expiries, ls)
		p.opened++
		return leaseOutcome{status: LeaseGranted, leaseID: ls.id, epoch: ls.epoch, permits: ls.permits,
			share: ls.share, atNanos: ls.expiresAtNanos}
	})
}

// liveLease returns the active lease id of p at epoch, or the Fenced or
// Invalid outcome that ends the command.
func (p *leasePool) liveLease(op CommandType, r Report, kept int64) (*lease, *leaseOutcome) {
	limit, id, epoch, spent, out := r.Limit, r.LeaseID, r.Epoch, r.SpentPermits, r.StolenOutPermits
	ls := p.find(id)
	switch {
	case ls == nil || !ls.active:
		p.fenced++
		return nil, &leaseOutcome{status: LeaseFenced, detail: fmt.Sprintf(
			"%s: lease %d is not live on limit %q (it expired, was returned, or was never granted there): stop using it and open a new lease",
			opName(op), id, limit)}
	case ls.epoch != epoch:
		p.fenced++
		return nil, &leaseOutcome{status: LeaseFenced, detail: fmt.Sprintf(
			"%s: lease %d on limit %q is at epoch %d, not %d: that grant was superseded, stop using it",
			opName(op), id, limit, ls.epoch, epoch)}
	case spent > ls.permits || out > ls.permits-spent:
		return nil, &leaseOutcome{status: LeaseInvalid, detail: fmt.Sprintf(
			"%s: lease %d epoch %d on limit %q reports %d spent and %d stolen out of a grant of %d permits (allowed: spent + stolen out <= the grant)",
			opName(op), id, epoch, limit, spent, out, ls.permits)}
	case kept > ls.permits-spent-out:
		return nil, &leaseOutcome{status: LeaseInvalid, detail: fmt.Sprintf(
			"%s: lease %d epoch %d on limit %q reports %d spent, %d stolen out and %d kept of a grant of %d permits (allowed: spent + stolen out + kept <= the grant)",
			opName(op), id, epoch, limit, spent, out, kept, ls.permits)}
	}
	return ls, nil
}

// renew settles the current grant of a live lease as reported and issues
// the next one under epoch+1, from the holder's new demand.
func (s *state) renew(nowNanos int64, q *Renew) LeaseResult {
	return s.leaseCommand(nowNanos, CmdRenew, q.RequestID, func() leaseOutcome {
		l, p, stop := s.leasedLimit(q.Limit)
		if stop != nil {
			return *stop
		}
		ls, stop := p.liveLease(CmdRenew, q.Report, q.KeptPermits)
		if stop != nil {
			return *stop
		}
		if stop := checkExpiry(nowNanos, q.TTLNanos, q.Limit); stop != nil {
			return *stop
		}
		interval := l.conf.cfg.IntervalNanos
		p.accrue(nowNanos, interval)
		credit := p.settleReport(ls, q.Report, q.KeptPermits)
		p.setDemand(ls, q.DemandMilliPermitsPerSec)
		ls.epoch++
		p.grant(nowNanos, ls, q.TTLNanos, interval, credit, q.KeptPermits)
		heap.Fix(&s.expiries, ls.heapIndex)
		p.renewals++
		return leaseOutcome{status: LeaseGranted, leaseID: ls.id, epoch: ls.epoch, permits: ls.permits,
			share: ls.share, credited: credit, atNanos: ls.expiresAtNanos}
	})
}

// returnLease settles the current grant of a live lease as reported and
// closes the lease (it lingers while permits it gave away may be spent).
func (s *state) returnLease(nowNanos int64, q *Return) LeaseResult {
	return s.leaseCommand(nowNanos, CmdReturn, q.RequestID, func() leaseOutcome {
		l, p, stop := s.leasedLimit(q.Limit)
		if stop != nil {
			return *stop
		}
		ls, stop := p.liveLease(CmdReturn, q.Report, 0)
		if stop != nil {
			return *stop
		}
		p.accrue(nowNanos, l.conf.cfg.IntervalNanos)
		credit := p.settleReport(ls, q.Report, 0)
		p.deactivate(ls)
		if len(ls.linger) == 0 {
			heap.Remove(&s.expiries, ls.heapIndex)
			p.removeLease(ls)
		} else {
			heap.Fix(&s.expiries, ls.heapIndex)
		}
		p.returns++
		return leaseOutcome{status: LeaseReturned, leaseID: ls.id, epoch: ls.epoch, credited: credit}
	})
}

// applyLeaseBatch decides each command of a CmdLeaseBatch at its own
// arrival (if the entry's stamp is trusted; otherwise at the timeline's
// time, as every command of an untrusted entry), expiring what is due
// before each exactly as if it had been applied alone.
func (s *state) applyLeaseBatch(trusted bool, cs []LeaseCommand) []LeaseResult {
	results := make([]LeaseResult, len(cs))
	for i := range cs {
		c := &cs[i]
		if trusted && c.ArrivedNanos > s.lastNowNanos {
			s.advanceTo(c.ArrivedNanos)
		}
		now := s.lastNowNanos
		switch c.Kind {
		case CmdLease:
			results[i] = s.lease(now, &c.Lease)
		case CmdRenew:
			results[i] = s.renew(now, &c.Renew)
		case CmdReturn:
			results[i] = s.returnLease(now, &c.Return)
		}
	}
	return results
}

// CmdPutLeasePolicy as Apply decides it. A limit is either
// linearized or leased, never both, so that no permit is handed out twice:
// a new pool mints only from where the pacer's reservations end, and a pool
// is dropped only when no lease holds permits.

// leasable says why a limit with this interval cannot be leased ("" if it
// can).
func leasable(name string, intervalNanos int64) string {
	switch {
	case intervalNanos == 0:
		// An infinite bursty rate, or an in-flight cap (no rate at all).
		return fmt.Sprintf("limit %q has no finite rate (an infinite rate, or an in-flight cap): there is nothing to lease", name)
	case intervalNanos > MaxLeasedIntervalNanos:
		return fmt.Sprintf("limit %q mints one permit per %dns, slower than one per lease TTL (at most %dns): reserve its permits one request at a time",
			name, intervalNanos, MaxLeasedIntervalNanos)
	}
	return ""
}

// putLeasePolicy makes a limit leased (creating its pool, or changing its
// capacities) or linearized again (only when no lease holds permits).
//
// A new pool starts empty and mints from max(now, the earliest time the
// limit's pacer would grant its next permit): permits the pacer already
// handed out ahead of now are not minted again.
func (s *state) putLeasePolicy(nowNanos int64, q *LeasePolicy) LeasePolicyResult {
	if why := s.templatedDetail(q.Limit); why != "" {
		return LeasePolicyResult{Detail: boundDetail(why)}
	}
	l, ok := s.limits[q.Limit]
	if !ok {
		return LeasePolicyResult{UnknownLimit: true}
	}
	interval := l.conf.cfg.IntervalNanos
	if !q.Leased {
		if p := l.pool; p != nil && len(p.leases) > 0 {
			return LeasePolicyResult{Detail: boundDetail(fmt.Sprintf(
				"limit %q stays leased: %s; stop the workers that hold them (a worker returns its lease on SIGTERM; running workers keep renewing theirs), then try again",
				q.Limit, leasesHolding(p, nowNanos)))}
		}
		l.pool = nil
		s.pooled.remove(l)
		l.seq++ // the pacer's mode changed: no refund may rewrite it
		l.resetRefundMarks()
		return LeasePolicyResult{Applied: true}
	}
	if why := leasable(q.Limit, interval); why != "" {
		return LeasePolicyResult{Detail: boundDetail(why)}
	}
	p := l.pool
	if p == nil {
		start, err := l.pacer.Query(nowNanos, 1)
		if err != nil {
			return LeasePolicyResult{Detail: boundDetail(fmt.Sprintf(
				"limit %q: cannot tell when its pacer's reservations end: %v", q.Limit, err))}
		}
		p = &leasePool{accruedToNanos: max(nowNanos, start), byHolder: make(map[string]*lease)}
		l.pool = p
		s.pooled.insert(l)
		l.seq++ // the pool mints from the pacer's state: no refund may rewrite it
		l.resetRefundMarks()
	} else {
		p.accrue(nowNanos, interval)
	}
	p.burstSpec, p.maxOutSpec = q.BurstPermits, q.MaxOutstandingPermits
	return LeasePolicyResult{Applied: true, BurstPermits: p.burst(interval), MaxOutstandingPermits: p.maxOutstanding(interval)}
}

// maxEvent is the latest time any lease of p changes by itself.
func maxEvent(p *leasePool) int64 {
	var t int64
	for _, l := range p.leases {
		if l.active {
			t = max(t, l.expiresAtNanos)
		}
		if n := len(l.linger); n > 0 {
			t = max(t, l.linger[n-1].untilNanos)
		}
	}
	return t
}

// leasesEndIn is how long after nowNanos the last lease of p ends (0 if
// it already has), for messages: a duration reads, a cluster time does
// not. It is rounded up to three significant digits (as transport/api's
// DurationText does; deterministic, as every result of the fsm).
func leasesEndIn(p *leasePool, nowNanos int64) time.Duration {
	d := max(0, maxEvent(p)-nowNanos)
	unit := int64(1)
	for v := d; v >= 1000; v /= 10 {
		unit *= 10
	}
	if d > math.MaxInt64-unit {
		return time.Duration(d)
	}
	return time.Duration((d + unit - 1) / unit * unit)
}

// leasesHolding says how many leases of p hold permits and when the last
// ends unless renewed: "1 lease still holds permits (it ends in 2s unless
// renewed)", "3 leases still hold permits (the last of them ...)".
func leasesHolding(p *leasePool, nowNanos int64) string {
	if len(p.leases) == 1 {
		return fmt.Sprintf("1 lease still holds permits (it ends in %s unless renewed)", leasesEndIn(p, nowNanos))
	}
	return fmt.Sprintf("%d leases still hold permits (the last of them ends in %s unless renewed)", len(p.leases), leasesEndIn(p, nowNanos))
}
