package wire

// ClientPreface is the first byte a client writes on a binary connection to
// a node's HTTP port. No HTTP/1.x or HTTP/2 connection starts with it.
const ClientPreface byte = 0x00

// Operations (the Kind of a call frame).
const (
	OpReserve byte = 1
	OpPut     byte = 2
	OpDelete  byte = 3
	OpRead    byte = 4
	OpJoin    byte = 5
	OpRemove  byte = 6
	// The lease commands and the lease view.
	OpLeasePolicy byte = 7
	OpLease       byte = 8
	OpRenew       byte = 9
	OpReturn      byte = 10
	OpLeaseView   byte = 11
	// OpOpenSession opens a client session (empty payload; the answer is
	// the session ID and its idle lifetime).
	OpOpenSession byte = 12
	// OpTransfer hands leadership to another voter (payload: the target's
	// ID, empty for any).
	OpTransfer byte = 13
)

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
)
