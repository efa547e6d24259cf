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
)

// lastCommandType is the largest known CommandType.
const lastCommandType = CmdPutLeasePolicy

// EncodingVersion is the version byte that follows the type byte.
const EncodingVersion = 1

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

// DeleteLimit removes a limit and its state.
type DeleteLimit struct {
	Name string
}

// Reserve asks for Permits permits of Limit, waiting at most MaxWaitNanos.
// RequestID, when not empty, makes the reserve idempotent: a second reserve
// with the same ID gets the first one's result and reserves nothing.
type Reserve struct {
	Limit        string
	Permits      int64
	MaxWaitNanos int64
	RequestID    string
}

// Entry is one decoded log entry: the leader's timestamp plus exactly one
// command (for CmdNoop, none).
type Entry struct {
	Type CommandType
	// NowNanos is the cluster time stamped by the leader.
	NowNanos int64
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
	// ExpiresInNanos (Granted, when the algorithm has expiry) is how long
	// after the decision the permits stop being usable; 0 = no expiry.
	// -1 = already expired: only a Duplicate replayed after the expiry of
	// the first grant; those permits must not be used.
	ExpiresInNanos int64
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
	// Existed is true if a limit was removed.
	Existed bool
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
}
