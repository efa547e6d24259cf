package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/api"
)

// limitRequest is the body of PUT /v1/limits/{name}. Every field records
// its presence so that options of another algorithm are rejected even when
// they are zero.
type limitRequest struct {
	Algorithm       api.Opt[string]  `json:"algorithm"`
	Rate            api.Opt[float64] `json:"rate"`
	Per             api.Opt[string]  `json:"per"`
	MaxReserved     api.Opt[int64]   `json:"max_reserved"`
	Expiry          api.Opt[string]  `json:"expiry"`
	MaxBurstSeconds api.Opt[float64] `json:"max_burst_seconds"`
	Warmup          api.Opt[string]  `json:"warmup"`
	ColdFactor      api.Opt[float64] `json:"cold_factor"`
	BurstRatio      api.Opt[float64] `json:"burst_ratio"`
	Strictness      api.Opt[float64] `json:"strictness"`
	MaxInFlight     api.Opt[int64]   `json:"max_in_flight"`
	TTL             api.Opt[string]  `json:"ttl"`
	Shadow          api.Opt[bool]    `json:"shadow"`
}

var limitFields = api.Fields{
	{"algorithm", `one of "strict", "bursty", "warmup", "hybrid", "concurrency"`},
	{"rate", "a number > 0: permits per \"per\" (every algorithm but concurrency)"},
	{"per", `a Go duration string > 0 such as "1s" or "6s" (default "1s")`},
	{"max_reserved", "(strict) an integer >= 0: permits that may be reserved ahead"},
	{"expiry", `(strict) a Go duration string >= 0 such as "500ms"`},
	{"max_burst_seconds", "(bursty) a number >= 0"},
	{"warmup", `(warmup) a Go duration string > 0 such as "10s"`},
	{"cold_factor", "(warmup) a number >= 1 (0 for the default)"},
	{"burst_ratio", "(hybrid) a number >= 1 (0 for the default)"},
	{"strictness", "(hybrid) a number (0 for the default)"},
	{"max_in_flight", "(concurrency) an integer from 1 to 1048576: permits held at once"},
	{"ttl", `(concurrency) a Go duration string from "1ns" to "24h": how long a permit is held unless released (default "1m")`},
	{"shadow", "true or false (default false): decide and count every reserve but grant it at once"},
}

// algorithmOptions lists the option keys each algorithm accepts.
var algorithmOptions = map[bucket.Algorithm][]string{
	bucket.Strict:      {"max_reserved", "expiry"},
	bucket.Bursty:      {"max_burst_seconds"},
	bucket.WarmingUp:   {"warmup", "cold_factor"},
	bucket.Hybrid:      {"burst_ratio", "strictness"},
	bucket.Concurrency: {"max_in_flight", "ttl"},
}

// concurrencySpec fills a concurrency limit's spec: no rate, a cap and a
// hold TTL.
func (req *limitRequest) concurrencySpec(s bucket.Spec) (bucket.Spec, *api.Error) {
	if req.Rate.Set || req.Per.Set {
		return s, api.BadRequest(`a concurrency limit has no "rate" or "per"; allowed: %s and %s`,
			limitFields.Help("max_in_flight"), limitFields.Help("ttl"))
	}
	if !req.MaxInFlight.Set {
		return s, api.BadRequest(`field "max_in_flight" is required for a concurrency limit; allowed: %s`, limitFields.Help("max_in_flight"))
	}
	s.MaxInFlight = req.MaxInFlight.V
	if req.TTL.Set {
		d, herr := api.ParseDuration("ttl", req.TTL.V, false)
		if herr != nil {
			return s, herr
		}
		s.HoldTTL = d
	}
	return s, nil
}

// spec validates req and turns it into a bucket.Spec (not yet compiled).
func (req *limitRequest) spec() (bucket.Spec, *api.Error) {
	var s bucket.Spec
	if !req.Algorithm.Set {
		return s, api.BadRequest(`field "algorithm" is required; allowed: %s`, limitFields.Help("algorithm"))
	}
	alg, err := bucket.ParseAlgorithm(req.Algorithm.V)
	if err != nil {
		return s, api.BadRequest("field %q: %s", "algorithm", node.Message(err))
	}
	s.Algorithm = alg

	present := map[string]bool{
		"max_reserved":      req.MaxReserved.Set,
		"expiry":            req.Expiry.Set,
		"max_burst_seconds": req.MaxBurstSeconds.Set,
		"warmup":            req.Warmup.Set,
		"cold_factor":       req.ColdFactor.Set,
		"burst_ratio":       req.BurstRatio.Set,
		"strictness":        req.Strictness.Set,
		"max_in_flight":     req.MaxInFlight.Set,
		"ttl":               req.TTL.Set,
	}
	for _, other := range []bucket.Algorithm{bucket.Strict, bucket.Bursty, bucket.WarmingUp, bucket.Hybrid, bucket.Concurrency} {
		if other == alg {
			continue
		}
		for _, key := range algorithmOptions[other] {
			if present[key] {
				return s, api.BadRequest("option %q belongs to algorithm %q, not %q; allowed for %q: %s",
					key, other.String(), alg.String(), alg.String(), quoteList(algorithmOptions[alg]))
			}
		}
	}

	if alg == bucket.Concurrency {
		return req.concurrencySpec(s)
	}
	if !req.Rate.Set {
		return s, api.BadRequest(`field "rate" is required; allowed: %s`, limitFields.Help("rate"))
	}
	if !(req.Rate.V > 0) { // JSON cannot carry NaN or infinities.
		return s, api.BadRequest(`field "rate": %v; allowed: %s`, req.Rate.V, limitFields.Help("rate"))
	}
	s.Rate = req.Rate.V

	s.Per = time.Second
	if req.Per.Set {
		d, herr := api.ParseDuration("per", req.Per.V, false)
		if herr != nil {
			return s, herr
		}
		s.Per = d
	}

	var herr *api.Error
	switch alg {
	case bucket.Strict:
		if req.MaxReserved.Set {
			if req.MaxReserved.V < 0 {
				return s, api.BadRequest(`field "max_reserved": %d; allowed: %s`, req.MaxReserved.V, limitFields.Help("max_reserved"))
			}
			s.MaxReserved = req.MaxReserved.V
		}
		if req.Expiry.Set {
			if s.Expiry, herr = api.ParseDuration("expiry", req.Expiry.V, true); herr != nil {
				return s, herr
			}
		}
	case bucket.Bursty:
		if req.MaxBurstSeconds.Set {
			if !(req.MaxBurstSeconds.V >= 0) {
				return s, api.BadRequest(`field "max_burst_seconds": %v; allowed: %s`, req.MaxBurstSeconds.V, limitFields.Help("max_burst_seconds"))
			}
			s.MaxBurstSeconds = req.MaxBurstSeconds.V
		}
	case bucket.WarmingUp:
		if req.Warmup.Set {
			if s.Warmup, herr = api.ParseDuration("warmup", req.Warmup.V, false); herr != nil {
				return s, herr
			}
		}
		if req.ColdFactor.Set {
			if !(req.ColdFactor.V >= 0) {
				return s, api.BadRequest(`field "cold_factor": %v; allowed: %s`, req.ColdFactor.V, limitFields.Help("cold_factor"))
			}
			s.ColdFactor = req.ColdFactor.V
		}
	case bucket.Hybrid:
		if req.BurstRatio.Set {
			if !(req.BurstRatio.V >= 0) {
				return s, api.BadRequest(`field "burst_ratio": %v; allowed: %s`, req.BurstRatio.V, limitFields.Help("burst_ratio"))
			}
			s.BurstRatio = req.BurstRatio.V
		}
		if req.Strictness.Set {
			s.Strictness = req.Strictness.V
		}
	}
	return s, nil
}

func quoteList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// newLimitView is limit name's configuration c (of that version) as the
// API shows it: only the options of its algorithm are present.
func newLimitView(name string, c bucket.Config, version uint64, shadow bool) api.LimitConfig {
	s := c.Spec
	per := s.Per
	if per == 0 {
		per = time.Second
	}
	f := func(x float64) *api.Float { j := api.Float(x); return &j }
	d := func(x time.Duration) *string { str := x.String(); return &str }
	v := api.LimitConfig{
		Name:          name,
		LimitSpec:     api.LimitSpec{Algorithm: s.Algorithm.String(), Rate: f(s.Rate), Per: per.String(), Shadow: shadow},
		Version:       version,
		IntervalNanos: c.IntervalNanos,
	}
	switch s.Algorithm {
	case bucket.Strict:
		v.MaxReserved = &s.MaxReserved
		v.Expiry = d(s.Expiry)
	case bucket.Bursty:
		v.MaxBurstSeconds = f(s.MaxBurstSeconds)
	case bucket.WarmingUp:
		v.Warmup = d(s.Warmup)
		v.ColdFactor = f(s.ColdFactor)
	case bucket.Hybrid:
		v.BurstRatio = f(s.BurstRatio)
		v.Strictness = f(s.Strictness)
	case bucket.Concurrency:
		v.MaxInFlight = &s.MaxInFlight
		v.TTL = d(s.HoldTTL)
		v.Per = ""
	}
	return v
}

// newLimitInfoView is a limit as GET /v1/limits/{name} answers it.
func newLimitInfoView(li fsm.LimitInfo) api.Limit {
	v := api.Limit{
		LimitConfig: newLimitView(li.Name, li.Config, li.Version, li.Shadow),
		LimitCounters: api.LimitCounters{
			GrantedRequests:   li.GrantedRequests,
			GrantedPermits:    li.GrantedPermits,
			RefusedRequests:   li.RefusedRequests,
			ExpiredRequests:   li.ExpiredRequests,
			ExpiredPermits:    li.ExpiredPermits,
			RefundedPermits:   li.RefundedPermits,
			ChargedPermits:    li.ChargedPermits,
			NetPermits:        li.NetPermits,
			ShadowGranted:     li.ShadowGranted,
			ShadowWouldRefuse: li.ShadowWouldRefuse,
			ShadowWouldWait:   li.ShadowWouldWait,
		},
		InFlightPermits:  li.InFlightPermits,
		OpenReservations: li.OpenReservations,
		Leased:           li.Leased,
	}
	if li.Leased {
		l := li.Lease
		v.LeasePolicy = &api.LimitLeasePolicy{BurstPermits: l.BurstPermits, MaxOutstandingPermits: l.MaxOutstandingPermits,
			BurstSpec: l.BurstSpec, MaxOutstandingSpec: l.MaxOutstandingSpec, Leases: l.Leases}
	}
	return v
}

func (h *handler) putLimit(w http.ResponseWriter, r *http.Request, name string) {
	if err := api.ValidateName("limit name", name); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req limitRequest
	if herr := readObject(w, r, &req, limitFields); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	spec, herr := req.spec()
	if herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	cfg, err := bucket.Compile(spec)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, "limit "+api.Quote(name)+": "+node.Message(err))
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	shadow := req.Shadow.Set && req.Shadow.V
	res, err := h.store.PutLimit(ctx, fsm.PutLimit{Name: name, Config: cfg, Shadow: shadow})
	if err != nil {
		h.storeError(w, "put limit", err)
		return
	}
	if res.Detail != "" {
		api.WriteError(w, http.StatusBadRequest, "limit "+api.Quote(name)+": configuration not applied: "+res.Detail+
			"; the limit keeps its configuration of version "+strconv.FormatUint(res.Version, 10))
		return
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	api.WriteJSON(w, code, api.LimitPut{LimitConfig: newLimitView(name, cfg, res.Version, shadow), Created: res.Created})
}

func (h *handler) getLimit(w http.ResponseWriter, r *http.Request, name string) {
	if err := api.ValidateName("limit name", name); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	li, err := h.store.Limit(ctx, name)
	if err != nil {
		h.storeError(w, "get limit", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, newLimitInfoView(li))
}

func (h *handler) listLimits(w http.ResponseWriter, r *http.Request) {
	q, paged, herr := limitsQuery(r)
	if herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	if !paged {
		h.writeLimits(w, r, nil)
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	page, more, err := h.store.LimitsPage(ctx, q)
	if err != nil {
		h.storeError(w, "list limits", err)
		return
	}
	views := api.Limits{Limits: make([]api.Limit, 0, len(page))}
	for _, li := range page {
		views.Limits = append(views.Limits, newLimitInfoView(li))
	}
	if more && len(page) > 0 {
		views.NextAfter = page[len(page)-1].Name
	}
	api.WriteJSON(w, http.StatusOK, views)
}

// limitsQuery reads the query of GET /v1/limits: prefix, after and limit
// (1 to fsm.MaxLimitsPage, api.DefaultLimitsPage if absent), each at most
// once; paged is false when none is given (every limit is answered).
func limitsQuery(r *http.Request) (q fsm.LimitsQuery, paged bool, herr *api.Error) {
	const allowed = "allowed: prefix=P (names starting with P), after=NAME (names sorting after NAME), limit=N (1-%d, default %d)"
	vals := r.URL.Query()
	for k, v := range vals {
		if k != "prefix" && k != "after" && k != "limit" {
			return q, false, api.BadRequest("query parameter %s; "+allowed, api.Quote(k), fsm.MaxLimitsPage, api.DefaultLimitsPage)
		}
		if len(v) > 1 {
			return q, false, api.BadRequest("query parameter %s given %d times; "+allowed, k, len(v), fsm.MaxLimitsPage, api.DefaultLimitsPage)
		}
	}
	if len(vals) == 0 {
		return q, false, nil
	}
	q = fsm.LimitsQuery{Prefix: vals.Get("prefix"), After: vals.Get("after"), Size: api.DefaultLimitsPage}
	if s, ok := vals["limit"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > fsm.MaxLimitsPage {
			return q, false, api.BadRequest("query parameter limit=%s; allowed: an integer 1-%d", api.Quote(s[0]), fsm.MaxLimitsPage)
		}
		q.Size = n
	}
	if err := q.Validate(); err != nil {
		return q, false, api.BadRequest("%s", strings.TrimPrefix(err.Error(), fsm.ErrInvalidCommand.Error()+": "))
	}
	return q, true, nil
}

// MaxUnpagedLimits is the most limits an unpaged list (GET /v1/limits
// without a query) answers: a register that holds more (templated keys)
// is listed page by page, and the unpaged list is a 400 saying so.
const MaxUnpagedLimits = fsm.MaxLimitsPage

// writeLimits answers the limits keep keeps (nil: every limit), read
// through the leader, sorted by name; a 400 naming the paged list if the
// register holds more than MaxUnpagedLimits limits (the whole list of a
// million would take a second and hundreds of megabytes to build).
func (h *handler) writeLimits(w http.ResponseWriter, r *http.Request, keep func(name string) bool) {
	ctx, cancel := h.context(r)
	defer cancel()
	all, more, err := h.store.LimitsPage(ctx, fsm.LimitsQuery{Size: MaxUnpagedLimits})
	if err != nil {
		h.storeError(w, "list limits", err)
		return
	}
	if more {
		api.WriteError(w, http.StatusBadRequest, fmt.Sprintf(
			"the register holds more than %d limits: list them page by page, GET /v1/limits?limit=N (1-%d) and then ?after=NEXT_AFTER with the next_after of each answer until it is absent; ?prefix=P lists a template's keys (Go ListLimitsPage, Python iter_limits; the Go ListLimits and Python list_limits page by themselves)",
			MaxUnpagedLimits, fsm.MaxLimitsPage))
		return
	}
	views := api.Limits{Limits: make([]api.Limit, 0, len(all))}
	for _, li := range all {
		if keep == nil || keep(li.Name) {
			views.Limits = append(views.Limits, newLimitInfoView(li))
		}
	}
	api.WriteJSON(w, http.StatusOK, views)
}

func (h *handler) deleteLimit(w http.ResponseWriter, r *http.Request, name string) {
	if err := api.ValidateName("limit name", name); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if herr := h.emptyBody(w, r); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	force, herr := forceParam(r)
	if herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	res, err := h.store.DeleteLimit(ctx, name, force)
	if err != nil {
		h.storeError(w, "delete limit", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, struct {
		Name    string `json:"name"`
		Existed bool   `json:"existed"`
	}{name, res.Existed})
}

// forceParam reads the query of DELETE /v1/limits/{name}: at most
// force=true|false.
func forceParam(r *http.Request) (bool, *api.Error) {
	q := r.URL.Query()
	for k := range q {
		if k != "force" {
			return false, api.BadRequest("query parameter %q; allowed: force=true (delete a leased limit whose leases still hold permits)", k)
		}
	}
	switch v := q.Get("force"); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, api.BadRequest("query parameter force=%s; allowed: true or false", api.Quote(v))
	}
}

// emptyBody rejects a body on a request that takes none (whitespace and
// an empty object are tolerated).
func (h *handler) emptyBody(w http.ResponseWriter, r *http.Request) *api.Error {
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	if herr := api.ReadBody(w, r, buf); herr != nil {
		return herr
	}
	var none struct{}
	return api.DecodeObject(buf.Bytes(), &none, nil, true)
}
