package api

import (
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// reserveRequest is the body of POST /v1/limits/{name}/reserve. An empty
// body asks for one permit without waiting.
type reserveRequest struct {
	Permits    Opt[int64]  `json:"permits"`
	MaxWait    Opt[string] `json:"max_wait"`
	RequestID  Opt[string] `json:"request_id"`
	Session    Opt[int64]  `json:"session"`
	Seq        Opt[int64]  `json:"seq"`
	AckedBelow Opt[int64]  `json:"acked_below"`
}

// ReserveFields describes the fields of a reserve body.
var ReserveFields = Fields{
	{"permits", "an integer > 0 (default 1)"},
	{"max_wait", `a Go duration string >= 0 such as "0s", "250ms" or "2s" (default "0s")`},
	{"request_id", "an idempotency key of " + AllowedRequestIDChars},
	{"session", "a session id from POST /v1/sessions (with seq and acked_below; not with request_id)"},
	{"seq", "with session: this request's number in the session, an integer >= 1 (a retry reuses it)"},
	{"acked_below", "with session: the lowest seq whose answer the client has not received, 1 <= acked_below <= seq (default 1)"},
}

// ParseReserve validates a reserve body (POST /v1/limits/{name}/reserve,
// also served by a worker's sidecar) into r, whose Limit is already set.
func ParseReserve(body []byte, r *wire.Reserve) *Error {
	f, ok := parseReserveFast(body)
	if !ok {
		var req reserveRequest
		if herr := DecodeObject(body, &req, ReserveFields, true); herr != nil {
			return herr
		}
		f = fastReserve{permits: 1, maxWait: "0s"}
		if req.Permits.Set {
			f.permits = req.Permits.V
		}
		if req.MaxWait.Set {
			f.maxWait = req.MaxWait.V // "" is rejected below
		}
		if req.RequestID.Set {
			if req.RequestID.V == "" {
				// An empty key would silently turn deduplication off.
				return BadRequest(`field "request_id": empty; allowed: %s, or leave the field out for a reserve that is not deduplicated`, AllowedRequestIDChars)
			}
			f.reqID = req.RequestID.V
		}
		if herr := parseSessionRef(&req, f.reqID != "", &r.Session); herr != nil {
			return herr
		}
	} else if f.session != 0 {
		req := reserveRequest{Session: Opt[int64]{V: f.session, Set: true}, Seq: Opt[int64]{V: f.seq, Set: f.seq != 0},
			AckedBelow: Opt[int64]{V: f.acked, Set: f.acked != 0}}
		if herr := parseSessionRef(&req, f.reqID != "", &r.Session); herr != nil {
			return herr
		}
	}
	if f.permits <= 0 {
		return BadRequest(`field "permits": %d; allowed: %s`, f.permits, ReserveFields.Help("permits"))
	}
	r.Permits = f.permits
	if f.maxWait != "0s" {
		d, herr := ParseDuration("max_wait", f.maxWait, true)
		if herr != nil {
			return herr
		}
		r.MaxWaitNanos = int64(d)
	}
	if f.reqID != "" {
		if err := ValidateRequestID(f.reqID); err != nil {
			return BadRequest(`field "request_id": %v`, err)
		}
		r.RequestID = f.reqID
	}
	return nil
}

// fastReserve is what parseReserveFast reads: the fields of a reserve
// body, with their defaults (1 permit, "0s"); session, seq and acked are
// 0 when absent.
type fastReserve struct {
	permits             int64
	maxWait, reqID      string
	session, seq, acked int64
}

// parseSessionRef validates the session fields of a reserve body.
func parseSessionRef(req *reserveRequest, hasRequestID bool, ref *wire.SessionRef) *Error {
	if !req.Session.Set {
		if req.Seq.Set || req.AckedBelow.Set {
			return BadRequest(`fields "seq" and "acked_below" need "session"; allowed: %s`, ReserveFields.Help("session"))
		}
		return nil
	}
	if hasRequestID {
		return BadRequest(`fields "session" and "request_id" together; allowed: one of them (a session numbers its requests with "seq")`)
	}
	if req.Session.V < 1 {
		return BadRequest(`field "session": %d; allowed: %s`, req.Session.V, ReserveFields.Help("session"))
	}
	if !req.Seq.Set || req.Seq.V < 1 {
		return BadRequest(`field "seq": %d (or missing); allowed: %s`, req.Seq.V, ReserveFields.Help("seq"))
	}
	acked := int64(1)
	if req.AckedBelow.Set {
		acked = req.AckedBelow.V
	}
	if acked < 1 || acked > req.Seq.V {
		return BadRequest(`field "acked_below": %d with seq %d; allowed: %s`, acked, req.Seq.V, ReserveFields.Help("acked_below"))
	}
	*ref = wire.SessionRef{ID: uint64(req.Session.V), Seq: uint64(req.Seq.V), AckedBelow: uint64(acked)}
	return nil
}

// parseReserveFast decodes the common shape of a reserve body without
// reflection: an object whose keys are among permits, session, seq and
// acked_below (plain decimal integers > 0), max_wait and request_id
// (strings without escapes), each at most once. ok is false for anything
// else, and the caller then decodes with encoding/json, which produces the
// same result or the error to report. An empty max_wait ("") or
// request_id is left to the slow path.
func parseReserveFast(b []byte) (f fastReserve, ok bool) {
	f = fastReserve{permits: 1, maxWait: "0s"}
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return fastReserve{}, false // an empty body: the slow path decides
	}
	i = skipSpace(b, i+1)
	var seen [6]bool
	if i < len(b) && b[i] == '}' {
		return f, len(b) == skipSpace(b, i+1)
	}
	for {
		key, j, kok := fastBytes(b, i)
		if !kok {
			return fastReserve{}, false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return fastReserve{}, false
		}
		i = skipSpace(b, i+1)
		var k int
		var num *int64
		var str *string
		switch string(key) { // compared without a copy
		case "permits":
			k, num = 0, &f.permits
		case "max_wait":
			k, str = 1, &f.maxWait
		case "request_id":
			k, str = 2, &f.reqID
		case "session":
			k, num = 3, &f.session
		case "seq":
			k, num = 4, &f.seq
		case "acked_below":
			k, num = 5, &f.acked
		default:
			return fastReserve{}, false
		}
		if seen[k] {
			return fastReserve{}, false
		}
		seen[k] = true
		if num != nil {
			n, j, nok := fastInt(b, i)
			if !nok {
				return fastReserve{}, false
			}
			*num, i = n, j
		} else {
			s, j, sok := fastString(b, i)
			if !sok || s == "" {
				return fastReserve{}, false
			}
			*str, i = s, j
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return fastReserve{}, false
		}
		if b[i] == '}' {
			if (seen[4] || seen[5]) && !seen[3] {
				return fastReserve{}, false // the slow path explains
			}
			return f, len(b) == skipSpace(b, i+1)
		}
		if b[i] != ',' {
			return fastReserve{}, false
		}
		i = skipSpace(b, i+1)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// fastString is fastBytes as a string.
func fastString(b []byte, i int) (string, int, bool) {
	s, j, ok := fastBytes(b, i)
	return string(s), j, ok
}

// fastBytes reads a JSON string of printable ASCII without escapes at
// b[i:], returning it and the index after its closing quote.
func fastBytes(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// fastInt reads a positive JSON integer (no sign, no leading zero, no
// fraction or exponent, at most 18 digits) at b[i:].
func fastInt(b []byte, i int) (int64, int, bool) {
	j := i
	var n int64
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		n = n*10 + int64(b[j]-'0')
		j++
	}
	digits := j - i
	if digits == 0 || digits > 18 || b[i] == '0' {
		return 0, 0, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, 0, false
	}
	return n, j, true
}

// ParseDuration parses a Go duration string for field; zeroOK allows 0.
func ParseDuration(field, v string, zeroOK bool) (time.Duration, *Error) {
	want := "> 0"
	if zeroOK {
		want = ">= 0"
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, BadRequest(`field %q: %s is not a duration; allowed: a Go duration string %s such as "250ms", "1s" or "1m30s"`, field, Quote(v), want)
	}
	if d < 0 || (d == 0 && !zeroOK) {
		return 0, BadRequest(`field %q: %s; allowed: a Go duration string %s`, field, Quote(v), want)
	}
	return d, nil
}

// RetryAfterSeconds is a Retry-After header value: nanos in whole seconds,
// rounded up, never negative.
func RetryAfterSeconds(nanos int64) int64 {
	if nanos <= 0 {
		return 0
	}
	s := nanos / int64(time.Second)
	if nanos%int64(time.Second) != 0 {
		s++
	}
	return s
}
