package server

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/auth"
)

// reservation.go: the reservation form of reserves (POST /v1/reserve: one
// or more limits, all or nothing, answered with a reservation ID), and
// settling and releasing a reservation (POST
// /v1/reservations/{id}/settle, /release). See fsm/multi.go and
// fsm/settle.go for what the register does with them.

// partRequest is one limit of a reserve or settle body.
type partRequest struct {
	Name    api.Opt[string] `json:"name"`
	Permits api.Opt[int64]  `json:"permits"`
}

// multiReserveRequest is the body of POST /v1/reserve.
type multiReserveRequest struct {
	Limits       api.Opt[partRequests] `json:"limits"`
	MaxWait      api.Opt[string]       `json:"max_wait"`
	RequestID    api.Opt[string]       `json:"request_id"`
	SettleWithin api.Opt[string]       `json:"settle_within"`
}

var multiReserveFields = api.Fields{
	{"limits", `a list of 1 to 8 objects {"name": a limit name, "permits": an integer > 0 (default 1)}, each limit once`},
	{"max_wait", `a Go duration string >= 0 such as "0s", "250ms" or "2s" (default "0s")`},
	{"request_id", "an idempotency key of " + api.AllowedRequestIDChars},
	{"settle_within", `how long after the grant the reservation can be settled, a Go duration string from "1ns" to "10m" (default "1m")`},
}

// settleRequest is the body of POST /v1/reservations/{id}/settle.
type settleRequest struct {
	Actual    api.Opt[partRequests] `json:"actual"`
	RequestID api.Opt[string]       `json:"request_id"`
}

var settleFields = api.Fields{
	{"actual", `a list of up to 8 objects {"name": a limit of the reservation, "permits": the permits actually used, an integer >= 0}, each limit once; a limit not listed used what it reserved`},
	{"request_id", "an idempotency key of " + api.AllowedRequestIDChars + " (a retry with the same key gets the first answer)"},
}

// parseParts validates a list of parts: 1..MaxReserveParts (0 allowed
// when emptyOK), valid names each once, permits >= minPermits (default
// defaultPermits when absent).
func parseParts(field string, ps []partRequest, emptyOK bool, minPermits, defaultPermits int64) ([]fsm.Part, *api.Error) {
	if len(ps) > fsm.MaxReserveParts || (len(ps) == 0 && !emptyOK) {
		least := 1
		if emptyOK {
			least = 0
		}
		return nil, api.BadRequest(`field %q: %d limits; allowed: %d to %d`, field, len(ps), least, fsm.MaxReserveParts)
	}
	out := make([]fsm.Part, 0, len(ps))
	for i, p := range ps {
		if !p.Name.Set {
			return nil, api.BadRequest(`field %q: entry %d has no "name"; allowed: a limit name`, field, i)
		}
		if err := api.ValidateName("limit name", p.Name.V); err != nil {
			return nil, api.BadRequest(`field %q: entry %d: %v`, field, i, err)
		}
		n := defaultPermits
		if p.Permits.Set {
			n = p.Permits.V
		} else if defaultPermits < 0 {
			return nil, api.BadRequest(`field %q: entry %d (%q) has no "permits"; allowed: an integer >= %d`, field, i, p.Name.V, minPermits)
		}
		if n < minPermits {
			return nil, api.BadRequest(`field %q: entry %d (%q) has permits %d; allowed: an integer >= %d`, field, i, p.Name.V, n, minPermits)
		}
		for _, q := range out {
			if q.Limit == p.Name.V {
				return nil, api.BadRequest(`field %q: limit %q is listed twice; allowed: each limit once`, field, p.Name.V)
			}
		}
		out = append(out, fsm.Part{Limit: p.Name.V, Permits: n})
	}
	return out, nil
}

// ownerOf is who a reservation made with r belongs to: its token's name
// when tokens are on, else nobody (anyone may settle it).
func ownerOf(r *http.Request) (auth.Token, string, bool) {
	t, ok := auth.TokenFrom(r.Context())
	if !ok {
		return auth.Token{}, "", false
	}
	return t, t.Name, true
}

// multiReserve serves POST /v1/reserve.
func (h *handler) multiReserve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	q, parts, herr := readMultiReserve(w, r, buf)
	if herr != nil {
		h.metrics.countReserve(protoHTTP, outcomeInvalid)
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	res, ok := h.decide(w, r, q)
	if !ok {
		return
	}
	// How long this node held the request (a reserve that waited in an
	// in-flight cap's queue), up to the moment its answer's durations
	// count from: the client counts the expiry and the hold's end from its
	// request's sending plus this, never later than that moment.
	held := time.Since(start)
	buf.Reset()
	h.answerReservation(w, buf.AvailableBuffer(), q, parts, res, held)
}

// readMultiReserve reads and validates the body of POST /v1/reserve (in
// buf) into the register's reserve and the limits it names, checking them
// against the request's token: a 400, or a 403 for a limit the token may
// not use.
func readMultiReserve(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) (fsm.Reserve, []fsm.Part, *api.Error) {
	if herr := api.ReadBody(w, r, buf); herr != nil {
		return fsm.Reserve{}, nil, herr
	}
	var req multiReserveRequest
	if herr := api.DecodeObject(buf.Bytes(), &req, multiReserveFields, false); herr != nil {
		return fsm.Reserve{}, nil, herr
	}
	if !req.Limits.Set {
		return fsm.Reserve{}, nil, api.BadRequest(`field "limits" is missing; allowed: %s`, multiReserveFields.Help("limits"))
	}
	parts, herr := parseParts("limits", req.Limits.V, false, 1, 1)
	if herr != nil {
		return fsm.Reserve{}, nil, herr
	}
	q := fsm.Reserve{Limit: parts[0].Limit, Permits: parts[0].Permits, Also: parts[1:], Track: true}
	if req.MaxWait.Set {
		d, herr := api.ParseDuration("max_wait", req.MaxWait.V, true)
		if herr != nil {
			return fsm.Reserve{}, nil, herr
		}
		q.MaxWaitNanos = int64(d)
	}
	if req.SettleWithin.Set {
		d, herr := api.ParseDuration("settle_within", req.SettleWithin.V, false)
		if herr == nil && int64(d) > fsm.MaxSettleWindowNanos {
			herr = api.BadRequest(`field "settle_within": %v; allowed: %s`, d, multiReserveFields.Help("settle_within"))
		}
		if herr != nil {
			return fsm.Reserve{}, nil, herr
		}
		q.SettleWithinNanos = int64(d)
	}
	if req.RequestID.Set {
		if err := api.ValidateRequestID(req.RequestID.V); err != nil || req.RequestID.V == "" {
			return fsm.Reserve{}, nil, api.BadRequest(`field "request_id": %q; allowed: %s, or leave the field out for a reserve that is not deduplicated`, req.RequestID.V, api.AllowedRequestIDChars)
		}
		q.RequestID = req.RequestID.V
	}
	if t, owner, ok := ownerOf(r); ok {
		names := make([]string, len(parts))
		for i, p := range parts {
			names[i] = p.Limit
		}
		if ok, why := auth.MayUseAll(t, names); !ok {
			return fsm.Reserve{}, nil, &api.Error{Code: http.StatusForbidden, Msg: "auth: " + why}
		}
		q.Owner = owner
	}
	return q, parts, nil
}

// answerReservation answers the register's decision res on reserve q of
// parts, which this node held for held, appending its JSON to b.
func (h *handler) answerReservation(w http.ResponseWriter, b []byte, q fsm.Reserve, parts []fsm.Part, res fsm.ReserveResult, held time.Duration) {
	m := h.metrics
	switch res.Status {
	case fsm.Granted:
		var permits int64
		for _, p := range parts {
			permits += p.Permits
		}
		m.reserveGranted(protoHTTP, permits, res.WaitNanos)
		b = grantStart(b, res)
		b = append(b, `,"reservation_id":"`...)
		b = strconv.AppendUint(b, res.ReservationID, 10)
		b = append(b, `","holds":`...)
		b = strconv.AppendBool(b, res.Holds)
		b = append(b, `,"hold_expires_in_ns":`...)
		b = strconv.AppendInt(b, res.HoldExpiresInNanos, 10)
		b = append(b, `,"held_ns":`...)
		b = appendDuplicate(strconv.AppendInt(b, int64(held), 10), res.Duplicate)
		api.WriteRaw(w, http.StatusOK, append(b, "}\n"...))
	case fsm.Refused:
		m.countReserve(protoHTTP, outcomeRefused)
		b = refusalStart(w, b, res.RetryAfterNanos)
		b = append(b, `,"blocking":`...)
		b = appendDuplicate(api.AppendJSONString(b, res.Blocking), res.Duplicate)
		why := "no grant of every limit within max_wait " + time.Duration(q.MaxWaitNanos).String()
		if res.Detail != "" || res.Duplicate {
			why = refusalReason(res, q.MaxWaitNanos)
		}
		msg := why + "; retry after " + api.DurationText(time.Duration(res.RetryAfterNanos))
		if res.Blocking != "" {
			msg = "limit " + strconv.Quote(res.Blocking) + " blocks: " + msg
		}
		api.WriteRaw(w, http.StatusTooManyRequests, appendErrorEnd(b, msg))
	case fsm.Busy:
		why := "the register holds as many request ids or reservations as it can keep"
		if res.Detail != "" {
			why = res.Detail // a full queue of reserves waiting on a limit
		}
		h.answerBusy(w, b, res.RetryAfterNanos, why+": retry after "+api.DurationText(time.Duration(res.RetryAfterNanos)))
	case fsm.KeysFull:
		h.answerKeysFull(w, b, res, "")
	case fsm.UnknownLimit:
		m.countReserve(protoHTTP, outcomeUnknown)
		api.WriteError(w, http.StatusNotFound, res.Detail)
	default:
		m.countReserve(protoHTTP, outcomeInvalid)
		api.WriteError(w, http.StatusBadRequest, "reserve: "+res.Detail)
	}
}

// dispatchReservation routes /v1/reservations/{id}/{settle,release}.
func (h *handler) dispatchReservation(w http.ResponseWriter, r *http.Request, rest string) route {
	idText, op, ok := strings.Cut(rest, "/")
	if !ok || (op != "settle" && op != "release") {
		return routeUnknown
	}
	rt := routeSettle
	if op == "release" {
		rt = routeRelease
	}
	if !h.method(w, r, "POST") {
		return rt
	}
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil || id == 0 {
		api.WriteError(w, http.StatusBadRequest, "reservation id "+api.Quote(idText)+": allowed: the reservation_id a grant returned, a decimal integer >= 1")
		return rt
	}
	_, owner, _ := ownerOf(r)
	if op == "settle" {
		h.settle(w, r, id, owner)
	} else {
		h.release(w, r, id, owner)
	}
	return rt
}

// settle serves POST /v1/reservations/{id}/settle.
func (h *handler) settle(w http.ResponseWriter, r *http.Request, id uint64, owner string) {
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	if herr := api.ReadBody(w, r, buf); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	var req settleRequest
	if herr := api.DecodeObject(buf.Bytes(), &req, settleFields, false); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	if !req.Actual.Set {
		api.WriteError(w, http.StatusBadRequest, `field "actual" is missing; allowed: `+settleFields.Help("actual"))
		return
	}
	actual, herr := parseParts("actual", req.Actual.V, true, 0, -1)
	if herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	c := fsm.Settle{Reservation: id, Owner: owner, Actual: actual}
	if req.RequestID.Set {
		if err := api.ValidateRequestID(req.RequestID.V); err != nil || req.RequestID.V == "" {
			api.WriteError(w, http.StatusBadRequest, `field "request_id": `+strconv.Quote(req.RequestID.V)+"; allowed: "+settleFields.Help("request_id"))
			return
		}
		c.RequestID = req.RequestID.V
	}
	ctx, cancel := h.context(r)
	res, err := h.store.Settle(ctx, c)
	cancel()
	if err != nil {
		h.storeError(w, "settle", err)
		return
	}
	out := api.SettleAnswer{Settled: true, Duplicate: res.Duplicate, Limits: []api.SettledLimit{}}
	for _, p := range res.Parts {
		out.Limits = append(out.Limits, api.SettledLimit{Limit: p.Limit, Reserved: p.Reserved, Actual: p.Actual, Refunded: p.Refunded, Charged: p.Charged})
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// release serves POST /v1/reservations/{id}/release.
func (h *handler) release(w http.ResponseWriter, r *http.Request, id uint64, owner string) {
	if !readNoFields(w, r, "POST /v1/reservations/{id}/release") {
		return
	}
	ctx, cancel := h.context(r)
	res, err := h.store.Release(ctx, fsm.Release{Reservation: id, Owner: owner})
	cancel()
	if err != nil {
		h.storeError(w, "release", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.ReleaseAnswer{Released: res.Released, Duplicate: res.Duplicate})
}
