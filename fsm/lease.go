package fsm

import (
	"fmt"
	"time"
)

// lease.go: the vocabulary of the leased path: the bounds of lease
// commands, their payloads (LeasePolicy, Lease, Renew, Return, and
// LeaseCommand for a batch), what Apply answers to them, and the read-only
// views of the lease book with the read API that serves them. The checks
// are in validate.go, the decisions in leaseops.go and leasegrant.go, the
// book itself in leasebook.go, the encodings in leasecodec.go and
// leasesnapshot.go.

// Bounds on lease commands. Like the other bounds they are part of the
// replicated encoding: Decode rejects a command that exceeds them.
const (
	// MinLeaseTTLNanos and MaxLeaseTTLNanos bound the TTL of a lease grant
	// (100 ms to 60 s of cluster time).
	MinLeaseTTLNanos = int64(100 * time.Millisecond)
	MaxLeaseTTLNanos = int64(60 * time.Second)
	// MaxLeaseWeight is the largest group weight a lease may carry.
	MaxLeaseWeight = 1_000_000
	// MaxDemandMilliPermitsPerSec is the largest demand a holder may
	// report: 10^12 milli-permits per second, one permit per nanosecond,
	// the fastest rate a limit can have.
	MaxDemandMilliPermitsPerSec = int64(1_000_000_000_000)
	// MaxLeasePoolPermits bounds BurstPermits and MaxOutstandingPermits
	// (2^60, so that C + O fits in int64).
	MaxLeasePoolPermits = int64(1) << 60
	// MaxLeasesPerLimit is the most leases one limit holds at once, live
	// or lingering (see LeaseInfo.Active); a lease beyond it is Refused.
	MaxLeasesPerLimit = 4096
	// MaxLeasedIntervalNanos is the slowest rate that can be leased: one
	// permit per MaxLeaseTTLNanos. A slower limit could never put a whole
	// permit in a lease; it is reserved one request at a time.
	MaxLeasedIntervalNanos = MaxLeaseTTLNanos
)

// milliPermitsPerSecNanos converts an interval into a rate in
// milli-permits per second: rate = milliPermitsPerSecNanos / interval.
const milliPermitsPerSecNanos = int64(1_000_000_000_000)

// LeasePolicy is the payload of CmdPutLeasePolicy: it makes Limit leased
// (Leased true) or linearized again (Leased false), and sets the two
// capacities of its lease pool. A limit is either linearized (reserves, one
// Raft entry per request) or leased (leases, one Raft entry per renewal),
// never both, so that no permit can be handed out twice.
type LeasePolicy struct {
	Limit  string
	Leased bool
	// BurstPermits is C, the most permits the pool's free balance
	// accumulates: minting stops while free >= C. 0 selects the default,
	// one second of permits at the limit's current rate (at least 1).
	// Must be 0 when Leased is false.
	BurstPermits int64
	// MaxOutstandingPermits is O, the most permits held by leases at once
	// (granted and not yet reported spent or expired). 0 selects the
	// default, one second of permits (at least 1). Must be 0 when Leased
	// is false.
	MaxOutstandingPermits int64
}

// Lease is the payload of CmdLease: Holder (a worker) of Group asks for a
// lease on Limit for TTLNanos of cluster time.
type Lease struct {
	Limit string
	// Holder names the worker; it holds at most one live lease per limit.
	// Holder and Group are 1 to MaxNameLen characters of [A-Za-z0-9_.:-].
	Holder string
	Group  string
	// Weight is the group's weight in the fair division of the rate
	// (1..MaxLeaseWeight); a group's weight is the one carried by its
	// newest live lease.
	Weight int64
	// DemandMilliPermitsPerSec is the rate the holder wants, in thousandths
	// of a permit per second (0..MaxDemandMilliPermitsPerSec).
	DemandMilliPermitsPerSec int64
	// TTLNanos is how long the grant lasts (MinLeaseTTLNanos..
	// MaxLeaseTTLNanos).
	TTLNanos int64
	// RequestID, when not empty, deduplicates the command (as for Reserve;
	// the ID space is shared with reserves).
	RequestID string
}

// Report is what the holder of lease LeaseID on Limit reports on its
// grant at Epoch when it renews or returns it.
//
// By sending the report the holder stops spending that grant (and stops
// giving it away): whatever it does not report as spent or stolen out goes
// back to the free pool.
type Report struct {
	Limit   string
	LeaseID uint64
	Epoch   uint64
	// SpentPermits is how many permits of the grant the holder spent
	// itself; StolenOutPermits how many it gave to other holders (they may
	// spend them until the grant's expiry). Together at most the grant's
	// Permits.
	SpentPermits     int64
	StolenOutPermits int64
	// StolenInPermits is how many permits of other leases the holder
	// received since its last report; informational (counted, not
	// settled: those permits belong to their donors' grants).
	StolenInPermits int64
}

// Renew is the payload of CmdRenew: the holder reports what became of its
// current grant, the register settles it and issues a new grant for
// TTLNanos under Epoch+1, at the holder's new demand.
type Renew struct {
	Report
	// KeptPermits (the in-flight allowance) is how many unspent permits
	// of the grant the holder keeps spending while the renewal is in
	// flight: until its answer arrives, at most until the grant's own
	// deadline. They are neither settled nor credited: they stay
	// outstanding and become the first permits of the new grant (its
	// Permits count them), so that a renewal delayed by an election does
	// not leave the holder without permits. Spent + stolen out + kept is
	// at most the grant.
	KeptPermits              int64
	DemandMilliPermitsPerSec int64
	TTLNanos                 int64
	RequestID                string
}

// Return is the payload of CmdReturn: like Renew, the holder reports on
// its current grant, but the lease is closed instead of renewed.
type Return struct {
	Report
	RequestID string
}

// MaxBatchLeaseCommands is the most commands one CmdLeaseBatch may carry.
const MaxBatchLeaseCommands = 4096

// LeaseCommand is one command of a CmdLeaseBatch: Kind (CmdLease, CmdRenew
// or CmdReturn) says which of Lease, Renew and Return it carries.
// ArrivedNanos is the cluster time at which it reached the leader, as for
// a reserve: non-decreasing within a batch (an earlier one counts as the
// previous command's, the first as at least the entry's stamp).
type LeaseCommand struct {
	Kind         CommandType
	Lease        Lease
	Renew        Renew
	Return       Return
	ArrivedNanos int64
}

// Limit is the name of the limit the command is on.
func (c *LeaseCommand) Limit() string {
	switch c.Kind {
	case CmdLease:
		return c.Lease.Limit
	case CmdRenew:
		return c.Renew.Limit
	}
	return c.Return.Limit
}

// LeaseStatus is the outcome of a lease, renew or return.
type LeaseStatus uint8

// Lease outcomes.
const (
	// LeaseGranted (lease, renew): the lease is live at Epoch until
	// ExpiresInNanos; its holder may spend Permits (possibly 0: the lease
	// still registers the holder's demand, which raises its share at the
	// next renewal).
	LeaseGranted LeaseStatus = 1
	// LeaseRefused (lease): no lease was opened, because the holder
	// already holds one on this limit (LeaseID and Epoch name it) or the
	// limit holds MaxLeasesPerLimit; RetryAfterNanos says when to retry.
	LeaseRefused LeaseStatus = 2
	// LeaseUnknownLimit: no limit of that name exists.
	LeaseUnknownLimit LeaseStatus = 3
	// LeaseInvalid: the command cannot be applied (the limit is not
	// leased, the report exceeds the grant, the request ID was used by
	// another kind of command, ...); Detail says why. Nothing changed.
	LeaseInvalid LeaseStatus = 4
	// LeaseFenced (renew, return): the lease is not live (it expired, was
	// returned, or never existed) or the epoch is not its current one.
	// Nothing changed but the pool's Fenced counter; the holder must stop
	// using that grant.
	LeaseFenced LeaseStatus = 5
	// LeaseReturned (return): the lease is closed; CreditedPermits went
	// back to the free pool.
	LeaseReturned LeaseStatus = 6
)

// String returns the name of the status.
func (s LeaseStatus) String() string {
	switch s {
	case LeaseGranted:
		return "granted"
	case LeaseRefused:
		return "refused"
	case LeaseUnknownLimit:
		return "unknown-limit"
	case LeaseInvalid:
		return "invalid"
	case LeaseFenced:
		return "fenced"
	case LeaseReturned:
		return "returned"
	}
	return fmt.Sprintf("unknown(%d)", uint8(s))
}

// LeaseResult is the outcome of a lease, renew or return, relative to the
// entry's cluster time.
type LeaseResult struct {
	Status LeaseStatus
	// LeaseID and Epoch name the grant (Granted), the closed grant
	// (Returned) or the holder's existing lease (Refused, when that is the
	// reason); 0 otherwise.
	LeaseID uint64
	Epoch   uint64
	// Permits (Granted) is how many permits the holder may spend under
	// this grant.
	Permits int64
	// ExpiresInNanos (Granted) is how long after the decision the grant
	// stops being usable: the TTL for a fresh answer. The holder counts it
	// from when it sent the request, not from when it got the answer, and
	// stops a safety margin earlier (see the bound in the package doc).
	// -1 = already expired: only a Duplicate replayed after the expiry.
	ExpiresInNanos int64
	// ShareMilliPermitsPerSec (Granted) is the holder's fair share of the
	// rate, in thousandths of a permit per second: the rate at which it
	// should spend, and roughly what its next grant will hold per second
	// of TTL.
	ShareMilliPermitsPerSec int64
	// CreditedPermits (Granted by a renew, Returned) is how many permits
	// of the previous grant went back to the free pool.
	CreditedPermits int64
	// RetryAfterNanos (Refused) is when the lease could be granted (>= 1).
	RetryAfterNanos int64
	// Duplicate reports that RequestID was seen before and this is the
	// stored result of the first command, re-expressed relative to this
	// entry's time; nothing changed now.
	Duplicate bool
	// Detail explains Refused, Invalid and Fenced.
	Detail string
}

// LeasePolicyResult is the outcome of a CmdPutLeasePolicy.
type LeasePolicyResult struct {
	// Applied reports that the policy is in force.
	Applied bool
	// UnknownLimit reports that no limit of that name exists.
	UnknownLimit bool
	// BurstPermits and MaxOutstandingPermits (Applied, Leased) are the
	// effective capacities C and O, defaults resolved at the limit's
	// current rate.
	BurstPermits          int64
	MaxOutstandingPermits int64
	// Detail says why the policy was not applied (the limit's rate cannot
	// be leased, leases still hold permits, ...).
	Detail string
}

// The read-only views of the lease book (LeaseInfo, LeasePoolInfo) and the
// read API that serves them. Like the other read methods these may be
// called from any goroutine.

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
	return l.pool.info(name, f.st.lastNowNanos, l.conf.cfg.IntervalNanos), true
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
