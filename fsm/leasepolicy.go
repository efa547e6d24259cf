package fsm

import (
	"fmt"
)

// leasepolicy.go: CmdPutLeasePolicy as Apply decides it. A limit is either
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
	l, ok := s.limits[q.Limit]
	if !ok {
		return LeasePolicyResult{UnknownLimit: true}
	}
	interval := l.cfg.IntervalNanos
	if !q.Leased {
		if p := l.pool; p != nil && len(p.leases) > 0 {
			return LeasePolicyResult{Detail: boundDetail(fmt.Sprintf(
				"limit %q stays leased: %d leases still hold permits (the last is due at cluster time %d); return them or wait for their expiry",
				q.Limit, len(p.leases), maxEvent(p)))}
		}
		l.pool = nil
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
