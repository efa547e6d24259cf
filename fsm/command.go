package fsm

import (
	"errors"

	"github.com/permitd/permitd/bucket"
)

// command.go: what a log entry carries: the command types and the
// encoding version (the first two bytes of every entry), the leader's stamp
// and the payloads of the limit commands. The lease commands' payloads are
// in lease.go, what Apply answers in result.go.

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
	// CmdLeaseBatch carries one or more lease, renew and return commands,
	// applied in order, each at its own arrival (leaseops.go).
	CmdLeaseBatch CommandType = 10
	// CmdSettle settles a reservation's real cost (settle.go).
	CmdSettle CommandType = 11
	// CmdRelease releases a reservation's in-flight permits (settle.go).
	CmdRelease CommandType = 12
	// CmdExpiredGrants reports grants whose answers left as refusals
	// (expiredgrants.go).
	CmdExpiredGrants CommandType = 13
	// CmdWithdraw withdraws, by its request ID, a reserve that waits in
	// an in-flight cap's queue (waiters.go).
	CmdWithdraw CommandType = 14
	// CmdPutTemplate creates or replaces a template (template.go).
	CmdPutTemplate CommandType = 15
	// CmdDeleteTemplate deletes a template (template.go).
	CmdDeleteTemplate CommandType = 16
)

// lastCommandType is the largest known CommandType.
const lastCommandType = CmdDeleteTemplate

// EncodingVersion is the version byte that follows the type byte.
// Version 2 added the stamp's term, per-reserve arrival times and client
// sessions, version 3 a renewal's kept permits, version 4 batches of lease
// commands; an entry of another version is rejected. Later additions
// extend version 4 compatibly: an entry an earlier decoder accepted
// decodes the same (the reservation form of a reserve, a put's shadow
// flag, CmdSettle, CmdRelease, a session's owner and quota,
// CmdExpiredGrants, CmdWithdraw, the owner of a session's reserve,
// CmdPutTemplate and CmdDeleteTemplate are bytes an earlier decoder
// rejects).
const EncodingVersion = 4

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
//
// Shadow puts the limit in shadow mode: every reserve on it is decided and
// counted as usual (would-have-refused, would-have-waited) but granted at
// once, so that a new limit can be rolled out without refusing anyone.
type PutLimit struct {
	Name   string
	Config bucket.Config
	Shadow bool
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

	// Track selects the reservation form (reservation.go): the reserve
	// may name more limits (Also), and its grant leaves a reservation
	// that can be settled and released until SettleWithinNanos after the
	// grant's time (0 = DefaultSettleWindowNanos) or, for an in-flight
	// permit, its hold's expiry, whichever is later. Owner (may be empty)
	// is who may settle and release it. A tracked reserve is keyed by a
	// RequestID or by nothing, never by a session.
	Track             bool
	Also              []Part
	SettleWithinNanos int64
	// Owner (at most MaxOwnerLen bytes, may be empty) is who sends the
	// reserve, the API token's name when tokens are on: of a tracked
	// reserve, who may settle and release its reservation; of a reserve
	// of a session, who must own the session (OpenSession.Owner), else
	// the reserve is answered SessionExpired as if the session were not
	// open, and decides, records and touches nothing (sessions.go). Any
	// other reserve carries none.
	Owner string
}

// Parts returns the limits of the reserve: its own, then Also.
func (r *Reserve) Parts() []Part {
	parts := make([]Part, 0, 1+len(r.Also))
	parts = append(parts, Part{Limit: r.Limit, Permits: r.Permits})
	return append(parts, r.Also...)
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
	// LeaseBatch holds a CmdLeaseBatch's commands (LeaseCommand).
	LeaseBatch []LeaseCommand
	// Settle and Release (settle.go), Withdraw (waiters.go).
	Settle   Settle
	Release  Release
	Withdraw Withdraw
	// OpenSession is a CmdOpenSession's owner and quota (sessions.go).
	OpenSession OpenSession
	// ExpiredGrants holds a CmdExpiredGrants' grants (expiredgrants.go).
	ExpiredGrants []ExpiredGrant
	// PutTemplate and DeleteTemplate (template.go).
	PutTemplate    PutTemplate
	DeleteTemplate DeleteTemplate
}
