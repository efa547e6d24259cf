package wire

// ClientPreface is the first byte a client writes on a binary connection to
// a node's HTTP port. No HTTP/1.x or HTTP/2 connection starts with it.
const ClientPreface byte = 0x00

// Operations (the Kind of a call frame). A client sends OpReserve,
// OpOpenSession and the lease commands (OpLease, OpRenew, OpReturn); a follower forwards the register's commands as they go
// in its log (OpCommand: an entry of package fsm, stamped 0) and the other
// operations with string payloads. The numbers of retired operations (2,
// 3, 7-10) are not reused.
const (
	// OpReserve: a Reserve (EncodeReserve); the answer a ReserveResult.
	OpReserve byte = 1
	// OpRead: the limits (payload: a limit's name, empty for all).
	OpRead byte = 4
	// OpJoin and OpRemove change the membership (payload: the server's ID,
	// and its raft address for a join).
	OpJoin   byte = 5
	OpRemove byte = 6
	// OpLeaseView: a leased limit's pool and leases (payload: its name).
	OpLeaseView byte = 11
	// OpOpenSession opens a client session (empty payload; the answer is
	// a SessionResult).
	OpOpenSession byte = 12
	// OpTransfer hands leadership to another voter (payload: the target's
	// ID, empty for any).
	OpTransfer byte = 13
	// OpCommand: one of the register's commands as a log entry of package
	// fsm, stamped 0 (the leader stamps it); the answer is the register's
	// result (package node's result codec).
	OpCommand byte = 14
	// OpLease, OpRenew and OpReturn: a client's lease commands (a
	// LeaseOpen, LeaseRenew or LeaseReturn); the answer is a LeaseResult.
	OpLease  byte = 15
	OpRenew  byte = 16
	OpReturn byte = 17
	// OpAuth authenticates a client connection to a node that requires
	// API tokens (payload: the token's secret, 1 to MaxAuthSecret bytes).
	// It must be the connection's first call, and the client must wait
	// for its answer before sending another: CodeOK, or
	// CodeUnauthenticated after which the node closes the connection.
	OpAuth byte = 18
	// OpCommandBatch: several OpCommand payloads in one call, between
	// nodes only (a follower forwarding lease commands; see package node's
	// forwardbatch.go). The payload is a count and as many length-prefixed
	// entries; the answer, for CodeOK, a count and per entry an answer code
	// and its length-prefixed payload (the result, or a message).
	OpCommandBatch byte = 19
	// OpLeaseBatch: several of a client's lease commands in one call (a
	// relay's, package transport/relay): a count (1 to MaxLeaseBatch) and
	// per command its operation (OpLease, OpRenew or OpReturn) and its
	// length-prefixed payload; the answer, for CodeOK, a count and per
	// command an answer code and its length-prefixed payload, as the
	// command's own call would have been answered (EncodeLeaseBatch,
	// DecodeLeaseBatchAnswers). Each command is authorized, validated
	// and decided on its own.
	OpLeaseBatch byte = 20
	// OpProgress: between nodes only, on the raft port (inside the
	// cluster's mutual TLS when it is on): the leader asks a non-voter
	// how far it has caught up before it promotes it to voter (package
	// node's promote.go). Empty payload; the answer is the asked node's
	// ID, its term, the leader it follows, its applied index and its last
	// log index. Any node also asks every other member so for its HTTP
	// address (package node's httpaddrs.go): payload the byte 1, and the
	// answer then carries the address (a string) after the rest.
	OpProgress byte = 21
	// OpReadPage: a page of the limits, between nodes only (a follower
	// forwards GET /v1/limits?prefix=&after=&limit=): payload the prefix,
	// the name to start after (strings) and the page size (a varint); the
	// answer whether more follow (a bool) and the page's limits as for
	// OpRead.
	OpReadPage byte = 22
	// OpReadTemplates: the active templates, between nodes only (a
	// follower forwards GET /v1/templates and /v1/templates/{prefix}):
	// payload a prefix (a string, empty for every template); the answer
	// a count and per template its prefix, its config (bucket's binary
	// form), idle time, max keys and live keys (varints).
	OpReadTemplates byte = 23
)

// MaxAuthSecret bounds the payload of OpAuth.
const MaxAuthSecret = 256

// Answer codes (the Kind of an answer frame). Every code but CodeOK carries
// a human-readable message as its payload.
const (
	// CodeOK: the payload is the operation's result.
	CodeOK byte = 0
	// CodeNotFound: the limit does not exist.
	CodeNotFound byte = 1
	// CodeInvalid: the request was rejected before reaching the log.
	CodeInvalid byte = 2
	// CodeNoLeader: the node could not reach a leader, or is shutting
	// down; the request may be retried elsewhere (with its request ID).
	CodeNoLeader byte = 3
	// CodeError: any other failure; the outcome may be unknown.
	CodeError byte = 4
	// CodeConflict: the register refused the request because of its state
	// (it changed nothing).
	CodeConflict byte = 5
	// CodeUnauthenticated: the connection carries no valid token (HTTP
	// 401).
	CodeUnauthenticated byte = 6
	// CodeForbidden: the connection's token does not allow the call (its
	// role, or a limit outside its patterns; HTTP 403).
	CodeForbidden byte = 7
	// CodeOverloaded: the node holds as many reserves as it may and
	// refused this one at once, changing nothing (HTTP 503 with
	// Retry-After); retry shortly, or at another node.
	CodeOverloaded byte = 8
)
