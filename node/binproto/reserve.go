package binproto

import "github.com/permitd/permitd/fsm"

// EncodeReserve is the payload of an OpReserve call: limit, permits, max
// wait, request ID, then the session reference (id, seq, acked below; all
// 0 without a session). The arrival time is not sent: the leader stamps it.
func EncodeReserve(r fsm.Reserve) []byte {
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
// fsm.Reserve.Validate checks the values. The session fields may be
// absent (a client that uses no sessions may stop after the request ID).
func DecodeReserve(p []byte) (fsm.Reserve, error) {
	r := Dec{B: p}
	v := fsm.Reserve{Limit: r.Str(), Permits: r.Svar(), MaxWaitNanos: r.Svar(), RequestID: r.Str()}
	if r.Err() == nil && len(r.B) > 0 {
		v.Session = fsm.SessionRef{ID: r.Uvar(), Seq: r.Uvar(), AckedBelow: r.Uvar()}
	}
	return v, r.Done()
}

// EncodeReserveResult is the payload of a CodeOK answer to OpReserve:
// status, wait, retry after, expires in, duplicate, detail, spacing.
func EncodeReserveResult(res fsm.ReserveResult) []byte {
	var w Enc
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
func DecodeReserveResult(p []byte) (fsm.ReserveResult, error) {
	r := Dec{B: p}
	v := fsm.ReserveResult{Status: fsm.Status(r.U8()), WaitNanos: r.Svar(), RetryAfterNanos: r.Svar(), ExpiresInNanos: r.Svar(),
		Duplicate: r.Bool(), Detail: r.Str(), SpacingNanos: r.Svar()}
	return v, r.Done()
}

// EncodeSessionResult is the payload of a CodeOK answer to OpOpenSession.
func EncodeSessionResult(res fsm.SessionResult) []byte {
	var w Enc
	w.Uvar(res.ID)
	w.Svar(res.IdleNanos)
	return w.B
}

// DecodeSessionResult decodes a CodeOK answer to OpOpenSession.
func DecodeSessionResult(p []byte) (fsm.SessionResult, error) {
	r := Dec{B: p}
	v := fsm.SessionResult{ID: r.Uvar(), IdleNanos: r.Svar()}
	return v, r.Done()
}
