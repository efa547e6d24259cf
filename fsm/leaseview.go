package fsm

// leaseview.go: the read-only views of the lease book (LeaseInfo,
// LeasePoolInfo) and the read API that serves them. Like the other read
// methods these may be called from any goroutine.

// LeaseInfo is a read-only view of one lease.
type LeaseInfo struct {
	ID    uint64
	Epoch uint64
	// Active is false for a lease that was returned or expired but whose
	// earlier grants still have permits given away to other holders
	// (LingeringPermits): it is kept, holding nothing else, until those
	// grants expire.
	Active bool
	Holder string
	Group  string
	Weight int64
	// DemandMilliPermitsPerSec is the last demand the holder reported;
	// ShareMilliPermitsPerSec the share computed at the last grant.
	DemandMilliPermitsPerSec int64
	ShareMilliPermitsPerSec  int64
	// Permits is the size of the current grant.
	Permits int64
	// LingeringPermits are permits of earlier grants that the holder
	// reported as given to other holders; they count as outstanding until
	// those grants' expiries.
	LingeringPermits int64
	// GrantedAtNanos and ExpiresAtNanos are the current grant's cluster
	// times (compare with FSM.LastNowNanos).
	GrantedAtNanos int64
	ExpiresAtNanos int64
	// StolenInPermits is the total the holder reported receiving from
	// other leases.
	StolenInPermits int64
}

// LeasePoolInfo is a read-only view of a leased limit's pool, with minting
// brought up to the FSM's LastNowNanos.
type LeasePoolInfo struct {
	Limit string
	// BurstPermits (C) and MaxOutstandingPermits (O) are the effective
	// capacities; BurstSpec and MaxOutstandingSpec the values set by the
	// policy (0 = default).
	BurstPermits          int64
	MaxOutstandingPermits int64
	BurstSpec             int64
	MaxOutstandingSpec    int64
	// IntervalNanos is the limit's interval I: one permit is minted per I
	// of cluster time.
	IntervalNanos int64
	// The accounts: Minted = Free + Outstanding + Settled, always.
	MintedPermits      int64
	FreePermits        int64
	OutstandingPermits int64
	SettledPermits     int64
	// Settled, broken down: reported spent by holders, given to other
	// holders and lingered out, and granted but neither reported nor
	// returned before expiry.
	SpentPermits   int64
	StolenPermits  int64
	ExpiredPermits int64
	// StolenInPermits is the total holders reported receiving (it is the
	// taker's view of StolenPermits plus those still lingering).
	StolenInPermits int64
	// ActiveLeases and LingeringLeases count the leases (see
	// LeaseInfo.Active).
	ActiveLeases    int
	LingeringLeases int
	// Counters since leasing was enabled: leases opened, renewals,
	// returns, grants that expired, renews and returns fenced.
	LeasesOpened uint64
	Renewals     uint64
	Returns      uint64
	Expirations  uint64
	Fenced       uint64
}

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
