package fsm

import (
	"errors"

	"github.com/permitd/permitd/bucket"
)

// CommandType is the first byte of every log entry written by permitd.
type CommandType uint8

// Command types. Values are part of the replicated encoding and never change.
const (
	// CmdPutLimit creates or replaces one limit's configuration.
	CmdPutLimit CommandType = 1
	// CmdDeleteLimit removes one limit.
	CmdDeleteLimit CommandType = 2
	// CmdReserveBatch carries one or more reserves, applied in order.
	CmdReserveBatch CommandType = 3
	// CmdNoop carries only a timestamp; a new leader writes one to advance
	// the cluster timeline.
	CmdNoop CommandType = 4
	// CmdLease opens a lease on a leased limit (see lease.go).
	CmdLease CommandType = 5
	// CmdRenew reports on a lease's current grant and renews it.
	CmdRenew CommandType = 6
	// CmdReturn reports on a lease's current grant and closes it.
	CmdReturn CommandType = 7
	// CmdPutLeasePolicy makes a limit leased (or linearized again) and sets
	// its lease pool's capacities.
	CmdPutLeasePolicy CommandType = 8
	// CmdOpenSession opens a client session (sessions.go).
	CmdOpenSession CommandType = 9
)

// lastCommandType is the largest known CommandType.
const lastCommandType = CmdOpenSession

// EncodingVersion is the version byte that follows the type byte.
// Version 2 added the stamp's term, per-reserve arrival times and client
// sessions; a version-1 entry is rejected.
const EncodingVersion = 2

// Errors returned by this package.
var (
	// ErrDecode wraps every failure to decode a log entry or a snapshot.
	ErrDecode = errors.New("fsm: cannot decode")
	// ErrInvalidCommand wraps a command that decodes but is not valid
	// (bad name, non-positive permits, ...).
	ErrInvalidCommand = errors.New("fsm: invalid command")
)

// PutLimit creates a limit or replaces its configuration atomically. If the
// limit exists with the same algorithm its pacer is reconfigured (debt is
// kept); with another algorithm its state starts afresh.
type PutLimit struct {
	Name   string
	Config bucket.Config
}

// DeleteLimit removes a limit and its state. A leased limit whose leases
// still hold permits is removed only with Force: its holders may spend
// those permits until their grants expire, and lose their leases.
type DeleteLimit struct {
	Name  string
	Force bool
}

// Reserve asks for Permits permits of Limit, waiting at most MaxWaitNanos.
//
// A reserve is made idempotent by at most one of two keys: RequestID, when
// not empty (a second reserve with the same ID gets the first one's result
// and reserves nothing, while the ID is remembered), or Session, when its
// ID is not 0 (the same within a client session; see sessions.go).
type Reserve struct {
	Limit        string
	Permits      int64
	MaxWaitNanos int64
	RequestID    string
	Session      SessionRef
	// ArrivedNanos is the cluster time at which the reserve reached the
	// leader: it is decided at max(that, the timeline) rather than at the
	// time of the entry that carries it, so that reserves batched into one
	// entry are decided as if each had been applied on arrival. Arrival
	// times are non-decreasing within a batch; an arrival time before the
	// previous reserve's (0 when unknown) counts as the previous one's,
	// and the first reserve's as at least the entry's stamp.
	ArrivedNanos int64
}

// SessionRef names a reserve within a client session: the session's ID
// (from CmdOpenSession), the client's sequence number for this request
// (1, 2, 3, ...; a retry reuses it), and AckedBelow, the lowest sequence
// number whose answer the client has not received yet (the register may
// forget the answers below it).
type SessionRef struct {
	ID, Seq, AckedBelow uint64
}

// Stamp is the leader's stamp on a log entry: the cluster time it read
// from its timeline and the raft term that timeline began in. Apply trusts
// the time only if the entry was appended in that same term (raft.Log.Term):
// an entry stamped in one term and appended in a later one (its leader lost
// and regained leadership while it waited) carries a time read from an
// earlier timeline, which kept counting while others led, and is decided
// as if no time had passed.
type Stamp struct {
	Nanos int64
	Term  uint64
}

// Entry is one decoded log entry: the leader's stamp plus exactly one
// command (for CmdNoop, none).
type Entry struct {
	Type CommandType
	// Stamp is the cluster time and term stamped by the leader.
	Stamp    Stamp
	Put      PutLimit
	Delete   DeleteLimit
	Reserves []Reserve
	// The lease commands (lease.go).
	Policy LeasePolicy
	Lease  Lease
	Renew  Renew
	Return Return
}

// Status is the outcome of one reserve.
type Status uint8

// Reserve outcomes.
const (
	// Granted: the permits may be used WaitNanos after the decision.
	Granted Status = 1
	// Refused: nothing reserved; RetryAfterNanos says when to try again.
	Refused Status = 2
	// UnknownLimit: no limit of that name exists.
	UnknownLimit Status = 3
	// Invalid: the request can never be granted under the limit's current
	// configuration (e.g. more permits than MaxPermits); Detail says why.
	Invalid Status = 4
	// SessionExpired: the reserve's session is not open (it expired after
	// SessionIdleNanos without a request, was evicted, or never existed):
	// nothing was reserved and the register cannot tell whether an
	// earlier copy of this request was decided. The client never received
	// such a decision, so it opens a new session and asks again, as a new
	// request.
	SessionExpired Status = 5
	// Busy: the reserve carries a request ID the register has not seen,
	// and its table of request IDs is full (it refuses new IDs rather than
	// forget IDs younger than DedupWindowNanos); RetryAfterNanos says when
	// the oldest ID is forgotten. Nothing was reserved. Clients that need
	// more idempotent reserves per second use sessions.
	Busy Status = 6
)

// ReserveResult is the outcome of one reserve, relative to the entry's
// cluster time.
type ReserveResult struct {
	Status Status
	// WaitNanos (Granted) is how long after the decision the permits may be
	// used (>= 0); RetryAfterNanos (Refused) is when the same request could
	// succeed (>= 1, so a refusal never invites an immediate retry).
	WaitNanos       int64
	RetryAfterNanos int64
	// ExpiresInNanos (Granted) is how long after the decision the first
	// permit stops being usable; 0 = no expiry. A fresh strict grant has
	// its limit's expiry; a fresh grant of another algorithm has none. A
	// Duplicate always has one: a replayed grant is usable only until its
	// time plus the strict expiry, or plus one interval for the other
	// algorithms, so a late retry never uses a permit arbitrarily late.
	// -1 = already expired: only a Duplicate replayed after that; those
	// permits must not be used.
	ExpiresInNanos int64
	// SpacingNanos (Granted) is the spacing between the permits of one
	// grant: permit j (0-based) of a grant of n may be used from WaitNanos
	// + j*SpacingNanos and expires at ExpiresInNanos + j*SpacingNanos. A
	// strict grant's permits are its interval apart; the other algorithms
	// serve the n permits of a grant together (0).
	SpacingNanos int64
	// NowNanos is the cluster time the reserve was decided at (for a
	// Duplicate: the retry's), to which the durations above are relative;
	// OnArrival reports that this is the reserve's own arrival stamp
	// (ArrivedNanos, trusted in the entry's term, not clamped to a later
	// timeline). Neither travels in an answer: the leader uses them to
	// express the answer relative to the moment it is sent.
	NowNanos  int64
	OnArrival bool
	// Duplicate reports that RequestID was seen before and this is the
	// stored result of the first reserve: nothing was reserved now. Its
	// times are those of the first decision re-expressed relative to this
	// entry's cluster time (WaitNanos shrinks towards 0, ExpiresInNanos
	// towards -1), so a client that acts on the replayed answer never uses
	// a permit earlier, or later, than the first answer allowed.
	Duplicate bool
	// Detail explains Invalid.
	Detail string
}

// PutResult is the outcome of a PutLimit.
type PutResult struct {
	// Version is the raft index at which this configuration was applied
	// (when Detail is set: the version of the configuration that was kept).
	Version uint64
	// Created is true if the limit did not exist.
	Created bool
	// Detail, when not empty, says why the new configuration could not be
	// applied: the existing pacer refused to be reconfigured at the entry's
	// cluster time (for example an arithmetic overflow). The limit then keeps
	// its previous configuration, state and Version. Empty on success.
	Detail string
}

// DeleteResult is the outcome of a DeleteLimit.
type DeleteResult struct {
	// Existed is true if the limit existed (and was removed, unless
	// Detail says why not).
	Existed bool
	// Detail, when not empty, says why the limit was kept: it is leased
	// and leases still hold permits, and the delete was not forced.
	Detail string
}

// LimitInfo is a read-only view of one limit.
type LimitInfo struct {
	Name    string
	Config  bucket.Config
	Version uint64
	// Counters since the limit was created (a put that reconfigures it
	// keeps them): grants and refusals. Duplicates and Invalid reserves
	// are not counted.
	GrantedRequests uint64
	GrantedPermits  uint64
	RefusedRequests uint64
	// Leased reports that the limit's permits are handed out by lease
	// (see LeasePolicy): reserves on it are Invalid.
	Leased bool
	// Lease (Leased only) summarises the lease pool: its policy and how
	// many leases hold permits.
	Lease LeaseSummary
}

// LeaseSummary is the part of a leased limit's pool that a view of the
// limit shows (LeasePoolInfo has everything).
type LeaseSummary struct {
	// BurstPermits (C) and MaxOutstandingPermits (O) are the effective
	// capacities; BurstSpec and MaxOutstandingSpec the values the policy
	// set (0 = the default, one second of permits).
	BurstPermits, MaxOutstandingPermits int64
	BurstSpec, MaxOutstandingSpec       int64
	// Leases counts the leases that hold permits (active or lingering).
	Leases int
}
