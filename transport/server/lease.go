package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
)

// lease.go: the endpoints of leased limits (see the package documentation
// and package fsm's Leases section).
//
//	PUT  /v1/limits/{name}/lease-policy             make a limit leased or linearized
//	GET  /v1/limits/{name}/leases                   the lease pool and its leases
//	POST /v1/limits/{name}/lease                    open a lease
//	POST /v1/limits/{name}/leases/{id}/renew        report on a grant, get the next
//	POST /v1/limits/{name}/leases/{id}/return       report on a grant, close the lease
//
// Lease, renew and return answer {"status": ...}: 200 "granted" or
// "returned", 429 "refused" (with Retry-After), 409 "fenced" (stop using
// that grant); 404 for an unknown limit and 400 for an invalid request,
// as everywhere. This file routes and answers them; their bodies are read
// in leaseparse.go and their answers' JSON is package api's (lease.go).

// dispatchLease routes the lease endpoints under /v1/limits/{name}/; sub
// is the path after the name. It returns routeUnknown, having written
// nothing, when sub is not one of them.
func (h *handler) dispatchLease(w *recorder, r *http.Request, name, sub string) route {
	switch sub {
	case "lease-policy":
		if h.method(w, r, "PUT") {
			h.putLeasePolicy(w, r, name)
		}
		return routeLeasePolicy
	case "leases":
		if h.method(w, r, "GET, HEAD") {
			h.getLeases(w, r, name)
		}
		return routeLeases
	case "lease":
		if h.method(w, r, "POST") {
			h.lease(w, r, name)
		}
		return routeLease
	}
	rest, ok := strings.CutPrefix(sub, "leases/")
	if !ok {
		return routeUnknown
	}
	id, action, ok := strings.Cut(rest, "/")
	if !ok {
		return routeUnknown
	}
	switch action {
	case "renew":
		if h.method(w, r, "POST") {
			h.renew(w, r, name, id)
		}
		return routeRenew
	case "return":
		if h.method(w, r, "POST") {
			h.returnLease(w, r, name, id)
		}
		return routeReturn
	}
	return routeUnknown
}

func (h *handler) putLeasePolicy(w http.ResponseWriter, r *http.Request, name string) {
	if err := api.ValidateName("limit name", name); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req leasePolicyRequest
	if herr := readObject(w, r, &req, leasePolicyFields); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	if !req.Leased.Set {
		api.WriteError(w, http.StatusBadRequest, `field "leased" is required; allowed: `+leasePolicyFields.Help("leased"))
		return
	}
	p := fsm.LeasePolicy{Limit: name, Leased: req.Leased.V}
	for _, f := range []struct {
		name string
		V    api.Opt[int64]
		dst  *int64
	}{{"burst_permits", req.BurstPermits, &p.BurstPermits}, {"max_outstanding_permits", req.MaxOutstandingPermits, &p.MaxOutstandingPermits}} {
		if !f.V.Set {
			continue
		}
		if f.V.V < 0 || f.V.V > fsm.MaxLeasePoolPermits || (f.V.V != 0 && !p.Leased) {
			api.WriteError(w, http.StatusBadRequest, "field "+strconv.Quote(f.name)+": "+strconv.FormatInt(f.V.V, 10)+
				" with leased "+strconv.FormatBool(p.Leased)+"; allowed: "+leasePolicyFields.Help(f.name))
			return
		}
		*f.dst = f.V.V
	}
	if err := p.Validate(); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	res, err := h.store.PutLeasePolicy(ctx, p)
	if err != nil {
		h.storeError(w, "put lease policy", err)
		return
	}
	switch {
	case res.UnknownLimit:
		api.WriteError(w, http.StatusNotFound, "limit "+api.Quote(name)+" not found")
		return
	case !res.Applied:
		api.WriteError(w, http.StatusBadRequest, "lease policy of limit "+api.Quote(name)+" not applied: "+res.Detail)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.LeasePolicyResult{Name: name, Leased: p.Leased, BurstPermits: res.BurstPermits,
		MaxOutstandingPermits: res.MaxOutstandingPermits})
}

func (h *handler) lease(w http.ResponseWriter, r *http.Request, name string) {
	q := fsm.Lease{Limit: name}
	h.leaseCommand(w, r, "lease", name, func() *api.Error {
		if err := api.ValidateName("limit name", name); err != nil {
			return api.BadRequest("%v", err)
		}
		var req leaseRequest
		if herr := readObject(w, r, &req, leaseFields); herr != nil {
			return herr
		}
		if herr := parseLeaseRequest(&req, &q); herr != nil {
			return herr
		}
		return validated(q.Validate())
	}, func(ctx context.Context) (fsm.LeaseResult, error) { return h.store.Lease(ctx, q) })
}

func (h *handler) renew(w http.ResponseWriter, r *http.Request, name, idText string) {
	q := fsm.Renew{Report: fsm.Report{Limit: name}}
	h.leaseCommand(w, r, "renew", name, func() *api.Error {
		var req renewRequest
		herr := h.leasePath(name, idText, &q.LeaseID)
		if herr == nil {
			herr = readObject(w, r, &req, reportFields)
		}
		if herr == nil {
			q.Epoch, q.SpentPermits, q.StolenOutPermits, q.StolenInPermits, herr = parseReport(req.Epoch, req.Spent, req.StolenOut, req.StolenIn, reportFields)
		}
		if herr == nil {
			q.KeptPermits, herr = parseCount("kept", req.Kept, reportFields)
		}
		if herr == nil {
			q.DemandMilliPermitsPerSec, herr = parseDemand(req.demandFields, reportFields)
		}
		if herr == nil {
			q.TTLNanos, herr = parseTTL(req.TTL)
		}
		if herr == nil {
			q.RequestID, herr = parseRequestIDField(req.RequestID)
		}
		if herr != nil {
			return herr
		}
		return validated(q.Validate())
	}, func(ctx context.Context) (fsm.LeaseResult, error) { return h.store.Renew(ctx, q) })
}

func (h *handler) returnLease(w http.ResponseWriter, r *http.Request, name, idText string) {
	q := fsm.Return{Report: fsm.Report{Limit: name}}
	h.leaseCommand(w, r, "return", name, func() *api.Error {
		var req returnRequest
		herr := h.leasePath(name, idText, &q.LeaseID)
		if herr == nil {
			herr = readObject(w, r, &req, returnFields)
		}
		if herr == nil {
			q.Epoch, q.SpentPermits, q.StolenOutPermits, q.StolenInPermits, herr = parseReport(req.Epoch, req.Spent, req.StolenOut, req.StolenIn, returnFields)
		}
		if herr == nil {
			q.RequestID, herr = parseRequestIDField(req.RequestID)
		}
		if herr != nil {
			return herr
		}
		return validated(q.Validate())
	}, func(ctx context.Context) (fsm.LeaseResult, error) { return h.store.Return(ctx, q) })
}

// leaseCommand answers one lease command: parse reads and validates the
// request into the command the closures share; a rejection is counted
// and answered without reaching the store; otherwise send sends it.
func (h *handler) leaseCommand(w http.ResponseWriter, r *http.Request, op, name string, parse func() *api.Error, send func(context.Context) (fsm.LeaseResult, error)) {
	if herr := parse(); herr != nil {
		h.metrics.countLease(protoHTTP, leaseInvalid)
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	ctx, cancel := h.context(r)
	res, err := send(ctx)
	cancel()
	h.leaseAnswer(w, op, name, res, err)
}

// validated turns a command's Validate error into a 400.
func validated(err error) *api.Error {
	if err != nil {
		return api.BadRequest("%v", err)
	}
	return nil
}

// leasePath validates the limit name and lease id of a lease path.
func (h *handler) leasePath(name, idText string, id *uint64) *api.Error {
	if err := api.ValidateName("limit name", name); err != nil {
		return api.BadRequest("%v", err)
	}
	var herr *api.Error
	*id, herr = parseLeaseID(idText)
	return herr
}

// leaseAnswer answers the store's result of a lease, renew or return.
func (h *handler) leaseAnswer(w http.ResponseWriter, op, name string, res fsm.LeaseResult, err error) {
	m := h.metrics
	if err != nil {
		switch h.storeError(w, op, err) {
		case http.StatusNotFound:
			m.countLease(protoHTTP, leaseUnknown)
		case http.StatusBadRequest:
			m.countLease(protoHTTP, leaseInvalid)
		default:
			m.countLease(protoHTTP, leaseError)
		}
		return
	}
	v := api.LeaseAnswer{Status: res.Status.String(), LeaseID: res.LeaseID, Epoch: res.Epoch, Permits: res.Permits,
		ExpiresInNanos: res.ExpiresInNanos, ShareMilliPerSec: res.ShareMilliPermitsPerSec, CreditedPermits: res.CreditedPermits, Duplicate: res.Duplicate}
	detail := func(fallback string) string {
		if res.Detail != "" {
			return op + " on limit " + strconv.Quote(name) + ": " + res.Detail
		}
		return op + " on limit " + strconv.Quote(name) + ": " + fallback
	}
	switch res.Status {
	case fsm.LeaseGranted:
		m.countLease(protoHTTP, leaseGranted)
		api.WriteJSON(w, http.StatusOK, v)
	case fsm.LeaseReturned:
		m.countLease(protoHTTP, leaseReturned)
		api.WriteJSON(w, http.StatusOK, v)
	case fsm.LeaseRefused:
		m.countLease(protoHTTP, leaseRefused)
		v.RetryAfterNanos = res.RetryAfterNanos
		v.Error = detail("refused; retry after " + api.DurationText(time.Duration(res.RetryAfterNanos)))
		w.Header()["Retry-After"] = []string{strconv.FormatInt(api.RetryAfterSeconds(res.RetryAfterNanos), 10)}
		api.WriteJSON(w, http.StatusTooManyRequests, v)
	case fsm.LeaseFenced:
		m.countLease(protoHTTP, leaseFenced)
		v.Error = detail("the lease is not live at that epoch: stop using that grant")
		api.WriteJSON(w, http.StatusConflict, v)
	case fsm.LeaseUnknownLimit:
		m.countLease(protoHTTP, leaseUnknown)
		api.WriteError(w, http.StatusNotFound, "limit "+strconv.Quote(name)+" not found")
	case fsm.LeaseInvalid:
		m.countLease(protoHTTP, leaseInvalid)
		api.WriteError(w, http.StatusBadRequest, detail("invalid"))
	default:
		m.countLease(protoHTTP, leaseError)
		h.log.Error("store returned an unknown lease status", "status", res.Status, "limit", name, "op", op)
		w.Header().Set("Retry-After", "1")
		api.WriteError(w, http.StatusServiceUnavailable, op+": unexpected result status "+strconv.Itoa(int(res.Status)))
	}
}

func (h *handler) getLeases(w http.ResponseWriter, r *http.Request, name string) {
	if err := api.ValidateName("limit name", name); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	pool, leases, err := h.store.LeaseView(ctx, name)
	if err != nil {
		h.storeError(w, "list leases", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, newLeasePoolView(name, pool, leases))
}
