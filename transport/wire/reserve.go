package wire

// reserve.go: the binary protocol's reserve, its answer and a session's
// opening. These are the protocol's own types: a client speaks them without
// the server's packages, and a node converts them to and from the
// register's (the numbering of Status is the register's, checked by a test
// in package node).

// Reserve asks for Permits permits of Limit, waiting at most MaxWaitNanos
// for them. RequestID (or a Session) makes its retries exactly-once.
type Reserve struct {
	Limit        string
	Permits      int64
	MaxWaitNanos int64
	RequestID    string
	Session      SessionRef
}

// SessionRef names a reserve within a client session: the session's ID,
// the reserve's sequence number and the lowest sequence number whose answer
// the client may still need (see the register's sessions). All zero
// without a session.
type SessionRef struct {
	ID, Seq, AckedBelow uint64
}

// ReserveStatus is the register's decision on a reserve.
type ReserveStatus uint8

// Reserve outcomes.
const (
	// Granted: permit j of the grant may be used WaitNanos +
	// j*SpacingNanos after the answer.
	Granted ReserveStatus = 1
	// Refused: nothing reserved; RetryAfterNanos says when to try again.
	Refused ReserveStatus = 2
	// UnknownLimit: no limit of that name exists.
	UnknownLimit ReserveStatus = 3
	// Invalid: the request can never be granted under the limit's
	// configuration; Detail says why.
	Invalid ReserveStatus = 4
	// SessionExpired: the reserve's session is not open, or not the
	// connection's token's (the same answer); open a new one and ask
	// again.
	SessionExpired ReserveStatus = 5
	// Busy: the register's table of request IDs is full, or (Detail says
	// which) its sessions keep as many answers as they may; nothing was
	// decided; RetryAfterNanos says when to try again.
	Busy ReserveStatus = 6
	// KeysFull: the reserve names a key a template would create, and
	// creating it would pass the template's max keys or the register's
	// cap on templated keys (Detail names it); nothing was created or
	// reserved; RetryAfterNanos says when the first key may go (HTTP 429
	// with "keys_full").
	KeysFull ReserveStatus = 8
)

// ReserveResult is the answer to a Reserve. Its durations count from the
// moment the answer left the node that sent it.
type ReserveResult struct {
	Status ReserveStatus
	// WaitNanos (Granted): when the first permit may be used; RetryAfter
	// (Refused, Busy, KeysFull): when the same request could succeed.
	WaitNanos, RetryAfterNanos int64
	// ExpiresInNanos (Granted): when the first permit stops being usable
	// (0: never; -1: already expired, do not use it).
	ExpiresInNanos int64
	// SpacingNanos (Granted): the spacing between the permits of the grant.
	SpacingNanos int64
	// Duplicate: the answer is the stored decision of an earlier copy of
	// the request.
	Duplicate bool
	// Detail explains Invalid, SessionExpired, a session's Busy and
	// KeysFull.
	Detail string
}

// SessionResult is the answer to OpOpenSession: the session's ID and how
// long it lives without a reserve, or a refusal (ID 0: the register holds
// as many sessions as it may, in all or for the client's token) with when
// to retry and why. A refused open opened nothing.
type SessionResult struct {
	ID        uint64
	IdleNanos int64
	// RetryAfterNanos (refused) is when a session can be opened at the
	// earliest; Detail (refused) says why it was refused.
	RetryAfterNanos int64
	Detail          string
}

// EncodeReserve is the payload of an OpReserve call: limit, permits, max
// wait, request ID, then the session reference. The arrival time is not
// sent: the leader stamps it.
func EncodeReserve(r Reserve) []byte {
	var w Enc
	w.Str(r.Limit)
	w.Svar(r.Permits)
	w.Svar(r.MaxWaitNanos)
	w.Str(r.RequestID)
	w.Uvar(r.Session.ID)
	w.Uvar(r.Session.Seq)
	w.Uvar(r.Session.AckedBelow)
	return w.B
}

// DecodeReserve decodes an OpReserve payload. It checks the encoding only;
// the node validates the values. The session fields may be absent (a
// client that uses no sessions may stop after the request ID).
func DecodeReserve(p []byte) (Reserve, error) {
	r := Dec{B: p}
	v := Reserve{Limit: r.Str(), Permits: r.Svar(), MaxWaitNanos: r.Svar(), RequestID: r.Str()}
	if r.Err() == nil && len(r.B) > 0 {
		v.Session = SessionRef{ID: r.Uvar(), Seq: r.Uvar(), AckedBelow: r.Uvar()}
	}
	return v, r.Done()
}

// EncodeReserveResult is the payload of a CodeOK answer to OpReserve:
// status, wait, retry after, expires in, duplicate, detail, spacing.
func EncodeReserveResult(res ReserveResult) []byte {
	w := Enc{B: make([]byte, 0, 64+len(res.Detail))} // one allocation: at most 62 bytes and the detail's
	w.U8(byte(res.Status))
	w.Svar(res.WaitNanos)
	w.Svar(res.RetryAfterNanos)
	w.Svar(res.ExpiresInNanos)
	w.Bool(res.Duplicate)
	w.Str(res.Detail)
	w.Svar(res.SpacingNanos)
	return w.B
}

// DecodeReserveResult decodes a CodeOK answer to OpReserve.
func DecodeReserveResult(p []byte) (ReserveResult, error) {
	r := Dec{B: p}
	v := ReserveResult{Status: ReserveStatus(r.U8()), WaitNanos: r.Svar(), RetryAfterNanos: r.Svar(), ExpiresInNanos: r.Svar(),
		Duplicate: r.Bool(), Detail: r.Str(), SpacingNanos: r.Svar()}
	return v, r.Done()
}

// EncodeSessionResult is the payload of a CodeOK answer to OpOpenSession:
// the ID and the idle lifetime, then, for a refusal only, retry after and
// detail.
func EncodeSessionResult(res SessionResult) []byte {
	var w Enc
	w.Uvar(res.ID)
	w.Svar(res.IdleNanos)
	if res.ID == 0 {
		w.Svar(res.RetryAfterNanos)
		w.Str(res.Detail)
	}
	return w.B
}

// DecodeSessionResult decodes a CodeOK answer to OpOpenSession.
func DecodeSessionResult(p []byte) (SessionResult, error) {
	r := Dec{B: p}
	v := SessionResult{ID: r.Uvar(), IdleNanos: r.Svar()}
	if r.Err() == nil && v.ID == 0 {
		v.RetryAfterNanos, v.Detail = r.Svar(), r.Str()
	}
	return v, r.Done()
}
