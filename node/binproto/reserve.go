package binproto

import "github.com/permitd/permitd/fsm"

// EncodeReserve is the payload of an OpReserve call.
func EncodeReserve(r fsm.Reserve) []byte {
	var w Enc
	w.Str(r.Limit)
	w.Svar(r.Permits)
	w.Svar(r.MaxWaitNanos)
	w.Str(r.RequestID)
	return w.B
}

// DecodeReserve decodes an OpReserve payload. It checks the encoding only;
// fsm.Reserve.Validate checks the values.
func DecodeReserve(p []byte) (fsm.Reserve, error) {
	r := Dec{B: p}
	v := fsm.Reserve{Limit: r.Str(), Permits: r.Svar(), MaxWaitNanos: r.Svar(), RequestID: r.Str()}
	return v, r.Done()
}

// EncodeReserveResult is the payload of a CodeOK answer to OpReserve.
func EncodeReserveResult(res fsm.ReserveResult) []byte {
	var w Enc
	w.U8(byte(res.Status))
	w.Svar(res.WaitNanos)
	w.Svar(res.RetryAfterNanos)
	w.Svar(res.ExpiresInNanos)
	w.Bool(res.Duplicate)
	w.Str(res.Detail)
	return w.B
}

// DecodeReserveResult decodes a CodeOK answer to OpReserve.
func DecodeReserveResult(p []byte) (fsm.ReserveResult, error) {
	r := Dec{B: p}
	v := fsm.ReserveResult{Status: fsm.Status(r.U8()), WaitNanos: r.Svar(), RetryAfterNanos: r.Svar(), ExpiresInNanos: r.Svar(), Duplicate: r.Bool(), Detail: r.Str()}
	return v, r.Done()
}
