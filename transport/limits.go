package transport

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
)

// limitRequest is the body of PUT /v1/limits/{name}. Every field records
// its presence so that options of another algorithm are rejected even when
// they are zero.
type limitRequest struct {
	Algorithm       opt[string]  `json:"algorithm"`
	Rate            opt[float64] `json:"rate"`
	Per             opt[string]  `json:"per"`
	MaxReserved     opt[int64]   `json:"max_reserved"`
	Expiry          opt[string]  `json:"expiry"`
	MaxBurstSeconds opt[float64] `json:"max_burst_seconds"`
	Warmup          opt[string]  `json:"warmup"`
	ColdFactor      opt[float64] `json:"cold_factor"`
	BurstRatio      opt[float64] `json:"burst_ratio"`
	Strictness      opt[float64] `json:"strictness"`
}

var limitFields = fieldHelp{
	{"algorithm", `one of "strict", "bursty", "warmup", "hybrid"`},
	{"rate", "a number > 0: permits per \"per\""},
	{"per", `a Go duration string > 0 such as "1s" or "6s" (default "1s")`},
	{"max_reserved", "(strict) an integer >= 0: permits that may be reserved ahead"},
	{"expiry", `(strict) a Go duration string >= 0 such as "500ms"`},
	{"max_burst_seconds", "(bursty) a number >= 0"},
	{"warmup", `(warmup) a Go duration string > 0 such as "10s"`},
	{"cold_factor", "(warmup) a number >= 1 (0 for the default)"},
	{"burst_ratio", "(hybrid) a number >= 1 (0 for the default)"},
	{"strictness", "(hybrid) a number (0 for the default)"},
}

// algorithmOptions lists the option keys each algorithm accepts.
var algorithmOptions = map[bucket.Algorithm][]string{
	bucket.Strict:    {"max_reserved", "expiry"},
	bucket.Bursty:    {"max_burst_seconds"},
	bucket.WarmingUp: {"warmup", "cold_factor"},
	bucket.Hybrid:    {"burst_ratio", "strictness"},
}

// spec validates req and turns it into a bucket.Spec (not yet compiled).
func (req *limitRequest) spec() (bucket.Spec, *httpError) {
	var s bucket.Spec
	if !req.Algorithm.set {
		return s, badRequest(`field "algorithm" is required; allowed: %s`, limitFields.help("algorithm"))
	}
	alg, err := bucket.ParseAlgorithm(req.Algorithm.v)
	if err != nil {
		return s, badRequest("field %q: %s", "algorithm", node.Message(err))
	}
	s.Algorithm = alg

	present := map[string]bool{
		"max_reserved":      req.MaxReserved.set,
		"expiry":            req.Expiry.set,
		"max_burst_seconds": req.MaxBurstSeconds.set,
		"warmup":            req.Warmup.set,
		"cold_factor":       req.ColdFactor.set,
		"burst_ratio":       req.BurstRatio.set,
		"strictness":        req.Strictness.set,
	}
	for _, other := range []bucket.Algorithm{bucket.Strict, bucket.Bursty, bucket.WarmingUp, bucket.Hybrid} {
		if other == alg {
			continue
		}
		for _, key := range algorithmOptions[other] {
			if present[key] {
				return s, badRequest("option %q belongs to algorithm %q, not %q; allowed for %q: %s",
					key, other.String(), alg.String(), alg.String(), quoteList(algorithmOptions[alg]))
			}
		}
	}

	if !req.Rate.set {
		return s, badRequest(`field "rate" is required; allowed: %s`, limitFields.help("rate"))
	}
	if !(req.Rate.v > 0) { // JSON cannot carry NaN or infinities.
		return s, badRequest(`field "rate": %v; allowed: %s`, req.Rate.v, limitFields.help("rate"))
	}
	s.Rate = req.Rate.v

	s.Per = time.Second
	if req.Per.set {
		d, herr := parseDuration("per", req.Per.v, false)
		if herr != nil {
			return s, herr
		}
		s.Per = d
	}

	var herr *httpError
	switch alg {
	case bucket.Strict:
		if req.MaxReserved.set {
			if req.MaxReserved.v < 0 {
				return s, badRequest(`field "max_reserved": %d; allowed: %s`, req.MaxReserved.v, limitFields.help("max_reserved"))
			}
			s.MaxReserved = req.MaxReserved.v
		}
		if req.Expiry.set {
			if s.Expiry, herr = parseDuration("expiry", req.Expiry.v, true); herr != nil {
				return s, herr
			}
		}
	case bucket.Bursty:
		if req.MaxBurstSeconds.set {
			if !(req.MaxBurstSeconds.v >= 0) {
				return s, badRequest(`field "max_burst_seconds": %v; allowed: %s`, req.MaxBurstSeconds.v, limitFields.help("max_burst_seconds"))
			}
			s.MaxBurstSeconds = req.MaxBurstSeconds.v
		}
	case bucket.WarmingUp:
		if req.Warmup.set {
			if s.Warmup, herr = parseDuration("warmup", req.Warmup.v, false); herr != nil {
				return s, herr
			}
		}
		if req.ColdFactor.set {
			if !(req.ColdFactor.v >= 0) {
				return s, badRequest(`field "cold_factor": %v; allowed: %s`, req.ColdFactor.v, limitFields.help("cold_factor"))
			}
			s.ColdFactor = req.ColdFactor.v
		}
	case bucket.Hybrid:
		if req.BurstRatio.set {
			if !(req.BurstRatio.v >= 0) {
				return s, badRequest(`field "burst_ratio": %v; allowed: %s`, req.BurstRatio.v, limitFields.help("burst_ratio"))
			}
			s.BurstRatio = req.BurstRatio.v
		}
		if req.Strictness.set {
			s.Strictness = req.Strictness.v
		}
	}
	return s, nil
}

// parseDuration parses a Go duration string for field; zeroOK allows 0.
func parseDuration(field, v string, zeroOK bool) (time.Duration, *httpError) {
	want := "> 0"
	if zeroOK {
		want = ">= 0"
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, badRequest(`field %q: %s is not a duration; allowed: a Go duration string %s such as "250ms", "1s" or "1m30s"`, field, strconvQuote(v), want)
	}
	if d < 0 || (d == 0 && !zeroOK) {
		return 0, badRequest(`field %q: %s; allowed: a Go duration string %s`, field, strconvQuote(v), want)
	}
	return d, nil
}

func quoteList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// limitView is the JSON view of a limit's configuration. Only the options
// of the limit's algorithm are present.
type limitView struct {
	Name            string     `json:"name"`
	Algorithm       string     `json:"algorithm"`
	Rate            jsonFloat  `json:"rate"`
	Per             string     `json:"per"`
	Version         uint64     `json:"version"`
	MaxReserved     *int64     `json:"max_reserved,omitempty"`
	Expiry          *string    `json:"expiry,omitempty"`
	MaxBurstSeconds *jsonFloat `json:"max_burst_seconds,omitempty"`
	Warmup          *string    `json:"warmup,omitempty"`
	ColdFactor      *jsonFloat `json:"cold_factor,omitempty"`
	BurstRatio      *jsonFloat `json:"burst_ratio,omitempty"`
	Strictness      *jsonFloat `json:"strictness,omitempty"`
	IntervalNanos   int64      `json:"interval_ns"`
}

// limitCounters are a limit's counters since it was created.
type limitCounters struct {
	GrantedRequests uint64 `json:"granted_requests"`
	GrantedPermits  uint64 `json:"granted_permits"`
	RefusedRequests uint64 `json:"refused_requests"`
}

// limitInfoView is the answer to GET /v1/limits/{name}.
type limitInfoView struct {
	limitView
	limitCounters
	// Leased reports that the limit's permits are handed out by lease;
	// LeasePolicy is then its pool's policy.
	Leased      bool            `json:"leased"`
	LeasePolicy *limitLeaseView `json:"lease_policy,omitempty"`
}

// limitLeaseView is a leased limit's pool policy in a limit's view: the
// effective C and O, what the policy set (0: the default), and how many
// leases hold permits.
type limitLeaseView struct {
	BurstPermits          int64 `json:"burst_permits"`
	MaxOutstandingPermits int64 `json:"max_outstanding_permits"`
	BurstSpec             int64 `json:"burst_permits_set"`
	MaxOutstandingSpec    int64 `json:"max_outstanding_permits_set"`
	Leases                int   `json:"leases"`
}

// limitPutView is the answer to PUT /v1/limits/{name}.
type limitPutView struct {
	limitView
	Created bool `json:"created"`
}

func newLimitView(name string, c bucket.Config, version uint64) limitView {
	s := c.Spec
	per := s.Per
	if per == 0 {
		per = time.Second
	}
	v := limitView{
		Name:          name,
		Algorithm:     s.Algorithm.String(),
		Rate:          jsonFloat(s.Rate),
		Per:           per.String(),
		Version:       version,
		IntervalNanos: c.IntervalNanos,
	}
	f := func(x float64) *jsonFloat { j := jsonFloat(x); return &j }
	d := func(x time.Duration) *string { str := x.String(); return &str }
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
	}
	return v
}

func newLimitInfoView(li fsm.LimitInfo) limitInfoView {
	v := limitInfoView{
		limitView: newLimitView(li.Name, li.Config, li.Version),
		limitCounters: limitCounters{
			GrantedRequests: li.GrantedRequests,
			GrantedPermits:  li.GrantedPermits,
			RefusedRequests: li.RefusedRequests,
		},
		Leased: li.Leased,
	}
	if li.Leased {
		l := li.Lease
		v.LeasePolicy = &limitLeaseView{BurstPermits: l.BurstPermits, MaxOutstandingPermits: l.MaxOutstandingPermits,
			BurstSpec: l.BurstSpec, MaxOutstandingSpec: l.MaxOutstandingSpec, Leases: l.Leases}
	}
	return v
}

func (h *handler) putLimit(w http.ResponseWriter, r *http.Request, name string) {
	if err := validateName("limit name", name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	buf := getBuf()
	defer putBuf(buf)
	if herr := readBody(w, r, buf); herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	var req limitRequest
	if herr := decodeObject(buf.Bytes(), &req, limitFields, false); herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	spec, herr := req.spec()
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	cfg, err := bucket.Compile(spec)
	if err != nil {
		writeError(w, http.StatusBadRequest, "limit "+strconvQuote(name)+": "+node.Message(err))
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	res, err := h.store.PutLimit(ctx, name, cfg)
	if err != nil {
		h.storeError(w, "put limit", err)
		return
	}
	if res.Detail != "" {
		writeError(w, http.StatusBadRequest, "limit "+strconvQuote(name)+": configuration not applied: "+res.Detail+
			"; the limit keeps its configuration of version "+strconv.FormatUint(res.Version, 10))
		return
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	writeJSON(w, code, limitPutView{limitView: newLimitView(name, cfg, res.Version), Created: res.Created})
}

func (h *handler) getLimit(w http.ResponseWriter, r *http.Request, name string) {
	if err := validateName("limit name", name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	li, err := h.store.Limit(ctx, name)
	if err != nil {
		h.storeError(w, "get limit", err)
		return
	}
	writeJSON(w, http.StatusOK, newLimitInfoView(li))
}

func (h *handler) listLimits(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.context(r)
	defer cancel()
	all, err := h.store.Limits(ctx)
	if err != nil {
		h.storeError(w, "list limits", err)
		return
	}
	views := make([]limitInfoView, len(all))
	for i, li := range all {
		views[i] = newLimitInfoView(li)
	}
	writeJSON(w, http.StatusOK, struct {
		Limits []limitInfoView `json:"limits"`
	}{views})
}

func (h *handler) deleteLimit(w http.ResponseWriter, r *http.Request, name string) {
	if err := validateName("limit name", name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if herr := h.emptyBody(w, r); herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	force, herr := forceParam(r)
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	res, err := h.store.DeleteLimit(ctx, name, force)
	if err != nil {
		h.storeError(w, "delete limit", err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Name    string `json:"name"`
		Existed bool   `json:"existed"`
	}{name, res.Existed})
}

// forceParam reads the query of DELETE /v1/limits/{name}: at most
// force=true|false.
func forceParam(r *http.Request) (bool, *httpError) {
	q := r.URL.Query()
	for k := range q {
		if k != "force" {
			return false, badRequest("query parameter %q; allowed: force=true (delete a leased limit whose leases still hold permits)", k)
		}
	}
	switch v := q.Get("force"); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, badRequest("query parameter force=%s; allowed: true or false", strconvQuote(v))
	}
}

// emptyBody rejects a body on a request that takes none (whitespace and
// an empty object are tolerated).
func (h *handler) emptyBody(w http.ResponseWriter, r *http.Request) *httpError {
	buf := getBuf()
	defer putBuf(buf)
	if herr := readBody(w, r, buf); herr != nil {
		return herr
	}
	var none struct{}
	return decodeObject(buf.Bytes(), &none, nil, true)
}
