package worker

import "time"

// Stats are a worker's counters for its limit and group, for the HTTP
// layer's metrics: every permit that came to the worker is, eventually,
// spent, given away, credited back to the register, or expired unused.
type Stats struct {
	Limit  string
	Group  string
	Holder string
	// LeasedPermits is the total of the grants received from the register.
	LeasedPermits int64
	// SpentPermits is the total handed to callers, from grants and from
	// stolen lots; SpentStolenPermits the part that came from stolen lots.
	SpentPermits       int64
	SpentStolenPermits int64
	// StolenInPermits is the total received from peers, StolenOutPermits
	// the total given to peers (debited before sending: a lost answer
	// loses them).
	StolenInPermits  int64
	StolenOutPermits int64
	// CreditedPermits is the total the register credited back (unspent at
	// a renewal or return).
	CreditedPermits int64
	// ExpiredUnusedPermits counts grant permits left at their local expiry
	// before being reported, and stolen permits left at their deadline.
	ExpiredUnusedPermits int64
	// OutstandingPermits is what the worker may spend now: the open
	// grant's permits left plus unexpired stolen ones.
	OutstandingPermits int64
	// ShareMilliPermitsPerSec is the current share the register gave;
	// DemandMilliPermitsPerSec the demand last reported.
	ShareMilliPermitsPerSec  int64
	DemandMilliPermitsPerSec int64
	// Register traffic: leases opened, renewals granted, answers Fenced,
	// failed calls (no answer).
	Leases        uint64
	Renewals      uint64
	Fenced        uint64
	RegisterFails uint64
	// Steal traffic: rounds run, requests answered as donor, answers with
	// permits received, answers that matched no request (late after a
	// forget, duplicate, or unknown).
	StealRounds     uint64
	StealsServed    uint64
	StealsReceived  uint64
	StealsUnmatched uint64
	// GossipRejected counts gossip packets and streams memberlist dropped
	// because they were not encrypted with a key this worker holds (or, on
	// a worker without keys, because they were encrypted): a process
	// without the key, its join attempts and steal messages included.
	GossipRejected uint64
	// GossipRejoins counts the joins of the seed list after Start's: while
	// the worker was alone, or after it saw the member count drop and was
	// one of the few members chosen to rejoin.
	GossipRejoins uint64
}

// Status is a worker's state for operators: its counters plus its lease,
// its grant and the members it knows.
type Status struct {
	Stats
	// LeaseID and Epoch name the current grant (0 when none).
	LeaseID uint64
	Epoch   uint64
	// GrantPermitsLeft is what is left of the current grant (spendable or
	// not); StolenPermitsLeft what is left in unexpired stolen lots.
	GrantPermitsLeft  int64
	StolenPermitsLeft int64
	// ExpiresIn is the time to the grant's local expiry (<= 0: expired or
	// no grant).
	ExpiresIn time.Duration
	// SinceGoodRenewal is the time since the last answer that granted
	// permits (-1 if none yet).
	SinceGoodRenewal time.Duration
	// NextRenewalIn is the time until the worker next calls the register
	// (a renewal, a new lease or a retry; 0 when one is due or under way).
	NextRenewalIn time.Duration
	// CutOff reports that the last register call failed and no open,
	// unexpired grant remains.
	CutOff bool
	// RegisterSilentFor is how long the register has left the worker's
	// calls unanswered: since the send of the first lease or renewal
	// without an answer since its last answer (0 when it answered the
	// last call).
	RegisterSilentFor time.Duration
	// Unreachable reports that RegisterSilentFor has reached
	// Config.UnreachableAfter: a caller that finds no permit fails closed
	// with ErrRegisterUnreachable (once stealing no longer helps) instead
	// of waiting.
	Unreachable bool
	// RetryEvery is the worker's Config.RetryEvery (resolved): how soon it
	// calls the register again after a failed call, and how often callers
	// waiting for permits look again.
	RetryEvery time.Duration
	// LastError is the last register failure or refusal, "" after a grant.
	LastError string
	// Members lists the live members known through gossip, by group, names
	// sorted (the worker itself included).
	Members map[string][]string
}
