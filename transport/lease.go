package transport

import (
	"context"
	"encoding/json"
	"github.com/permitd/permitd/transport/internal/httpapi"
	"math/big"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/fsm"
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
// as everywhere.

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

// leasePolicyRequest is the body of PUT /v1/limits/{name}/lease-policy.
type leasePolicyRequest struct {
	Leased                httpapi.Opt[bool]  `json:"leased"`
	BurstPermits          httpapi.Opt[int64] `json:"burst_permits"`
	MaxOutstandingPermits httpapi.Opt[int64] `json:"max_outstanding_permits"`
}

var leasePolicyFields = httpapi.Fields{
	{"leased", "true to lease the limit's permits to workers, false to reserve them one request at a time again (required)"},
	{"burst_permits", "C, the most permits the free pool accumulates: an integer 1-" + maxPoolText + ", or 0 for the default (one second of permits); only with leased true"},
	{"max_outstanding_permits", "O, the most permits held by leases at once: an integer 1-" + maxPoolText + ", or 0 for the default (one second of permits); only with leased true"},
}

const maxPoolText = "1152921504606846976 (2^60)"

// leaseRequest is the body of POST /v1/limits/{name}/lease.
type leaseRequest struct {
	Holder httpapi.Opt[string] `json:"holder"`
	Group  httpapi.Opt[string] `json:"group"`
	Weight httpapi.Opt[int64]  `json:"weight"`
	demandFields
	TTL       httpapi.Opt[string] `json:"ttl"`
	RequestID httpapi.Opt[string] `json:"request_id"`
}

const (
	helpDemandMilli = "the rate the holder wants in thousandths of a permit per second, an integer 0 to 1000000000000 " +
		"(required, or the older demand_per_sec)"
	helpDemand = "deprecated, use demand_milli_per_sec: a JSON number of permits per second, 0 to 1e9, converted exactly " +
		"from its decimal text to thousandths, any remainder rounded up (0.0004 -> 1, 2.0001 -> 2001)"
	helpTTL       = `a Go duration string from 100ms to 1m0s such as "2s" (required): how long the grant lasts`
	helpRequestID = "an idempotency key of " + httpapi.AllowedRequestIDChars
	helpReport    = "an integer >= 0 (default 0)"
)

var leaseFields = httpapi.Fields{
	{"holder", "the worker's name, " + httpapi.AllowedNameChars + " (required)"},
	{"group", "the worker's group, " + httpapi.AllowedNameChars + " (required)"},
	{"weight", "the group's weight in the fair division of the rate, an integer 1-1000000 (default 1)"},
	{"demand_milli_per_sec", helpDemandMilli},
	{"demand_per_sec", helpDemand},
	{"ttl", helpTTL},
	{"request_id", helpRequestID},
}

// renewRequest is the body of POST /v1/limits/{name}/leases/{id}/renew.
type renewRequest struct {
	Epoch     httpapi.Opt[uint64] `json:"epoch"`
	Spent     httpapi.Opt[int64]  `json:"spent"`
	StolenOut httpapi.Opt[int64]  `json:"stolen_out"`
	StolenIn  httpapi.Opt[int64]  `json:"stolen_in"`
	demandFields
	TTL       httpapi.Opt[string] `json:"ttl"`
	RequestID httpapi.Opt[string] `json:"request_id"`
}

var reportFields = httpapi.Fields{
	{"epoch", "the epoch of the grant reported on, an integer >= 1 (required)"},
	{"spent", "permits of the grant the holder spent: " + helpReport},
	{"stolen_out", "permits of the grant the holder gave to other holders: " + helpReport},
	{"stolen_in", "permits the holder received from other leases since its last report: " + helpReport},
	{"demand_milli_per_sec", helpDemandMilli + "; renew only"},
	{"demand_per_sec", helpDemand + "; renew only"},
	{"ttl", helpTTL + "; renew only"},
	{"request_id", helpRequestID},
}

// returnRequest is the body of POST /v1/limits/{name}/leases/{id}/return.
type returnRequest struct {
	Epoch     httpapi.Opt[uint64] `json:"epoch"`
	Spent     httpapi.Opt[int64]  `json:"spent"`
	StolenOut httpapi.Opt[int64]  `json:"stolen_out"`
	StolenIn  httpapi.Opt[int64]  `json:"stolen_in"`
	RequestID httpapi.Opt[string] `json:"request_id"`
}

var returnFields = httpapi.Fields{
	{"epoch", reportFields.Help("epoch")},
	{"spent", reportFields.Help("spent")},
	{"stolen_out", reportFields.Help("stolen_out")},
	{"stolen_in", reportFields.Help("stolen_in")},
	{"request_id", helpRequestID},
}

// demandFields are a demand's two spellings: demand_milli_per_sec, an
// integer of thousandths of a permit per second (the one vocabulary of
// demands and shares, from the worker to the register and back), and the
// older demand_per_sec, a number of permits per second, still accepted
// for one release. Exactly one is required.
type demandFields struct {
	Milli  httpapi.Opt[int64] `json:"demand_milli_per_sec"`
	PerSec jsonDecimal        `json:"demand_per_sec"`
}

// jsonDecimal is a JSON number kept as its text, so that it converts to
// thousandths exactly. Any other JSON type, null included, is rejected
// with the field's name.
type jsonDecimal struct {
	Set bool
	lit string
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *jsonDecimal) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[float64]()}
	}
	d.Set, d.lit = true, string(b)
	return nil
}

// jsonKind names the JSON type of a value that is not a number.
func jsonKind(b []byte) string {
	if len(b) > 0 {
		switch b[0] {
		case 'n':
			return "null"
		case 't', 'f':
			return "bool"
		case '{':
			return "object"
		case '[':
			return "array"
		}
	}
	return "string"
}

// jsonNumberSyntax is the grammar of a JSON number.
var jsonNumberSyntax = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE]([+-]?)([0-9]+))?$`)

// decimalMilli converts a JSON number of permits per second to
// thousandths exactly (through a rational, never a binary float), rounding
// any remainder up so that a positive demand never becomes 0. ok is false
// for a negative, malformed or too large number (over
// fsm.MaxDemandMilliPermitsPerSec).
func decimalMilli(lit string) (milli int64, ok bool) {
	m := jsonNumberSyntax.FindStringSubmatch(lit)
	if m == nil {
		return 0, false
	}
	mantissa := strings.TrimLeft(strings.ReplaceAll(m[1]+m[2], ".", ""), "0")
	switch {
	case mantissa == "":
		return 0, true // zero, "-0" included
	case lit[0] == '-':
		return 0, false
	case len(strings.TrimLeft(m[5], "0")) > 4:
		// An exponent of 10^5 or more: far out of range, or far below a
		// thousandth (which rounds up to one).
		if m[4] == "-" {
			return 1, true
		}
		return 0, false
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return 0, false
	}
	r.Mul(r, big.NewRat(1000, 1))
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > fsm.MaxDemandMilliPermitsPerSec {
		return 0, false
	}
	return q.Int64(), true
}

// parseDemand validates a demand given in either spelling.
func parseDemand(d demandFields, fields httpapi.Fields) (int64, *httpapi.Error) {
	switch {
	case d.Milli.Set && d.PerSec.Set:
		return 0, httpapi.BadRequest(`fields "demand_milli_per_sec" and "demand_per_sec" both given; allowed: one of them (demand_milli_per_sec: %s)`, fields.Help("demand_milli_per_sec"))
	case d.Milli.Set:
		if d.Milli.V < 0 || d.Milli.V > fsm.MaxDemandMilliPermitsPerSec {
			return 0, httpapi.BadRequest(`field "demand_milli_per_sec": %d; allowed: %s`, d.Milli.V, fields.Help("demand_milli_per_sec"))
		}
		return d.Milli.V, nil
	case d.PerSec.Set:
		milli, ok := decimalMilli(d.PerSec.lit)
		if !ok {
			return 0, httpapi.BadRequest(`field "demand_per_sec": %s; allowed: %s`, httpapi.Quote(d.PerSec.lit), fields.Help("demand_per_sec"))
		}
		return milli, nil
	}
	return 0, httpapi.BadRequest(`field "demand_milli_per_sec" is required; allowed: %s`, fields.Help("demand_milli_per_sec"))
}

// parseTTL validates a ttl field.
func parseTTL(v httpapi.Opt[string]) (int64, *httpapi.Error) {
	if !v.Set {
		return 0, httpapi.BadRequest(`field "ttl" is required; allowed: %s`, helpTTL)
	}
	d, herr := httpapi.ParseDuration("ttl", v.V, false)
	if herr != nil {
		return 0, herr
	}
	if int64(d) < fsm.MinLeaseTTLNanos || int64(d) > fsm.MaxLeaseTTLNanos {
		return 0, httpapi.BadRequest(`field "ttl": %s; allowed: %s`, httpapi.Quote(v.V), helpTTL)
	}
	return int64(d), nil
}

// parseCount validates a non-negative permit count (0 when absent).
func parseCount(field string, v httpapi.Opt[int64], fields httpapi.Fields) (int64, *httpapi.Error) {
	if v.Set && v.V < 0 {
		return 0, httpapi.BadRequest(`field %q: %d; allowed: %s`, field, v.V, fields.Help(field))
	}
	return v.V, nil
}

// parseRequestIDField validates an optional request_id field.
func parseRequestIDField(v httpapi.Opt[string]) (string, *httpapi.Error) {
	if !v.Set {
		return "", nil
	}
	if err := httpapi.ValidateRequestID(v.V); err != nil {
		return "", httpapi.BadRequest(`field "request_id": %v`, err)
	}
	return v.V, nil
}

// parseLeaseID validates the {id} of a lease path: a decimal integer
// 1..2^64-1 without sign or leading zeros.
func parseLeaseID(s string) (uint64, *httpapi.Error) {
	const allowed = "a lease id: a decimal integer from 1 to 18446744073709551615 without sign or leading zeros"
	if s == "" || len(s) > 20 || s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return 0, httpapi.BadRequest("lease id %s in the path; allowed: %s", httpapi.Quote(s), allowed)
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, httpapi.BadRequest("lease id %s in the path; allowed: %s", httpapi.Quote(s), allowed)
	}
	return id, nil
}

// parseReport validates the fields common to renew and return.
func parseReport(epoch httpapi.Opt[uint64], spent, out, in httpapi.Opt[int64], fields httpapi.Fields) (e uint64, s, o, i int64, herr *httpapi.Error) {
	if !epoch.Set || epoch.V < 1 {
		if !epoch.Set {
			return 0, 0, 0, 0, httpapi.BadRequest(`field "epoch" is required; allowed: %s`, fields.Help("epoch"))
		}
		return 0, 0, 0, 0, httpapi.BadRequest(`field "epoch": %d; allowed: %s`, epoch.V, fields.Help("epoch"))
	}
	if s, herr = parseCount("spent", spent, fields); herr != nil {
		return
	}
	if o, herr = parseCount("stolen_out", out, fields); herr != nil {
		return
	}
	if i, herr = parseCount("stolen_in", in, fields); herr != nil {
		return
	}
	return epoch.V, s, o, i, nil
}

// readObject reads r's body and decodes it as one JSON object into v.
func readObject(w http.ResponseWriter, r *http.Request, v any, fields httpapi.Fields) *httpapi.Error {
	buf := httpapi.GetBuf()
	defer httpapi.PutBuf(buf)
	if herr := httpapi.ReadBody(w, r, buf); herr != nil {
		return herr
	}
	return httpapi.DecodeObject(buf.Bytes(), v, fields, false)
}

// parseLeaseRequest validates a lease body into q (whose Limit is set).
func parseLeaseRequest(req *leaseRequest, q *fsm.Lease) *httpapi.Error {
	for _, f := range []struct {
		name string
		V    httpapi.Opt[string]
		dst  *string
	}{{"holder", req.Holder, &q.Holder}, {"group", req.Group, &q.Group}} {
		if !f.V.Set {
			return httpapi.BadRequest("field %q is required; allowed: %s", f.name, leaseFields.Help(f.name))
		}
		if err := httpapi.ValidateName(f.name+" name", f.V.V); err != nil {
			return httpapi.BadRequest("field %q: %v", f.name, err)
		}
		*f.dst = f.V.V
	}
	q.Weight = 1
	if req.Weight.Set {
		if req.Weight.V < 1 || req.Weight.V > fsm.MaxLeaseWeight {
			return httpapi.BadRequest(`field "weight": %d; allowed: %s`, req.Weight.V, leaseFields.Help("weight"))
		}
		q.Weight = req.Weight.V
	}
	var herr *httpapi.Error
	if q.DemandMilliPermitsPerSec, herr = parseDemand(req.demandFields, leaseFields); herr != nil {
		return herr
	}
	if q.TTLNanos, herr = parseTTL(req.TTL); herr != nil {
		return herr
	}
	if q.RequestID, herr = parseRequestIDField(req.RequestID); herr != nil {
		return herr
	}
	return nil
}

func (h *handler) putLeasePolicy(w http.ResponseWriter, r *http.Request, name string) {
	if err := httpapi.ValidateName("limit name", name); err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req leasePolicyRequest
	if herr := readObject(w, r, &req, leasePolicyFields); herr != nil {
		httpapi.WriteError(w, herr.Code, herr.Msg)
		return
	}
	if !req.Leased.Set {
		httpapi.WriteError(w, http.StatusBadRequest, `field "leased" is required; allowed: `+leasePolicyFields.Help("leased"))
		return
	}
	p := fsm.LeasePolicy{Limit: name, Leased: req.Leased.V}
	for _, f := range []struct {
		name string
		V    httpapi.Opt[int64]
		dst  *int64
	}{{"burst_permits", req.BurstPermits, &p.BurstPermits}, {"max_outstanding_permits", req.MaxOutstandingPermits, &p.MaxOutstandingPermits}} {
		if !f.V.Set {
			continue
		}
		if f.V.V < 0 || f.V.V > fsm.MaxLeasePoolPermits || (f.V.V != 0 && !p.Leased) {
			httpapi.WriteError(w, http.StatusBadRequest, "field "+strconv.Quote(f.name)+": "+strconv.FormatInt(f.V.V, 10)+
				" with leased "+strconv.FormatBool(p.Leased)+"; allowed: "+leasePolicyFields.Help(f.name))
			return
		}
		*f.dst = f.V.V
	}
	if err := p.Validate(); err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, err.Error())
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
		httpapi.WriteError(w, http.StatusNotFound, "limit "+httpapi.Quote(name)+" not found")
		return
	case !res.Applied:
		httpapi.WriteError(w, http.StatusBadRequest, "lease policy of limit "+httpapi.Quote(name)+" not applied: "+res.Detail)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, leasePolicyView{Name: name, Leased: p.Leased, BurstPermits: res.BurstPermits,
		MaxOutstandingPermits: res.MaxOutstandingPermits})
}

// leasePolicyView is the answer to PUT /v1/limits/{name}/lease-policy:
// the effective capacities C and O (0 when not leased).
type leasePolicyView struct {
	Name                  string `json:"name"`
	Leased                bool   `json:"leased"`
	BurstPermits          int64  `json:"burst_permits"`
	MaxOutstandingPermits int64  `json:"max_outstanding_permits"`
}

func (h *handler) lease(w http.ResponseWriter, r *http.Request, name string) {
	q := fsm.Lease{Limit: name}
	h.leaseCommand(w, r, "lease", name, func() *httpapi.Error {
		if err := httpapi.ValidateName("limit name", name); err != nil {
			return httpapi.BadRequest("%v", err)
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
	h.leaseCommand(w, r, "renew", name, func() *httpapi.Error {
		var req renewRequest
		herr := h.leasePath(name, idText, &q.LeaseID)
		if herr == nil {
			herr = readObject(w, r, &req, reportFields)
		}
		if herr == nil {
			q.Epoch, q.SpentPermits, q.StolenOutPermits, q.StolenInPermits, herr = parseReport(req.Epoch, req.Spent, req.StolenOut, req.StolenIn, reportFields)
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
	h.leaseCommand(w, r, "return", name, func() *httpapi.Error {
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
func (h *handler) leaseCommand(w http.ResponseWriter, r *http.Request, op, name string, parse func() *httpapi.Error, send func(context.Context) (fsm.LeaseResult, error)) {
	if herr := parse(); herr != nil {
		h.metrics.countLease(leaseInvalid)
		httpapi.WriteError(w, herr.Code, herr.Msg)
		return
	}
	ctx, cancel := h.context(r)
	res, err := send(ctx)
	cancel()
	h.leaseAnswer(w, op, name, res, err)
}

// validated turns a command's Validate error into a 400.
func validated(err error) *httpapi.Error {
	if err != nil {
		return httpapi.BadRequest("%v", err)
	}
	return nil
}

// leasePath validates the limit name and lease id of a lease path.
func (h *handler) leasePath(name, idText string, id *uint64) *httpapi.Error {
	if err := httpapi.ValidateName("limit name", name); err != nil {
		return httpapi.BadRequest("%v", err)
	}
	var herr *httpapi.Error
	*id, herr = parseLeaseID(idText)
	return herr
}

// leaseAnswerView is the answer to a lease, renew or return.
type leaseAnswerView struct {
	// Status is "granted", "refused", "fenced" or "returned".
	Status  string `json:"status"`
	LeaseID uint64 `json:"lease_id"`
	Epoch   uint64 `json:"epoch"`
	// Permits, ExpiresInNanos and the share describe a grant.
	Permits          int64  `json:"permits"`
	ExpiresInNanos   int64  `json:"expires_in_ns"`
	ShareMilliPerSec int64  `json:"share_milli_per_sec"`
	CreditedPermits  int64  `json:"credited_permits"`
	RetryAfterNanos  int64  `json:"retry_after_ns,omitempty"`
	Duplicate        bool   `json:"duplicate"`
	Error            string `json:"error,omitempty"`
}

// leaseAnswer answers the store's result of a lease, renew or return.
func (h *handler) leaseAnswer(w http.ResponseWriter, op, name string, res fsm.LeaseResult, err error) {
	m := h.metrics
	if err != nil {
		switch h.storeError(w, op, err) {
		case http.StatusNotFound:
			m.countLease(leaseUnknown)
		case http.StatusBadRequest:
			m.countLease(leaseInvalid)
		default:
			m.countLease(leaseError)
		}
		return
	}
	v := leaseAnswerView{Status: res.Status.String(), LeaseID: res.LeaseID, Epoch: res.Epoch, Permits: res.Permits,
		ExpiresInNanos: res.ExpiresInNanos, ShareMilliPerSec: res.ShareMilliPermitsPerSec, CreditedPermits: res.CreditedPermits, Duplicate: res.Duplicate}
	detail := func(fallback string) string {
		if res.Detail != "" {
			return op + " on limit " + strconv.Quote(name) + ": " + res.Detail
		}
		return op + " on limit " + strconv.Quote(name) + ": " + fallback
	}
	switch res.Status {
	case fsm.LeaseGranted:
		m.countLease(leaseGranted)
		httpapi.WriteJSON(w, http.StatusOK, v)
	case fsm.LeaseReturned:
		m.countLease(leaseReturned)
		httpapi.WriteJSON(w, http.StatusOK, v)
	case fsm.LeaseRefused:
		m.countLease(leaseRefused)
		v.RetryAfterNanos = res.RetryAfterNanos
		v.Error = detail("refused; retry after " + time.Duration(res.RetryAfterNanos).String())
		w.Header()["Retry-After"] = []string{strconv.FormatInt(httpapi.RetryAfterSeconds(res.RetryAfterNanos), 10)}
		httpapi.WriteJSON(w, http.StatusTooManyRequests, v)
	case fsm.LeaseFenced:
		m.countLease(leaseFenced)
		v.Error = detail("the lease is not live at that epoch: stop using that grant")
		httpapi.WriteJSON(w, http.StatusConflict, v)
	case fsm.LeaseUnknownLimit:
		m.countLease(leaseUnknown)
		httpapi.WriteError(w, http.StatusNotFound, "limit "+strconv.Quote(name)+" not found")
	case fsm.LeaseInvalid:
		m.countLease(leaseInvalid)
		httpapi.WriteError(w, http.StatusBadRequest, detail("invalid"))
	default:
		m.countLease(leaseError)
		h.log.Error("store returned an unknown lease status", "status", res.Status, "limit", name, "op", op)
		w.Header().Set("Retry-After", "1")
		httpapi.WriteError(w, http.StatusServiceUnavailable, op+": unexpected result status "+strconv.Itoa(int(res.Status)))
	}
}

// leasePoolView is the answer to GET /v1/limits/{name}/leases: the pool's
// capacities, accounts (minted = free + outstanding + settled) and
// counters, and its leases sorted by id. Cluster times (_cluster_ns) are
// on the timeline of GET /v1/status's cluster_now_ns.
type leasePoolView struct {
	Name                  string      `json:"name"`
	IntervalNanos         int64       `json:"interval_ns"`
	BurstPermits          int64       `json:"burst_permits"`
	MaxOutstandingPermits int64       `json:"max_outstanding_permits"`
	BurstSpec             int64       `json:"burst_permits_spec"`
	MaxOutstandingSpec    int64       `json:"max_outstanding_permits_spec"`
	MintedPermits         int64       `json:"minted_permits"`
	FreePermits           int64       `json:"free_permits"`
	OutstandingPermits    int64       `json:"outstanding_permits"`
	SettledPermits        int64       `json:"settled_permits"`
	SpentPermits          int64       `json:"spent_permits"`
	StolenPermits         int64       `json:"stolen_permits"`
	ExpiredPermits        int64       `json:"expired_permits"`
	StolenInPermits       int64       `json:"stolen_in_permits"`
	ActiveLeases          int         `json:"active_leases"`
	LingeringLeases       int         `json:"lingering_leases"`
	LeasesOpened          uint64      `json:"leases_opened"`
	Renewals              uint64      `json:"renewals"`
	Returns               uint64      `json:"returns"`
	Expirations           uint64      `json:"expirations"`
	Fenced                uint64      `json:"fenced"`
	Leases                []leaseView `json:"leases"`
}

// leaseView is one lease of a leasePoolView.
type leaseView struct {
	LeaseID           uint64 `json:"lease_id"`
	Epoch             uint64 `json:"epoch"`
	Active            bool   `json:"active"`
	Holder            string `json:"holder"`
	Group             string `json:"group"`
	Weight            int64  `json:"weight"`
	DemandMilliPerSec int64  `json:"demand_milli_per_sec"`
	ShareMilliPerSec  int64  `json:"share_milli_per_sec"`
	Permits           int64  `json:"permits"`
	LingeringPermits  int64  `json:"lingering_permits"`
	GrantedAtNanos    int64  `json:"granted_at_cluster_ns"`
	ExpiresAtNanos    int64  `json:"expires_at_cluster_ns"`
	StolenInPermits   int64  `json:"stolen_in_permits"`
}

func newLeasePoolView(name string, p fsm.LeasePoolInfo, ls []fsm.LeaseInfo) leasePoolView {
	v := leasePoolView{Name: name, IntervalNanos: p.IntervalNanos, BurstPermits: p.BurstPermits,
		MaxOutstandingPermits: p.MaxOutstandingPermits, BurstSpec: p.BurstSpec, MaxOutstandingSpec: p.MaxOutstandingSpec,
		MintedPermits: p.MintedPermits, FreePermits: p.FreePermits, OutstandingPermits: p.OutstandingPermits,
		SettledPermits: p.SettledPermits, SpentPermits: p.SpentPermits, StolenPermits: p.StolenPermits,
		ExpiredPermits: p.ExpiredPermits, StolenInPermits: p.StolenInPermits, ActiveLeases: p.ActiveLeases,
		LingeringLeases: p.LingeringLeases, LeasesOpened: p.LeasesOpened, Renewals: p.Renewals, Returns: p.Returns,
		Expirations: p.Expirations, Fenced: p.Fenced, Leases: make([]leaseView, len(ls))}
	for i, l := range ls {
		v.Leases[i] = leaseView{LeaseID: l.ID, Epoch: l.Epoch, Active: l.Active, Holder: l.Holder, Group: l.Group,
			Weight: l.Weight, DemandMilliPerSec: l.DemandMilliPermitsPerSec, ShareMilliPerSec: l.ShareMilliPermitsPerSec,
			Permits: l.Permits, LingeringPermits: l.LingeringPermits, GrantedAtNanos: l.GrantedAtNanos,
			ExpiresAtNanos: l.ExpiresAtNanos, StolenInPermits: l.StolenInPermits}
	}
	return v
}

func (h *handler) getLeases(w http.ResponseWriter, r *http.Request, name string) {
	if err := httpapi.ValidateName("limit name", name); err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	pool, leases, err := h.store.LeaseView(ctx, name)
	if err != nil {
		h.storeError(w, "list leases", err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, newLeasePoolView(name, pool, leases))
}
