package fsm

import (
	"fmt"
	"time"
)

// lease.go: the vocabulary of the leased path: the bounds of lease
// commands, their payloads (LeasePolicy, Lease, Renew, Return) and what
// Apply answers to them. Checks are in leasevalidate.go, decisions in
// leaseops.go and leasepolicy.go, the book itself in leasebook.go.

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
