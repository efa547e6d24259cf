package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/wire"
)

func (h *handler) reserve(w http.ResponseWriter, r *http.Request, name string) {
	m := h.metrics
	if err := api.ValidateName("limit name", name); err != nil {
		m.countReserve(protoHTTP, outcomeInvalid)
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	if herr := api.ReadBody(w, r, buf); herr != nil {
		m.countReserve(protoHTTP, outcomeInvalid)
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	wr := wire.Reserve{Limit: name}
	if herr := api.ParseReserve(buf.Bytes(), &wr); herr != nil {
		m.countReserve(protoHTTP, outcomeInvalid)
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	// A session's reserve is the token's: it is answered only on a
	// session the same token opened (sessions.go).
	_, owner, _ := ownerOf(r)
	req := reserveFromWire(wr, owner)
	res, ok := h.decide(w, r, req)
	if !ok {
		return
	}

	buf.Reset()
	b := buf.AvailableBuffer()
	switch res.Status {
	case fsm.Granted:
		m.reserveGranted(protoHTTP, req.Permits, res.WaitNanos)
		b = appendDuplicate(grantStart(b, res), res.Duplicate)
		api.WriteRaw(w, http.StatusOK, append(b, "}\n"...))
	case fsm.Refused:
		m.countReserve(protoHTTP, outcomeRefused)
		b = appendDuplicate(refusalStart(w, b, res.RetryAfterNanos), res.Duplicate)
		b = appendErrorEnd(b, "limit "+strconv.Quote(name)+": "+refusalReason(res, req.MaxWaitNanos)+
			"; retry after "+api.DurationText(time.Duration(res.RetryAfterNanos)))
		api.WriteRaw(w, http.StatusTooManyRequests, b)
	case fsm.KeysFull:
		h.answerKeysFull(w, b, res, "limit "+strconv.Quote(name)+": ")
	case fsm.Busy:
		msg := "the register remembers as many request ids as it can keep for their whole retention window: retry after " +
			api.DurationText(time.Duration(res.RetryAfterNanos)) + ", or use a session (POST /v1/sessions), which has no such limit"
		if res.Detail != "" { // a session's answer could not be recorded
			msg = res.Detail + "; retry after " + api.DurationText(time.Duration(res.RetryAfterNanos))
		}
		h.answerBusy(w, b, res.RetryAfterNanos, msg)
	case fsm.SessionExpired:
		m.countReserve(protoHTTP, outcomeInvalid)
		b = append(b, `{"granted":false,"session_expired":true,"error":`...)
		b = api.AppendJSONString(b, res.Detail)
		b = append(b, "}\n"...)
		api.WriteRaw(w, http.StatusGone, b)
	case fsm.UnknownLimit:
		m.countReserve(protoHTTP, outcomeUnknown)
		api.WriteError(w, http.StatusNotFound, "limit "+strconv.Quote(name)+" not found")
	case fsm.Invalid:
		m.countReserve(protoHTTP, outcomeInvalid)
		api.WriteError(w, http.StatusBadRequest, "reserve on limit "+strconv.Quote(name)+": "+res.Detail)
	default:
		m.countReserve(protoHTTP, outcomeError)
		h.log.Error("store returned an unknown reserve status", "status", res.Status, "limit", name)
		w.Header().Set("Retry-After", "1")
		api.WriteError(w, http.StatusServiceUnavailable, "reserve: unexpected result status "+strconv.Itoa(int(res.Status)))
	}
}

// readNoFields reads the body of a request that takes no fields (op names
// it): empty, or an empty JSON object in any whitespace. Otherwise it
// answers the error and returns false.
func readNoFields(w http.ResponseWriter, r *http.Request, op string) bool {
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	if herr := api.ReadBody(w, r, buf); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return false
	}
	var none struct{}
	if herr := api.DecodeObject(buf.Bytes(), &none, nil, true); herr != nil {
		api.WriteError(w, herr.Code, op+" takes no fields (send an empty body or {}): "+herr.Msg)
		return false
	}
	return true
}

// decide runs reserve q on the store. On an error it answers it, counts
// its outcome and returns false. A reserve in the reservation form may
// wait in an in-flight cap's queue for up to its max wait before it is
// answered (fsm/waiters.go): its request may take that much longer, and
// so may the writing of its answer.
func (h *handler) decide(w http.ResponseWriter, r *http.Request, q fsm.Reserve) (fsm.ReserveResult, bool) {
	ctx, cancel := h.context(r)
	if q.Track && q.MaxWaitNanos > 0 {
		cancel()
		limit := wire.AddNanos(h.timeout, time.Duration(q.MaxWaitNanos))
		ctx, cancel = context.WithTimeout(r.Context(), limit)
		// Not every writer has a deadline (a test recorder): then there is
		// nothing to extend.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wire.AddNanos(limit, serverWriteTimeout)))
	}
	res, err := h.store.Reserve(ctx, q)
	cancel()
	if err == nil {
		return res, true
	}
	switch code := h.storeError(w, "reserve", err); code {
	case http.StatusNotFound:
		h.metrics.countReserve(protoHTTP, outcomeUnknown)
	case http.StatusBadRequest:
		h.metrics.countReserve(protoHTTP, outcomeInvalid)
	default:
		h.metrics.countReserve(protoHTTP, outcomeError)
	}
	return res, false
}

// refusalReason says why a reserve was refused: the register's reason
// when the max wait was not it (a strict limit that may not reserve that
// far ahead: its max_reserved; a grant that expired before its answer
// left), else that no permit was free within maxWaitNanos; for a retry of
// an earlier request, that it was refused then.
func refusalReason(res fsm.ReserveResult, maxWaitNanos int64) string {
	switch {
	case res.Detail != "":
		return res.Detail
	case res.Duplicate:
		return "this request was refused when it was first decided (a retry gets that decision)"
	}
	return "no permit within max_wait " + time.Duration(maxWaitNanos).String()
}

// refusalStart sets Retry-After and starts a refusal's JSON answer:
// {"granted":false,"retry_after_ns":R (the caller appends the rest).
func refusalStart(w http.ResponseWriter, b []byte, retryAfterNanos int64) []byte {
	w.Header()["Retry-After"] = []string{strconv.FormatInt(api.RetryAfterSeconds(retryAfterNanos), 10)}
	b = append(b, `{"granted":false,"retry_after_ns":`...)
	return strconv.AppendInt(b, retryAfterNanos, 10)
}

// grantStart starts a grant's JSON answer:
// {"granted":true,"wait_ns":W,"expires_in_ns":E,"spacing_ns":S (the
// caller appends the rest).
func grantStart(b []byte, res fsm.ReserveResult) []byte {
	b = append(b, `{"granted":true,"wait_ns":`...)
	b = strconv.AppendInt(b, res.WaitNanos, 10)
	b = append(b, `,"expires_in_ns":`...)
	b = strconv.AppendInt(b, res.ExpiresInNanos, 10)
	b = append(b, `,"spacing_ns":`...)
	return strconv.AppendInt(b, res.SpacingNanos, 10)
}

// appendDuplicate appends an answer's "duplicate" field.
func appendDuplicate(b []byte, dup bool) []byte {
	b = append(b, `,"duplicate":`...)
	return strconv.AppendBool(b, dup)
}

// appendErrorEnd appends an answer's "error" field, msg, and ends the
// object.
func appendErrorEnd(b []byte, msg string) []byte {
	b = append(b, `,"error":`...)
	b = api.AppendJSONString(b, msg)
	return append(b, "}\n"...)
}

// answerKeysFull answers 429 for a reserve that would have created a
// templated key past a cap (fsm.KeysFull): Retry-After is when the first
// key may go, the error names the cap (after what, which names the
// request's limit if any).
func (h *handler) answerKeysFull(w http.ResponseWriter, b []byte, res fsm.ReserveResult, what string) {
	h.metrics.countReserve(protoHTTP, outcomeKeysFull)
	b = append(refusalStart(w, b, res.RetryAfterNanos), `,"keys_full":true`...)
	b = appendDuplicate(b, res.Duplicate)
	api.WriteRaw(w, http.StatusTooManyRequests, appendErrorEnd(b, what+"no key created: "+res.Detail+
		"; retry after "+api.DurationText(time.Duration(res.RetryAfterNanos))))
}

// answerBusy answers 503 for a reserve the register could not record (its
// table of request IDs or of reservations is full), with msg.
func (h *handler) answerBusy(w http.ResponseWriter, b []byte, retryAfterNanos int64, msg string) {
	h.metrics.countReserve(protoHTTP, outcomeError)
	api.WriteRaw(w, http.StatusServiceUnavailable, appendErrorEnd(refusalStart(w, b, retryAfterNanos), msg))
}
