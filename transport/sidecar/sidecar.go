package sidecar

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/wire"
	"github.com/permitd/permitd/transport/worker"
)

// Worker is what the sidecar handler needs from a worker of a
// leased limit; *worker.Worker implements it.
type Worker interface {
	// TryAcquire spends n permits if it can within maxWait (pacing
	// included) and reports whether it did; it fails (errors wrapping
	// worker.ErrNoPermits, worker.ErrStopped, ...) when the worker cannot
	// serve at all. See worker.Worker.TryAcquire.
	TryAcquire(n int64, maxWait time.Duration) (bool, error)
	// Stats returns the worker's counters (Limit names the limit it
	// serves; it must not change).
	Stats() worker.Stats
	// Status returns the worker's state for GET /v1/status.
	Status() worker.Status
}

var _ Worker = (*worker.Worker)(nil)

// Options configure a sidecar handler.
type Options struct {
	// Logger receives the 503s (the worker failing closed). Nil: none.
	Logger hclog.Logger
	// RequestTimeout is the longest max_wait a reserve may ask (the
	// sidecar holds the request while it waits). Zero:
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Registry receives the sidecar's metrics, and its /metrics serves the
	// registry whole, so that a binary adds its own collectors (build,
	// runtime, process) to the same page. Nil: a private registry.
	Registry *prometheus.Registry
	// Tokens, if not nil, are required as on the register (auth.Require):
	// a reserve needs a client token that may use the limit, a session
	// any client token, status and metrics any token; health checks none.
	Tokens *auth.TokenStore
}

// DefaultRequestTimeout is the longest max_wait of a reserve by default.
const DefaultRequestTimeout = 10 * time.Second

// sessionIdle is the idle lifetime the sidecar answers for its one dummy
// session (the register's: ten minutes).
const sessionIdle = 10 * time.Minute

// NewHandler returns the HTTP handler of a worker sidecar: the
// register's reserve contract, answered locally by w for w's one limit.
//
//   - POST /v1/limits/{name}/reserve takes the register's body
//     ({"permits":N,"max_wait":"DURATION","request_id":ID} or a session
//     reference, all optional) and answers 200 {"granted":true,"wait_ns":0,
//     "spacing_ns":0,...} when the worker handed out the permits within
//     max_wait (it waited first when pacing needed it, so the permits are
//     usable at once: wait_ns is always 0; a leased limit's bound is
//     C + O + floor(W/I) + 1, not strict spacing, so the n permits of a
//     grant are usable together whatever the limit's algorithm),
//     429 {"granted":false,"retry_after_ns":W,"error":...} when it could
//     not within max_wait (W: see retryAfterNanos; never 0), also while
//     the worker waits for the register (a renewal in flight, an election
//     shorter than the worker's UnreachableAfter), 400 for a bad body or a
//     max_wait longer than opts.RequestTimeout (the sidecar holds the
//     request while it waits), 404 for another limit than the worker's,
//     and 503 when the worker fails closed (the register silent for
//     UnreachableAfter or refusing the lease, and no permit left) or is
//     stopped. request_id and sessions are validated but not
//     deduplicated: a resent request is a new reserve.
//   - POST /v1/sessions answers a session (always 1), so that clients of
//     the register, which open one, work against a sidecar unchanged.
//   - GET /v1/status answers the worker's group, holder, limit, lease,
//     share, stats and members.
//   - GET /healthz answers {"status":"ok"}.
//   - GET /metrics serves the worker's counters in the Prometheus text
//     format (see WorkerMetrics: per limit, group and worker, and the
//     over-grant headroom the worker holds) and its answers by outcome,
//     from opts.Registry (with whatever else was registered there) or a
//     private registry.
func NewHandler(w Worker, opts Options) http.Handler {
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	st := w.Stats()
	h := &sidecarHandler{w: w, log: opts.Logger, maxWait: opts.RequestTimeout, limit: st.Limit,
		metrics: NewWorkerMetrics(reg, w).Handler(), answers: newSidecarAnswers(reg, st)}
	if h.log == nil {
		h.log = hclog.NewNullLogger()
	}
	if h.maxWait <= 0 {
		h.maxWait = DefaultRequestTimeout
	}
	if opts.Tokens != nil {
		return auth.Require(h, opts.Tokens, Access)
	}
	return h
}

// Access is what a request to a sidecar needs of its token (see
// Options.Tokens), from its method and escaped path p, and the limit it
// names; other paths (test hooks mounted beside the sidecar included)
// need admin.
func Access(method, p string) (auth.Need, string) {
	switch {
	case p == "/healthz" || p == "/readyz":
		return auth.NeedNothing, ""
	case p == "/v1/status" || p == "/metrics":
		return auth.NeedAnyToken, ""
	case p == "/v1/sessions":
		return auth.NeedClientAnyLimit, ""
	case strings.HasPrefix(p, "/v1/limits/") && strings.HasSuffix(p, "/reserve"):
		return auth.NeedClient, strings.TrimSuffix(p[len("/v1/limits/"):], "/reserve")
	}
	return auth.NeedAdmin, ""
}

type sidecarHandler struct {
	w       Worker
	log     hclog.Logger
	maxWait time.Duration
	limit   string
	// metrics serves GET /metrics; answers counts the reserves served.
	metrics http.Handler
	answers *sidecarAnswers
}

// ServeHTTP implements http.Handler.
func (h *sidecarHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	switch {
	case strings.HasPrefix(p, "/v1/limits/") && strings.HasSuffix(p, "/reserve"):
		name := strings.TrimSuffix(p[len("/v1/limits/"):], "/reserve")
		if strings.IndexByte(name, '/') >= 0 {
			break
		}
		if sidecarMethod(w, r, "POST") {
			h.reserve(w, r, name)
		}
		return
	case p == "/v1/reserve" || strings.HasPrefix(p, "/v1/reservations/"):
		// A leased limit's permits are the worker's grant: they cannot be
		// reserved together with another limit's in one decision, and a
		// grant spent locally has nothing for the register to settle.
		api.WriteError(w, http.StatusNotImplemented, "this worker sidecar serves single-limit reserves of its leased limit "+
			strconv.Quote(h.limit)+" (POST /v1/limits/"+h.limit+"/reserve); multi-limit reserves, settlements and releases are "+
			"decided by the register, on limits that are not leased: send them to the register's nodes")
		return
	case p == "/v1/sessions":
		// The sidecar does not deduplicate (a resent request is a new
		// reserve, served from permits the worker counts as spent), but
		// accepts sessions so that a register client works unchanged.
		if sidecarMethod(w, r, "POST") {
			api.WriteRaw(w, http.StatusCreated, []byte(`{"session":1,"idle_ttl_ns":`+strconv.FormatInt(int64(sessionIdle), 10)+"}\n"))
		}
		return
	case p == "/v1/status":
		if sidecarMethod(w, r, "GET, HEAD") {
			api.WriteJSON(w, http.StatusOK, newSidecarStatus(h.w.Status()))
		}
		return
	case p == "/healthz":
		if sidecarMethod(w, r, "GET, HEAD") {
			api.WriteRaw(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
		}
		return
	case p == "/readyz":
		if sidecarMethod(w, r, "GET, HEAD") {
			h.ready(w)
		}
		return
	case p == "/metrics":
		if sidecarMethod(w, r, "GET, HEAD") {
			h.metrics.ServeHTTP(w, r)
		}
		return
	}
	api.WriteError(w, http.StatusNotFound, "unknown path "+api.Quote(p)+"; this worker sidecar serves POST /v1/limits/"+
		h.limit+"/reserve, POST /v1/sessions, GET /v1/status, GET /healthz, GET /readyz and GET /metrics")
}

// sidecarMethod reports whether r's method is among allowed; if not it
// answers 405.
func sidecarMethod(w http.ResponseWriter, r *http.Request, allowed string) bool {
	for m := range strings.SplitSeq(allowed, ", ") {
		if r.Method == m {
			return true
		}
	}
	api.MethodNotAllowed(w, r, allowed)
	return false
}

func (h *sidecarHandler) reserve(w http.ResponseWriter, r *http.Request, name string) {
	if err := api.ValidateName("limit name", name); err != nil {
		h.answers.invalid.Inc()
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if name != h.limit {
		h.answers.invalid.Inc()
		api.WriteError(w, http.StatusNotFound, "limit "+strconv.Quote(name)+" not found; this worker sidecar serves only limit "+strconv.Quote(h.limit))
		return
	}
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	if herr := api.ReadBody(w, r, buf); herr != nil {
		h.answers.invalid.Inc()
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	req := wire.Reserve{Limit: name}
	if herr := api.ParseReserve(buf.Bytes(), &req); herr != nil {
		h.answers.invalid.Inc()
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	maxWait := time.Duration(req.MaxWaitNanos)
	if maxWait > h.maxWait {
		h.answers.invalid.Inc()
		api.WriteError(w, http.StatusBadRequest, `field "max_wait": `+maxWait.String()+"; allowed on this worker sidecar: at most "+h.maxWait.String())
		return
	}
	ok, err := h.w.TryAcquire(req.Permits, maxWait)
	if err != nil {
		h.unavailable(w, name, err)
		return
	}
	if ok {
		h.answers.granted.Inc()
		api.WriteRaw(w, http.StatusOK, []byte(`{"granted":true,"wait_ns":0,"expires_in_ns":0,"spacing_ns":0,"duplicate":false}`+"\n"))
		return
	}
	h.answers.refused.Inc()
	retry := h.retryAfterNanos(req.Permits)
	w.Header()["Retry-After"] = []string{strconv.FormatInt(api.RetryAfterSeconds(retry), 10)}
	what := "a permit"
	if req.Permits > 1 {
		what = strconv.FormatInt(req.Permits, 10) + " permits"
	}
	b := buf.AvailableBuffer()
	b = append(b, `{"granted":false,"retry_after_ns":`...)
	b = strconv.AppendInt(b, retry, 10)
	b = append(b, `,"duplicate":false,"error":`...)
	b = api.AppendJSONString(b, "limit "+strconv.Quote(name)+": this worker could not hand out "+what+" within max_wait "+
		maxWait.String()+"; retry after "+time.Duration(retry).String())
	b = append(b, "}\n"...)
	api.WriteRaw(w, http.StatusTooManyRequests, b)
}

// retryAfterNanos estimates when n permits could be handed out (>= 1 ms,
// so that a refusal never invites a hot loop): when the worker may spend
// fewer than n permits now, its next call to the register (the renewal,
// or the retry, that brings the next grant), or, while a call is due or
// under way (a renewal waiting out an election), the worker's RetryEvery,
// how often it looks again itself; otherwise one pacing slot of n permits
// at its current share; 100 ms when it knows neither.
func (h *sidecarHandler) retryAfterNanos(n int64) int64 {
	const floor, unknown = int64(time.Millisecond), int64(100 * time.Millisecond)
	st := h.w.Status()
	if st.OutstandingPermits < n {
		switch {
		case st.NextRenewalIn > 0:
			return max(int64(st.NextRenewalIn), floor)
		case st.RetryEvery > 0:
			return max(int64(st.RetryEvery), floor)
		}
		return unknown
	}
	share := st.ShareMilliPermitsPerSec
	if share <= 0 || n > (1<<62)/1_000_000_000_000 {
		return unknown
	}
	return max((n*1_000_000_000_000+share-1)/share, floor)
}

// ready answers GET /readyz: 200 while the worker holds a usable grant or
// stolen permits, or is renewing, or waiting out a register silence
// shorter than its UnreachableAfter (an election); 503 while it fails
// closed (the register unreachable and nothing left) or has no lease.
func (h *sidecarHandler) ready(w http.ResponseWriter) {
	st := h.w.Status()
	switch {
	case st.Unreachable && st.OutstandingPermits == 0:
		w.Header().Set("Retry-After", "1")
		last := st.LastError
		if last == "" {
			last = "a call under way"
		}
		api.WriteError(w, http.StatusServiceUnavailable, "not ready: the worker holds no permit and the register has not answered it for "+
			st.RegisterSilentFor.String()+": "+last)
	case st.LeaseID == 0:
		w.Header().Set("Retry-After", "1")
		reason := "the worker holds no lease yet"
		if st.LastError != "" {
			reason += ": " + st.LastError
		}
		api.WriteError(w, http.StatusServiceUnavailable, "not ready: "+reason)
	default:
		api.WriteRaw(w, http.StatusOK, []byte(`{"ready":true}`+"\n"))
	}
}

// unavailable answers a worker that cannot serve: 503, or 400 for an
// invalid permit count.
func (h *sidecarHandler) unavailable(w http.ResponseWriter, name string, err error) {
	switch {
	case errors.Is(err, worker.ErrInvalidPermits):
		h.answers.invalid.Inc()
		api.WriteError(w, http.StatusBadRequest, "reserve on limit "+strconv.Quote(name)+": "+err.Error())
		return
	case errors.Is(err, worker.ErrRegisterUnreachable):
		err = errors.New("worker fails closed: the register is unreachable and no permit is left: " + err.Error())
	case errors.Is(err, worker.ErrNoPermits):
		err = errors.New("worker fails closed: the register gives it no lease: " + err.Error())
	case errors.Is(err, worker.ErrStopped), errors.Is(err, worker.ErrNotStarted):
		err = errors.New("worker is not running: " + err.Error())
	}
	h.answers.unavailable.Inc()
	h.log.Warn("reserve unavailable", "limit", name, "error", err)
	w.Header().Set("Retry-After", "1")
	api.WriteError(w, http.StatusServiceUnavailable, "limit "+strconv.Quote(name)+": "+err.Error())
}

// sidecarStatus is the JSON of GET /v1/status on a sidecar.
type sidecarStatus struct {
	Limit                   string              `json:"limit"`
	Group                   string              `json:"group"`
	Holder                  string              `json:"holder"`
	SharePerSec             api.Float           `json:"share_per_sec"`
	ShareMilliPermitsPerSec int64               `json:"share_milli_per_sec"`
	Lease                   sidecarLease        `json:"lease"`
	Stats                   sidecarStats        `json:"stats"`
	Members                 map[string][]string `json:"members"`
}

type sidecarLease struct {
	LeaseID               uint64 `json:"lease_id"`
	Epoch                 uint64 `json:"epoch"`
	GrantPermitsLeft      int64  `json:"grant_permits_left"`
	StolenPermitsLeft     int64  `json:"stolen_permits_left"`
	ExpiresInNanos        int64  `json:"expires_in_ns"`
	SinceGoodRenewalNanos int64  `json:"since_good_renewal_ns"`
	CutOff                bool   `json:"cut_off"`
	RegisterSilentNanos   int64  `json:"register_silent_ns"`
	Unreachable           bool   `json:"unreachable"`
	LastError             string `json:"last_error"`
}

type sidecarStats struct {
	LeasedPermits            int64  `json:"leased_permits"`
	SpentPermits             int64  `json:"spent_permits"`
	SpentStolenPermits       int64  `json:"spent_stolen_permits"`
	StolenInPermits          int64  `json:"stolen_in_permits"`
	StolenOutPermits         int64  `json:"stolen_out_permits"`
	CreditedPermits          int64  `json:"credited_permits"`
	ExpiredUnusedPermits     int64  `json:"expired_unused_permits"`
	OutstandingPermits       int64  `json:"outstanding_permits"`
	DemandMilliPermitsPerSec int64  `json:"demand_milli_per_sec"`
	Leases                   uint64 `json:"leases"`
	Renewals                 uint64 `json:"renewals"`
	Fenced                   uint64 `json:"fenced"`
	RegisterFails            uint64 `json:"register_fails"`
	StealRounds              uint64 `json:"steal_rounds"`
	StealsServed             uint64 `json:"steals_served"`
	StealsReceived           uint64 `json:"steals_received"`
	StealsUnmatched          uint64 `json:"steals_unmatched"`
	GossipRejected           uint64 `json:"gossip_rejected"`
	GossipRejoins            uint64 `json:"gossip_rejoins"`
}

func newSidecarStatus(st worker.Status) sidecarStatus {
	s := st.Stats
	members := st.Members
	if members == nil {
		members = map[string][]string{}
	}
	return sidecarStatus{
		Limit: s.Limit, Group: s.Group, Holder: s.Holder,
		SharePerSec: api.Float(float64(s.ShareMilliPermitsPerSec) / 1000), ShareMilliPermitsPerSec: s.ShareMilliPermitsPerSec,
		Lease: sidecarLease{LeaseID: st.LeaseID, Epoch: st.Epoch, GrantPermitsLeft: st.GrantPermitsLeft, StolenPermitsLeft: st.StolenPermitsLeft,
			ExpiresInNanos: int64(st.ExpiresIn), SinceGoodRenewalNanos: int64(st.SinceGoodRenewal), CutOff: st.CutOff,
			RegisterSilentNanos: int64(st.RegisterSilentFor), Unreachable: st.Unreachable, LastError: st.LastError},
		Stats: sidecarStats{LeasedPermits: s.LeasedPermits, SpentPermits: s.SpentPermits, SpentStolenPermits: s.SpentStolenPermits,
			StolenInPermits: s.StolenInPermits, StolenOutPermits: s.StolenOutPermits, CreditedPermits: s.CreditedPermits,
			ExpiredUnusedPermits: s.ExpiredUnusedPermits, OutstandingPermits: s.OutstandingPermits,
			DemandMilliPermitsPerSec: s.DemandMilliPermitsPerSec, Leases: s.Leases, Renewals: s.Renewals, Fenced: s.Fenced,
			RegisterFails: s.RegisterFails, StealRounds: s.StealRounds, StealsServed: s.StealsServed,
			StealsReceived: s.StealsReceived, StealsUnmatched: s.StealsUnmatched, GossipRejected: s.GossipRejected,
			GossipRejoins: s.GossipRejoins},
		Members: members,
	}
}

// sidecarAnswers counts the reserves a sidecar answered, by outcome:
// permitd_sidecar_reserves_total{limit,group,worker,outcome} with outcome
// granted (200), refused (429), unavailable (503, failing closed) and
// invalid (4xx).
type sidecarAnswers struct {
	granted, refused, unavailable, invalid prometheus.Counter
}

func newSidecarAnswers(reg prometheus.Registerer, st worker.Stats) *sidecarAnswers {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "permitd_sidecar_reserves_total",
		Help: "Reserves answered by this worker sidecar, by outcome: granted (200), refused (429), unavailable (503: it failed closed), invalid (4xx).",
	}, []string{"limit", "group", "worker", "outcome"})
	reg.MustRegister(v)
	c := func(outcome string) prometheus.Counter {
		return v.WithLabelValues(st.Limit, st.Group, st.Holder, outcome)
	}
	return &sidecarAnswers{granted: c("granted"), refused: c("refused"), unavailable: c("unavailable"), invalid: c("invalid")}
}
