package api

import (
	"testing"

	"github.com/permitd/permitd/transport/wire"
)

// FuzzReserveParse checks that the reflection-free fast path never accepts
// a body that encoding/json decodes differently.
func FuzzReserveParse(f *testing.F) {
	for _, s := range []string{
		``, `{}`, ` { } `, `{"permits":5}`, `{"permits":5,"max_wait":"1s","request_id":"abc"}`,
		`{"request_id":"x","permits":12,"max_wait":"0s"}`, `{"permits":05}`, `{"permits":1,"permits":2}`,
		`{"Permits":3}`, `{"permits":1.0}`, `{"max_wait":"\u0031s"}`, `{"permits":1}x`, `{"permits":-1}`,
		`{"permits":123456789012345678}`, `{"permits":1234567890123456789}`, `{"request_id":"é"}`,
		`{"permits":2,"max_wait":"1s","session":7,"seq":3,"acked_below":2}`, `{"seq":1}`, `{"session":1,"seq":1,"request_id":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := parseReserveFast(body)
		if !ok {
			return
		}
		var req reserveRequest
		if herr := DecodeObject(body, &req, ReserveFields, true); herr != nil {
			t.Fatalf("fast path accepted %q, encoding/json rejects it: %v", body, herr)
		}
		want := fastReserve{permits: 1, maxWait: "0s"}
		if req.Permits.Set {
			want.permits = req.Permits.V
		}
		if req.MaxWait.Set {
			want.maxWait = req.MaxWait.V
		}
		if req.RequestID.Set {
			want.reqID = req.RequestID.V
		}
		want.session, want.seq, want.acked = req.Session.V, req.Seq.V, req.AckedBelow.V
		if got != want {
			t.Fatalf("%q: fast %+v != encoding/json %+v", body, got, want)
		}
		permits, reqID := got.permits, got.reqID
		// parseReserve agrees with what was decoded.
		var r wire.Reserve
		if herr := ParseReserve(body, &r); herr == nil && (r.Permits != permits || r.RequestID != reqID) {
			t.Fatalf("%q: parseReserve gave %+v", body, r)
		}
	})
}
