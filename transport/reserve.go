package transport

import (
	"net/http"
	"strconv"
	"time"

	"github.com/permitd/permitd/fsm"
)

// reserveRequest is the body of POST /v1/limits/{name}/reserve. An empty
// body asks for one permit without waiting.
type reserveRequest struct {
	Permits   opt[int64]  `json:"permits"`
	MaxWait   opt[string] `json:"max_wait"`
	RequestID opt[string] `json:"request_id"`
}

var reserveFields = fieldHelp{
	{"permits", "an integer > 0 (default 1)"},
	{"max_wait", `a Go duration string >= 0 such as "0s", "250ms" or "2s" (default "0s")`},
	{"request_id", "an idempotency key of " + allowedRequestIDChars},
}

// parseReserve validates a reserve body into r (whose Limit is already set).
func parseReserve(body []byte, r *fsm.Reserve) *httpError {
	permits, maxWait, reqID, ok := parseReserveFast(body)
	if !ok {
		var req reserveRequest
		if herr := decodeObject(body, &req, reserveFields, true); herr != nil {
			return herr
		}
		permits, maxWait, reqID = 1, "0s", ""
		if req.Permits.set {
			permits = req.Permits.v
		}
		if req.MaxWait.set {
			maxWait = req.MaxWait.v // "" is rejected below
		}
		if req.RequestID.set {
			reqID = req.RequestID.v
		}
	}
	if permits <= 0 {
		return badRequest(`field "permits": %d; allowed: %s`, permits, reserveFields.help("permits"))
	}
	r.Permits = permits
	if maxWait != "0s" {
		d, herr := parseDuration("max_wait", maxWait, true)
		if herr != nil {
			return herr
		}
		r.MaxWaitNanos = int64(d)
	}
	if reqID != "" {
		if err := validateRequestID(reqID); err != nil {
			return badRequest(`field "request_id": %v`, err)
		}
		r.RequestID = reqID
	}
	return nil
}

// parseReserveFast decodes the common shape of a reserve body without
// reflection: an object whose keys are among permits (a plain decimal
// integer), max_wait and request_id (strings without escapes), each at most
// once. ok is false for anything else, and the caller then decodes with
// encoding/json, which produces the same result or the error to report.
// An empty max_wait ("") or request_id is left to the slow path. maxWait is
// "0s" when absent.
func parseReserveFast(b []byte) (permits int64, maxWait, reqID string, ok bool) {
	permits, maxWait = 1, "0s"
	i := skipSpace(b, 0)
	if i == len(b) {
		return 0, "", "", false // empty body: the slow path decides
	}
	if b[i] != '{' {
		return 0, "", "", false
	}
	i = skipSpace(b, i+1)
	var seen [3]bool
	if i < len(b) && b[i] == '}' {
		return permits, maxWait, "", len(b) == skipSpace(b, i+1)
	}
	for {
		key, j, kok := fastString(b, i)
		if !kok {
			return 0, "", "", false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return 0, "", "", false
		}
		i = skipSpace(b, i+1)
		switch key {
		case "permits":
			if seen[0] {
				return 0, "", "", false
			}
			seen[0] = true
			n, j, nok := fastInt(b, i)
			if !nok {
				return 0, "", "", false
			}
			permits, i = n, j
		case "max_wait", "request_id":
			s, j, sok := fastString(b, i)
			if !sok || s == "" {
				return 0, "", "", false
			}
			if key == "max_wait" {
				if seen[1] {
					return 0, "", "", false
				}
				seen[1], maxWait = true, s
			} else {
				if seen[2] {
					return 0, "", "", false
				}
				seen[2], reqID = true, s
			}
			i = j
		default:
			return 0, "", "", false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, "", "", false
		}
		if b[i] == '}' {
			return permits, maxWait, reqID, len(b) == skipSpace(b, i+1)
		}
		if b[i] != ',' {
			return 0, "", "", false
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
