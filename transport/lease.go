package transport

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
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
	Leased                opt[bool]  `json:"leased"`
	BurstPermits          opt[int64] `json:"burst_permits"`
	MaxOutstandingPermits opt[int64] `json:"max_outstanding_permits"`
}

var leasePolicyFields = fieldHelp{
	{"leased", "true to lease the limit's permits to workers, false to reserve them one request at a time again (required)"},
	{"burst_permits", "C, the most permits the free pool accumulates: an integer 1-" + maxPoolText + ", or 0 for the default (one second of permits); only with leased true"},
	{"max_outstanding_permits", "O, the most permits held by leases at once: an integer 1-" + maxPoolText + ", or 0 for the default (one second of permits); only with leased true"},
}

const maxPoolText = "1152921504606846976 (2^60)"

// leaseRequest is the body of POST /v1/limits/{name}/lease.
type leaseRequest struct {
	Holder       opt[string] `json:"holder"`
	Group        opt[string] `json:"group"`
	Weight       opt[int64]  `json:"weight"`
	DemandPerSec jsonDecimal `json:"demand_per_sec"`
	TTL          opt[string] `json:"ttl"`
	RequestID    opt[string] `json:"request_id"`
}

const (
	helpDemand = "a JSON number of permits per second, 0 to 1e9 (required), converted exactly from its decimal text to thousandths " +
		"of a permit per second, any remainder rounded up (0.0004 -> 0.001, 2.0001 -> 2.001)"
	helpTTL       = `a Go duration string from 100ms to 1m0s such as "2s" (required): how long the grant lasts`
	helpRequestID = "an idempotency key of " + allowedRequestIDChars
	helpReport    = "an integer >= 0 (default 0)"
)

var leaseFields = fieldHelp{
	{"holder", "the worker's name, " + allowedNameChars + " (required)"},
	{"group", "the worker's group, " + allowedNameChars + " (required)"},
	{"weight", "the group's weight in the fair division of the rate, an integer 1-1000000 (default 1)"},
	{"demand_per_sec", helpDemand},
	{"ttl", helpTTL},
	{"request_id", helpRequestID},
}

// renewRequest is the body of POST /v1/limits/{name}/leases/{id}/renew.
type renewRequest struct {
	Epoch        opt[uint64] `json:"epoch"`
	Spent        opt[int64]  `json:"spent"`
	StolenOut    opt[int64]  `json:"stolen_out"`
	StolenIn     opt[int64]  `json:"stolen_in"`
	DemandPerSec jsonDecimal `json:"demand_per_sec"`
	TTL          opt[string] `json:"ttl"`
	RequestID    opt[string] `json:"request_id"`
}

var reportFields = fieldHelp{
	{"epoch", "the epoch of the grant reported on, an integer >= 1 (required)"},
	{"spent", "permits of the grant the holder spent: " + helpReport},
	{"stolen_out", "permits of the grant the holder gave to other holders: " + helpReport},
	{"stolen_in", "permits the holder received from other leases since its last report: " + helpReport},
	{"demand_per_sec", helpDemand + "; renew only"},
	{"ttl", helpTTL + "; renew only"},
	{"request_id", helpRequestID},
}

// returnRequest is the body of POST /v1/limits/{name}/leases/{id}/return.
type returnRequest struct {
	Epoch     opt[uint64] `json:"epoch"`
	Spent     opt[int64]  `json:"spent"`
	StolenOut opt[int64]  `json:"stolen_out"`
	StolenIn  opt[int64]  `json:"stolen_in"`
	RequestID opt[string] `json:"request_id"`
}

var returnFields = fieldHelp{
	{"epoch", reportFields.help("epoch")},
	{"spent", reportFields.help("spent")},
	{"stolen_out", reportFields.help("stolen_out")},
	{"stolen_in", reportFields.help("stolen_in")},
	{"request_id", helpRequestID},
}

// jsonDecimal is a JSON number kept as its text, so that it can be
// converted to an integer exactly (see decimalMilli). Any other JSON type,
// null included, is rejected with the field's name.
type jsonDecimal struct {
	set bool
	lit string
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *jsonDecimal) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		got := "string"
		if len(b) > 0 {
			switch b[0] {
			case 'n':
				got = "null"
			case 't', 'f':
				got = "bool"
			case '{':
				got = "object"
			case '[':
				got = "array"
			}
		}
		return &json.UnmarshalTypeError{Value: got, Type: reflect.TypeFor[float64]()}
	}
	d.set, d.lit = true, string(b)
	return nil
}

// maxMilliDigits is the number of digits of fsm.MaxDemandMilliPermitsPerSec
// (10^12).
const maxMilliDigits = 13

// decimalMilli converts a JSON number literal of permits per second to
// thousandths of a permit per second, exactly from its decimal text (never
// through a binary float), rounding any remainder up: a positive demand
// never becomes 0. ok is false when the literal is negative (and not
// zero), malformed, or larger than fsm.MaxDemandMilliPermitsPerSec.
func decimalMilli(s string) (milli int64, ok bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e := strings.TrimPrefix(s[i+1:], "+")
		eneg := strings.HasPrefix(e, "-")
		e = strings.TrimPrefix(e, "-")
		if e == "" || strings.Trim(e, "0123456789") != "" {
			return 0, false
		}
		e = strings.TrimLeft(e, "0")
		// Clamp absurd exponents: the mantissa has fewer than 2^20 digits
		// (bodies are at most 1 MiB), so from 10^8 on the value is out of
		// range, or below a thousandth, whatever the exponent.
		if len(e) > 8 {
			e = "100000000"
		}
		exp, _ = strconv.Atoi("0" + e)
		if eneg {
			exp = -exp
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return 0, true // zero, "-0" included
	}
	if neg {
		return 0, false
	}
	// The value is digits × 10^shift thousandths.
	shift := exp + 3 - len(frac)
	var whole, rest string
	switch {
	case shift >= 0:
		if len(digits)+shift > maxMilliDigits {
			return 0, false
		}
		whole = digits + strings.Repeat("0", shift)
	case len(digits)+shift <= 0:
		whole, rest = "0", digits
	default:
		whole, rest = digits[:len(digits)+shift], digits[len(digits)+shift:]
		if len(whole) > maxMilliDigits {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, false
	}
	if strings.Trim(rest, "0") != "" {
		v++
	}
	if v > fsm.MaxDemandMilliPermitsPerSec {
		return 0, false
	}
	return v, true
}

// parseDemand validates a demand_per_sec field.
func parseDemand(d jsonDecimal, fields fieldHelp) (int64, *httpError) {
	if !d.set {
		return 0, badRequest(`field "demand_per_sec" is required; allowed: %s`, fields.help("demand_per_sec"))
	}
	milli, ok := decimalMilli(d.lit)
	if !ok {
		return 0, badRequest(`field "demand_per_sec": %s; allowed: %s`, strconvQuote(d.lit), fields.help("demand_per_sec"))
	}
	return milli, nil
}

// parseTTL validates a ttl field.
func parseTTL(v opt[string]) (int64, *httpError) {
	if !v.set {
		return 0, badRequest(`field "ttl" is required; allowed: %s`, helpTTL)
	}
	d, herr := parseDuration("ttl", v.v, false)
	if herr != nil {
		return 0, herr
	}
	if int64(d) < fsm.MinLeaseTTLNanos || int64(d) > fsm.MaxLeaseTTLNanos {
		return 0, badRequest(`field "ttl": %s; allowed: %s`, strconvQuote(v.v), helpTTL)
	}
	return int64(d), nil
}

// parseCount validates a non-negative permit count (0 when absent).
func parseCount(field string, v opt[int64], fields fieldHelp) (int64, *httpError) {
	if v.set && v.v < 0 {
		return 0, badRequest(`field %q: %d; allowed: %s`, field, v.v, fields.help(field))
	}
	return v.v, nil
}

// parseRequestIDField validates an optional request_id field.
func parseRequestIDField(v opt[string]) (string, *httpError) {
	if !v.set {
		return "", nil
	}
	if err := validateRequestID(v.v); err != nil {
		return "", badRequest(`field "request_id": %v`, err)
	}
	return v.v, nil
}

// parseLeaseID validates the {id} of a lease path: a decimal integer
// 1..2^64-1 without sign or leading zeros.
func parseLeaseID(s string) (uint64, *httpError) {
	const allowed = "a lease id: a decimal integer from 1 to 18446744073709551615 without sign or leading zeros"
	if s == "" || len(s) > 20 || s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return 0, badRequest("lease id %s in the path; allowed: %s", strconvQuote(s), allowed)
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, badRequest("lease id %s in the path; allowed: %s", strconvQuote(s), allowed)
	}
	return id, nil
}

// parseReport validates the fields common to renew and return.
func parseReport(epoch opt[uint64], spent, out, in opt[int64], fields fieldHelp) (e uint64, s, o, i int64, herr *httpError) {
	if !epoch.set || epoch.v < 1 {
		if !epoch.set {
			return 0, 0, 0, 0, badRequest(`field "epoch" is required; allowed: %s`, fields.help("epoch"))
		}
		return 0, 0, 0, 0, badRequest(`field "epoch": %d; allowed: %s`, epoch.v, fields.help("epoch"))
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
	return epoch.v, s, o, i, nil
}

// readObject reads r's body and decodes it as one JSON object into v.
func readObject(w http.ResponseWriter, r *http.Request, v any, fields fieldHelp) *httpError {
	buf := getBuf()
	defer putBuf(buf)
	if herr := readBody(w, r, buf); herr != nil {
		return herr
	}
	return decodeObject(buf.Bytes(), v, fields, false)
}

// parseLeaseRequest validates a lease body into q (whose Limit is set).
func parseLeaseRequest(req *leaseRequest, q *fsm.Lease) *httpError {
	for _, f := range []struct {
		name string
		v    opt[string]
		dst  *string
	}{{"holder", req.Holder, &q.Holder}, {"group", req.Group, &q.Group}} {
		if !f.v.set {
			return badRequest("field %q is required; allowed: %s", f.name, leaseFields.help(f.name))
		}
		if err := validateName(f.name+" name", f.v.v); err != nil {
			return badRequest("field %q: %v", f.name, err)
		}
		*f.dst = f.v.v
	}
	q.Weight = 1
	if req.Weight.set {
		if req.Weight.v < 1 || req.Weight.v > fsm.MaxLeaseWeight {
			return badRequest(`field "weight": %d; allowed: %s`, req.Weight.v, leaseFields.help("weight"))
		}
		q.Weight = req.Weight.v
	}
	var herr *httpError
	if q.DemandMilliPermitsPerSec, herr = parseDemand(req.DemandPerSec, leaseFields); herr != nil {
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
	if err := validateName("limit name", name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req leasePolicyRequest
	if herr := readObject(w, r, &req, leasePolicyFields); herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	if !req.Leased.set {
		writeError(w, http.StatusBadRequest, `field "leased" is required; allowed: `+leasePolicyFields.help("leased"))
		return
	}
	p := fsm.LeasePolicy{Limit: name, Leased: req.Leased.v}
	for _, f := range []struct {
		name string
		v    opt[int64]
		dst  *int64
	}{{"burst_permits", req.BurstPermits, &p.BurstPermits}, {"max_outstanding_permits", req.MaxOutstandingPermits, &p.MaxOutstandingPermits}} {
		if !f.v.set {
			continue
		}
		if f.v.v < 0 || f.v.v > fsm.MaxLeasePoolPermits || (f.v.v != 0 && !p.Leased) {
			writeError(w, http.StatusBadRequest, "field "+strconv.Quote(f.name)+": "+strconv.FormatInt(f.v.v, 10)+
				" with leased "+strconv.FormatBool(p.Leased)+"; allowed: "+leasePolicyFields.help(f.name))
			return
		}
		*f.dst = f.v.v
	}
	if err := p.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
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
		writeError(w, http.StatusNotFound, "limit "+strconvQuote(name)+" not found")
		return
	case !res.Applied:
		writeError(w, http.StatusBadRequest, "lease policy of limit "+strconvQuote(name)+" not applied: "+res.Detail)
		return
	}
	writeJSON(w, http.StatusOK, leasePolicyView{Name: name, Leased: p.Leased, BurstPermits: res.BurstPermits,
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
	h.leaseCommand(w, r, "lease", name, func() *httpError {
		if err := validateName("limit name", name); err != nil {
			return badRequest("%v", err)
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
	h.leaseCommand(w, r, "renew", name, func() *httpError {
		var req renewRequest
		herr := h.leasePath(name, idText, &q.LeaseID)
		if herr == nil {
			herr = readObject(w, r, &req, reportFields)
		}
		if herr == nil {
			q.Epoch, q.SpentPermits, q.StolenOutPermits, q.StolenInPermits, herr = parseReport(req.Epoch, req.Spent, req.StolenOut, req.StolenIn, reportFields)
		}
		if herr == nil {
			q.DemandMilliPermitsPerSec, herr = parseDemand(req.DemandPerSec, reportFields)
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
	h.leaseCommand(w, r, "return", name, func() *httpError {
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
func (h *handler) leaseCommand(w http.ResponseWriter, r *http.Request, op, name string, parse func() *httpError, send func(context.Context) (fsm.LeaseResult, error)) {
	if herr := parse(); herr != nil {
		h.metrics.countLease(leaseInvalid)
		writeError(w, herr.code, herr.msg)
		return
	}
	ctx, cancel := h.context(r)
	res, err := send(ctx)
	cancel()
	h.leaseAnswer(w, op, name, res, err)
}

// validated turns a command's Validate error into a 400.
func validated(err error) *httpError {
	if err != nil {
		return badRequest("%v", err)
	}
	return nil
}

// leasePath validates the limit name and lease id of a lease path.
func (h *handler) leasePath(name, idText string, id *uint64) *httpError {
	if err := validateName("limit name", name); err != nil {
		return badRequest("%v", err)
	}
	var herr *httpError
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
	Permits          int64     `json:"permits"`
	ExpiresInNanos   int64     `json:"expires_in_ns"`
	SharePerSec      jsonFloat `json:"share_per_sec"`
	ShareMilliPerSec int64     `json:"share_milli_per_sec"`
	CreditedPermits  int64     `json:"credited_permits"`
	RetryAfterNanos  int64     `json:"retry_after_ns,omitempty"`
	Duplicate        bool      `json:"duplicate"`
	Error            string    `json:"error,omitempty"`
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
		ExpiresInNanos: res.ExpiresInNanos, SharePerSec: milliToPerSec(res.ShareMilliPermitsPerSec),
		ShareMilliPerSec: res.ShareMilliPermitsPerSec, CreditedPermits: res.CreditedPermits, Duplicate: res.Duplicate}
	detail := func(fallback string) string {
		if res.Detail != "" {
			return op + " on limit " + strconv.Quote(name) + ": " + res.Detail
		}
		return op + " on limit " + strconv.Quote(name) + ": " + fallback
	}
	switch res.Status {
	case fsm.LeaseGranted:
		m.countLease(leaseGranted)
		writeJSON(w, http.StatusOK, v)
	case fsm.LeaseReturned:
		m.countLease(leaseReturned)
		writeJSON(w, http.StatusOK, v)
	case fsm.LeaseRefused:
		m.countLease(leaseRefused)
		v.RetryAfterNanos = res.RetryAfterNanos
		v.Error = detail("refused; retry after " + time.Duration(res.RetryAfterNanos).String())
		w.Header()["Retry-After"] = []string{strconv.FormatInt(retryAfterSeconds(res.RetryAfterNanos), 10)}
		writeJSON(w, http.StatusTooManyRequests, v)
	case fsm.LeaseFenced:
		m.countLease(leaseFenced)
		v.Error = detail("the lease is not live at that epoch: stop using that grant")
		writeJSON(w, http.StatusConflict, v)
	case fsm.LeaseUnknownLimit:
		m.countLease(leaseUnknown)
		writeError(w, http.StatusNotFound, "limit "+strconv.Quote(name)+" not found")
	case fsm.LeaseInvalid:
		m.countLease(leaseInvalid)
		writeError(w, http.StatusBadRequest, detail("invalid"))
	default:
		m.countLease(leaseError)
		h.log.Error("store returned an unknown lease status", "status", res.Status, "limit", name, "op", op)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, op+": unexpected result status "+strconv.Itoa(int(res.Status)))
	}
}

// milliToPerSec turns thousandths of a permit per second into permits per
// second. Every value up to fsm.MaxDemandMilliPermitsPerSec has at most 13
// significant digits, so the JSON text is the exact decimal.
func milliToPerSec(milli int64) jsonFloat { return jsonFloat(float64(milli) / 1000) }

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
	LeaseID           uint64    `json:"lease_id"`
	Epoch             uint64    `json:"epoch"`
	Active            bool      `json:"active"`
	Holder            string    `json:"holder"`
	Group             string    `json:"group"`
	Weight            int64     `json:"weight"`
	DemandPerSec      jsonFloat `json:"demand_per_sec"`
	DemandMilliPerSec int64     `json:"demand_milli_per_sec"`
	SharePerSec       jsonFloat `json:"share_per_sec"`
	ShareMilliPerSec  int64     `json:"share_milli_per_sec"`
	Permits           int64     `json:"permits"`
	LingeringPermits  int64     `json:"lingering_permits"`
	GrantedAtNanos    int64     `json:"granted_at_cluster_ns"`
	ExpiresAtNanos    int64     `json:"expires_at_cluster_ns"`
	StolenInPermits   int64     `json:"stolen_in_permits"`
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
			Weight: l.Weight, DemandPerSec: milliToPerSec(l.DemandMilliPermitsPerSec), DemandMilliPerSec: l.DemandMilliPermitsPerSec,
			SharePerSec: milliToPerSec(l.ShareMilliPermitsPerSec), ShareMilliPerSec: l.ShareMilliPermitsPerSec,
			Permits: l.Permits, LingeringPermits: l.LingeringPermits, GrantedAtNanos: l.GrantedAtNanos,
			ExpiresAtNanos: l.ExpiresAtNanos, StolenInPermits: l.StolenInPermits}
	}
	return v
}

func (h *handler) getLeases(w http.ResponseWriter, r *http.Request, name string) {
	if err := validateName("limit name", name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	pool, leases, err := h.store.LeaseView(ctx, name)
	if err != nil {
		h.storeError(w, "list leases", err)
		return
	}
	writeJSON(w, http.StatusOK, newLeasePoolView(name, pool, leases))
}
