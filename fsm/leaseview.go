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
