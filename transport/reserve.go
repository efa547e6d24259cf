package transport

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/fsm"
)

// reserveRequest is the body of POST /v1/limits/{name}/reserve. An empty
// body asks for one permit without waiting.
type reserveRequest struct {
	Permits    opt[int64]  `json:"permits"`
	MaxWait    opt[string] `json:"max_wait"`
	RequestID  opt[string] `json:"request_id"`
	Session    opt[int64]  `json:"session"`
	Seq        opt[int64]  `json:"seq"`
	AckedBelow opt[int64]  `json:"acked_below"`
}

var reserveFields = fieldHelp{
	{"permits", "an integer > 0 (default 1)"},
	{"max_wait", `a Go duration string >= 0 such as "0s", "250ms" or "2s" (default "0s")`},
	{"request_id", "an idempotency key of " + allowedRequestIDChars},
	{"session", "a session id from POST /v1/sessions (with seq and acked_below; not with request_id)"},
	{"seq", "with session: this request's number in the session, an integer >= 1 (a retry reuses it)"},
	{"acked_below", "with session: the lowest seq whose answer the client has not received, 1 <= acked_below <= seq (default 1)"},
}

// parseReserve validates a reserve body into r (whose Limit is already set).
func parseReserve(body []byte, r *fsm.Reserve) *httpError {
	f, ok := parseReserveFast(body)
	if !ok {
		var req reserveRequest
		if herr := decodeObject(body, &req, reserveFields, true); herr != nil {
			return herr
		}
		f = fastReserve{permits: 1, maxWait: "0s"}
		if req.Permits.set {
			f.permits = req.Permits.v
		}
		if req.MaxWait.set {
			f.maxWait = req.MaxWait.v // "" is rejected below
		}
		if req.RequestID.set {
			f.reqID = req.RequestID.v
		}
		if herr := parseSessionRef(&req, f.reqID != "", &r.Session); herr != nil {
			return herr
		}
	} else if f.session != 0 {
		req := reserveRequest{Session: opt[int64]{v: f.session, set: true}, Seq: opt[int64]{v: f.seq, set: f.seq != 0},
			AckedBelow: opt[int64]{v: f.acked, set: f.acked != 0}}
		if herr := parseSessionRef(&req, f.reqID != "", &r.Session); herr != nil {
			return herr
		}
	}
	if f.permits <= 0 {
		return badRequest(`field "permits": %d; allowed: %s`, f.permits, reserveFields.help("permits"))
	}
	r.Permits = f.permits
	if f.maxWait != "0s" {
		d, herr := parseDuration("max_wait", f.maxWait, true)
		if herr != nil {
			return herr
		}
		r.MaxWaitNanos = int64(d)
	}
	if f.reqID != "" {
		if err := validateRequestID(f.reqID); err != nil {
			return badRequest(`field "request_id": %v`, err)
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
func parseSessionRef(req *reserveRequest, hasRequestID bool, ref *fsm.SessionRef) *httpError {
	if !req.Session.set {
		if req.Seq.set || req.AckedBelow.set {
			return badRequest(`fields "seq" and "acked_below" need "session"; allowed: %s`, reserveFields.help("session"))
		}
		return nil
	}
	if hasRequestID {
		return badRequest(`fields "session" and "request_id" together; allowed: one of them (a session numbers its requests with "seq")`)
	}
	if req.Session.v < 1 {
		return badRequest(`field "session": %d; allowed: %s`, req.Session.v, reserveFields.help("session"))
	}
	if !req.Seq.set || req.Seq.v < 1 {
		return badRequest(`field "seq": %d (or missing); allowed: %s`, req.Seq.v, reserveFields.help("seq"))
	}
	acked := int64(1)
	if req.AckedBelow.set {
		acked = req.AckedBelow.v
	}
	if acked < 1 || acked > req.Seq.v {
		return badRequest(`field "acked_below": %d with seq %d; allowed: %s`, acked, req.Seq.v, reserveFields.help("acked_below"))
	}
	*ref = fsm.SessionRef{ID: uint64(req.Session.v), Seq: uint64(req.Seq.v), AckedBelow: uint64(acked)}
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
		key, j, kok := fastString(b, i)
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
		switch key {
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

// fastString reads a JSON string of printable ASCII without escapes at
// b[i:], returning it and the index after its closing quote.
func fastString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return "", 0, false
		}
	}
	return "", 0, false
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

func (h *handler) reserve(w http.ResponseWriter, r *http.Request, name string) {
	m := h.metrics
	if err := validateName("limit name", name); err != nil {
		m.reserveOutcome(outcomeInvalid)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	buf := getBuf()
	defer putBuf(buf)
	if herr := readBody(w, r, buf); herr != nil {
		m.reserveOutcome(outcomeInvalid)
		writeError(w, herr.code, herr.msg)
		return
	}
	req := fsm.Reserve{Limit: name}
	if herr := parseReserve(buf.Bytes(), &req); herr != nil {
		m.reserveOutcome(outcomeInvalid)
		writeError(w, herr.code, herr.msg)
		return
	}
	ctx, cancel := h.context(r)
	res, err := h.store.Reserve(ctx, req)
	cancel()
	if err != nil {
		switch code := h.storeError(w, "reserve", err); code {
		case http.StatusNotFound:
			m.reserveOutcome(outcomeUnknown)
		case http.StatusBadRequest:
			m.reserveOutcome(outcomeInvalid)
		default:
			m.reserveOutcome(outcomeError)
		}
		return
	}

	buf.Reset()
	b := buf.AvailableBuffer()
	switch res.Status {
	case fsm.Granted:
		m.reserveGranted(req.Permits, res.WaitNanos)
		b = append(b, `{"granted":true,"wait_ns":`...)
		b = strconv.AppendInt(b, res.WaitNanos, 10)
		b = append(b, `,"expires_in_ns":`...)
		b = strconv.AppendInt(b, res.ExpiresInNanos, 10)
		b = append(b, `,"spacing_ns":`...)
		b = strconv.AppendInt(b, res.SpacingNanos, 10)
		b = append(b, `,"duplicate":`...)
		b = strconv.AppendBool(b, res.Duplicate)
		b = append(b, "}\n"...)
		writeRaw(w, http.StatusOK, b)
	case fsm.Refused:
		m.reserveOutcome(outcomeRefused)
		w.Header()["Retry-After"] = []string{strconv.FormatInt(retryAfterSeconds(res.RetryAfterNanos), 10)}
		b = append(b, `{"granted":false,"retry_after_ns":`...)
		b = strconv.AppendInt(b, res.RetryAfterNanos, 10)
		b = append(b, `,"duplicate":`...)
		b = strconv.AppendBool(b, res.Duplicate)
		b = append(b, `,"error":`...)
		b = appendJSONString(b, "limit "+strconv.Quote(name)+": no permit within max_wait "+
			time.Duration(req.MaxWaitNanos).String()+"; retry after "+time.Duration(res.RetryAfterNanos).String())
		b = append(b, "}\n"...)
		writeRaw(w, http.StatusTooManyRequests, b)
	case fsm.Busy:
		m.reserveOutcome(outcomeError)
		w.Header()["Retry-After"] = []string{strconv.FormatInt(retryAfterSeconds(res.RetryAfterNanos), 10)}
		b = append(b, `{"granted":false,"retry_after_ns":`...)
		b = strconv.AppendInt(b, res.RetryAfterNanos, 10)
		b = append(b, `,"error":`...)
		b = appendJSONString(b, "the register remembers as many request ids as it can keep for their whole retention window: retry after "+
			time.Duration(res.RetryAfterNanos).String()+", or use a session (POST /v1/sessions), which has no such limit")
		b = append(b, "}\n"...)
		writeRaw(w, http.StatusServiceUnavailable, b)
	case fsm.SessionExpired:
		m.reserveOutcome(outcomeInvalid)
		b = append(b, `{"granted":false,"session_expired":true,"error":`...)
		b = appendJSONString(b, res.Detail)
		b = append(b, "}\n"...)
		writeRaw(w, http.StatusGone, b)
	case fsm.UnknownLimit:
		m.reserveOutcome(outcomeUnknown)
		writeError(w, http.StatusNotFound, "limit "+strconv.Quote(name)+" not found")
	case fsm.Invalid:
		m.reserveOutcome(outcomeInvalid)
		writeError(w, http.StatusBadRequest, "reserve on limit "+strconv.Quote(name)+": "+res.Detail)
	default:
		m.reserveOutcome(outcomeError)
		h.log.Error("store returned an unknown reserve status", "status", res.Status, "limit", name)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "reserve: unexpected result status "+strconv.Itoa(int(res.Status)))
	}
}

// retryAfterSeconds is a Retry-After header value: nanos in whole seconds,
// rounded up, never negative.
func retryAfterSeconds(nanos int64) int64 {
	if nanos <= 0 {
		return 0
	}
	s := nanos / int64(time.Second)
	if nanos%int64(time.Second) != 0 {
		s++
	}
	return s
}

// openSession serves POST /v1/sessions: a new client session for
// exactly-once reserves (see fsm.SessionResult).
func (h *handler) openSession(w http.ResponseWriter, r *http.Request) {
	buf := getBuf()
	defer putBuf(buf)
	if herr := readBody(w, r, buf); herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	if body := strings.TrimSpace(buf.String()); body != "" && body != "{}" {
		writeError(w, http.StatusBadRequest, "POST /v1/sessions takes no fields; send an empty body or {}")
		return
	}
	ctx, cancel := h.context(r)
	res, err := h.store.OpenSession(ctx)
	cancel()
	if err != nil {
		h.storeError(w, "open session", err)
		return
	}
	b := buf.AvailableBuffer()
	b = append(b, `{"session":`...)
	b = strconv.AppendUint(b, res.ID, 10)
	b = append(b, `,"idle_ttl_ns":`...)
	b = strconv.AppendInt(b, res.IdleNanos, 10)
	b = append(b, "}\n"...)
	writeRaw(w, http.StatusCreated, b)
}
