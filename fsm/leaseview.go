package fsm

// Read API of the lease book. Like the other read methods these may be
// called from any goroutine.

// Leases returns a view of every lease of the limit called name (active
// and lingering), sorted by ID; nil if the limit does not exist or is not
// leased.
func (f *FSM) Leases(name string) []LeaseInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.st.limits[name]
	if !ok || l.pool == nil {
		return nil
	}
	out := make([]LeaseInfo, len(l.pool.leases))
	for i, ls := range l.pool.leases {
		out[i] = ls.info()
	}
	return out
}

// LeasePool returns a view of the lease pool of the limit called name, its
// minting brought up to LastNowNanos; false if the limit does not exist or
// is not leased.
func (f *FSM) LeasePool(name string) (LeasePoolInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.st.limits[name]
	if !ok || l.pool == nil {
		return LeasePoolInfo{}, false
	}
	return l.pool.info(name, f.st.lastNowNanos, l.cfg.IntervalNanos), true
}

// LeaseAccounts returns the accounts of the lease pool of the limit called
// name, minting brought up to LastNowNanos: every permit ever minted is
// free, outstanding (held by a lease) or settled (spent, given away and
// lingered out, or expired), so minted = free + outstanding + settled.
// All four are 0 if the limit does not exist or is not leased.
func (f *FSM) LeaseAccounts(name string) (minted, free, outstanding, settled int64) {
	info, ok := f.LeasePool(name)
	if !ok {
		return 0, 0, 0, 0
	}
	return info.MintedPermits, info.FreePermits, info.OutstandingPermits, info.SettledPermits
}

// info returns the view of l.
func (l *lease) info() LeaseInfo {
	return LeaseInfo{
		ID: l.id, Epoch: l.epoch, Active: l.active, Holder: l.holder, Group: l.group, Weight: l.weight,
		DemandMilliPermitsPerSec: l.demand, ShareMilliPermitsPerSec: l.share,
		Permits: l.permits, LingeringPermits: l.lingeringPermits(),
		GrantedAtNanos: l.grantedAtNanos, ExpiresAtNanos: l.expiresAtNanos, StolenInPermits: l.stolenIn,
	}
}

// info returns the view of p with minting brought up to nowNanos (without
// changing p).
func (p *leasePool) info(name string, nowNanos, intervalNanos int64) LeasePoolInfo {
	v := *p
	v.accrue(nowNanos, intervalNanos)
	active := len(p.byHolder)
	return LeasePoolInfo{
		Limit:                 name,
		BurstPermits:          p.burst(intervalNanos),
		MaxOutstandingPermits: p.maxOutstanding(intervalNanos),
		BurstSpec:             p.burstSpec,
		MaxOutstandingSpec:    p.maxOutSpec,
		IntervalNanos:         intervalNanos,
		MintedPermits:         v.minted,
		FreePermits:           v.free,
		OutstandingPermits:    v.outstanding,
		SettledPermits:        v.spent + v.stolen + v.expired,
		SpentPermits:          v.spent,
		StolenPermits:         v.stolen,
		ExpiredPermits:        v.expired,
		StolenInPermits:       v.stolenIn,
		ActiveLeases:          active,
		LingeringLeases:       len(p.leases) - active,
		LeasesOpened:          p.opened,
		Renewals:              p.renewals,
		Returns:               p.returns,
		Expirations:           p.expirations,
		Fenced:                p.fenced,
	}
}
