package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/permitd/permitd/node/lazyctx"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/openapi"
)

// DefaultRequestTimeout bounds the time one request may spend in the Store.
const DefaultRequestTimeout = 10 * time.Second

// HandlerOptions configures NewHandler. The zero value is usable.
type HandlerOptions struct {
	// Logger receives request failures that are not the client's fault
	// (503s). Nil: no logging.
	Logger hclog.Logger
	// Metrics, if not nil, is updated by every request and served on
	// /metrics (when it was built on a registry that is also a
	// prometheus.Gatherer). Nil: no metrics, /metrics answers 404.
	Metrics *Metrics
	// RequestTimeout bounds the time one request may spend in the Store;
	// a request that runs out is answered 503. Zero: DefaultRequestTimeout.
	RequestTimeout time.Duration
	// SessionsPerToken is the most sessions one API token may hold open
	// at once (fsm.OpenSession.PerOwner, 1 to fsm.MaxSessions), when the
	// handler is behind RequireTokens; 0: no quota. The agent's
	// --sessions-per-token, DefaultSessionsPerToken unless set.
	SessionsPerToken int
}

// NewHandler returns the HTTP handler of the permitd API backed by s. See
// the package documentation for the endpoints.
func NewHandler(s Store, opts HandlerOptions) http.Handler {
	h := &handler{
		store:            s,
		log:              opts.Logger,
		metrics:          opts.Metrics,
		timeout:          opts.RequestTimeout,
		sessionsPerToken: opts.SessionsPerToken,
	}
	if h.log == nil {
		h.log = hclog.NewNullLogger()
	}
	if h.timeout <= 0 {
		h.timeout = DefaultRequestTimeout
	}
	h.metricsHandler = opts.Metrics.httpHandler()
	return h
}

type handler struct {
	store            Store
	log              hclog.Logger
	metrics          *Metrics
	timeout          time.Duration
	sessionsPerToken int
	metricsHandler   http.Handler // nil without a gatherer
}

// route identifies an endpoint; its label is the route label of
// permitd_http_request_duration_seconds.
type route uint8

const (
	routeUnknown route = iota
	routeLimits
	routeLimit
	routeReserve
	routeStatus
	routeCluster
	routeJoin
	routeServer
	routeMetrics
	routeHealthz
	routeReadyz
	routeLeasePolicy
	routeLeases
	routeLease
	routeRenew
	routeReturn
	routeSessions
	routeTransfer
	routeSnapshot
	routeOpenAPI
	routeMultiReserve
	routeSettle
	routeRelease
	routeReadableLimits
	routeUI
	routeUIAsset
	routeTemplates
	routeTemplate
	numRoutes
)

var routeLabels = [numRoutes]string{
	routeUnknown: "unknown",
	routeLimits:  "/v1/limits",
	routeLimit:   "/v1/limits/{name}",
	routeReserve: "/v1/limits/{name}/reserve",
	routeStatus:  "/v1/status",
	routeCluster: "/v1/cluster",
	routeJoin:    "/v1/cluster/join",
	routeServer:  "/v1/cluster/servers/{id}",
	routeMetrics: "/metrics",
	routeHealthz: "/healthz",
	routeReadyz:  "/readyz",

	routeLeasePolicy: "/v1/limits/{name}/lease-policy",
	routeLeases:      "/v1/limits/{name}/leases",
	routeLease:       "/v1/limits/{name}/lease",
	routeRenew:       "/v1/limits/{name}/leases/{id}/renew",
	routeReturn:      "/v1/limits/{name}/leases/{id}/return",
	routeSessions:    "/v1/sessions",
	routeTransfer:    "/v1/cluster/transfer-leadership",
	routeSnapshot:    "/v1/snapshot",
	routeOpenAPI:     "/v1/openapi.json",

	routeMultiReserve: "/v1/reserve",
	routeSettle:       "/v1/reservations/{id}/settle",
	routeRelease:      "/v1/reservations/{id}/release",

	routeReadableLimits: "/v1/readable-limits",
	routeUI:             "/ui",
	routeUIAsset:        "/ui/{asset}",
	routeTemplates:      "/v1/templates",
	routeTemplate:       "/v1/templates/{prefix}",
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := getRecorder(w)
	rt := h.dispatch(rec, r)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	h.metrics.observeHTTP(rt, rec.code, time.Since(start))
	putRecorder(rec)
}

// pathName is a limit's name as a path segment carries it, unescaped
// (%3A is ':'). A segment that does not unescape is left as it is, and
// the name's validation then names the byte that is not allowed; an
// escaped '/' becomes a '/', which no name allows either.
func pathName(segment string) string {
	if !strings.Contains(segment, "%") {
		return segment
	}
	if name, err := url.PathUnescape(segment); err == nil {
		return name
	}
	return segment
}

// dispatch routes r and returns the route it matched.
func (h *handler) dispatch(w *recorder, r *http.Request) route {
	// The escaped path is used so that an escaped '/' inside a name cannot
	// change the route; a name is then unescaped (pathName), as clients
	// that escape every reserved character send ':' as %3A.
	p := r.URL.EscapedPath()
	switch {
	case p == "/v1/limits":
		if h.method(w, r, "GET, HEAD") {
			h.listLimits(w, r)
		}
		return routeLimits
	case p == "/v1/readable-limits":
		if h.method(w, r, "GET, HEAD") {
			h.listReadableLimits(w, r)
		}
		return routeReadableLimits
	case strings.HasPrefix(p, "/v1/limits/"):
		name, sub, hasSub := strings.Cut(p[len("/v1/limits/"):], "/")
		name = pathName(name)
		if !hasSub {
			switch r.Method {
			case http.MethodGet, http.MethodHead:
				h.getLimit(w, r, name)
			case http.MethodPut:
				h.putLimit(w, r, name)
			case http.MethodDelete:
				h.deleteLimit(w, r, name)
			default:
				api.MethodNotAllowed(w, r, "GET, HEAD, PUT, DELETE")
			}
			return routeLimit
		}
		if sub == "reserve" {
			if h.method(w, r, "POST") {
				h.reserve(w, r, name)
			}
			return routeReserve
		}
		if rt := h.dispatchLease(w, r, name, sub); rt != routeUnknown {
			return rt
		}
	case p == "/v1/snapshot":
		if h.method(w, r, "GET") {
			h.snapshot(w, r)
		}
		return routeSnapshot
	case p == "/v1/sessions":
		if h.method(w, r, "POST") {
			h.openSession(w, r)
		}
		return routeSessions
	case p == "/v1/reserve":
		if h.method(w, r, "POST") {
			h.multiReserve(w, r)
		}
		return routeMultiReserve
	case strings.HasPrefix(p, "/v1/reservations/"):
		if rt := h.dispatchReservation(w, r, p[len("/v1/reservations/"):]); rt != routeUnknown {
			return rt
		}
	case strings.HasPrefix(p, "/v1/templates"):
		if rt := h.dispatchTemplates(w, r, p); rt != routeUnknown {
			return rt
		}
	}
	if rt := h.dispatchCluster(w, r, p); rt != routeUnknown {
		return rt
	}
	if rt := h.dispatchService(w, r, p); rt != routeUnknown {
		return rt
	}
	api.WriteError(w, http.StatusNotFound, "unknown path "+api.Quote(p)+"; see /v1/limits, /v1/limits/{name}, /v1/limits/{name}/reserve, /v1/reserve, /v1/reservations/{id}/settle, /v1/reservations/{id}/release, /v1/limits/{name}/lease, /v1/limits/{name}/leases, /v1/templates, /v1/templates/{prefix}, /v1/sessions, /v1/status, /v1/cluster, /v1/readable-limits, /metrics, /healthz, /readyz, /v1/openapi.json (this API's OpenAPI description), /ui (the status page)")
	return routeUnknown
}

// dispatchCluster routes the node's and the cluster's endpoints: the
// status, the raft configuration and its changes. It returns
// routeUnknown, having written nothing, for any other path.
func (h *handler) dispatchCluster(w *recorder, r *http.Request, p string) route {
	switch {
	case p == "/v1/status":
		if h.method(w, r, "GET, HEAD") {
			api.WriteJSON(w, http.StatusOK, h.store.Status())
		}
		return routeStatus
	case p == "/v1/cluster":
		if h.method(w, r, "GET, HEAD") {
			h.cluster(w, r)
		}
		return routeCluster
	case p == "/v1/cluster/join":
		if h.method(w, r, "POST") {
			h.join(w, r)
		}
		return routeJoin
	case p == "/v1/cluster/transfer-leadership":
		if h.method(w, r, "POST") {
			h.transferLeadership(w, r)
		}
		return routeTransfer
	case strings.HasPrefix(p, "/v1/cluster/servers/"):
		id := p[len("/v1/cluster/servers/"):]
		if strings.IndexByte(id, '/') >= 0 {
			return routeUnknown
		}
		if h.method(w, r, "DELETE") {
			h.removeServer(w, r, id)
		}
		return routeServer
	}
	return routeUnknown
}

// dispatchService routes the endpoints that serve the process rather
// than the register: metrics, health, readiness and the API's document.
// It returns routeUnknown, having written nothing, for any other path.
func (h *handler) dispatchService(w *recorder, r *http.Request, p string) route {
	switch {
	case p == "/metrics":
		if h.method(w, r, "GET, HEAD") {
			if h.metricsHandler == nil {
				api.WriteError(w, http.StatusNotFound, "metrics are not enabled on this server")
			} else {
				h.metricsHandler.ServeHTTP(w, r)
			}
		}
		return routeMetrics
	case p == "/healthz":
		if h.method(w, r, "GET, HEAD") {
			api.WriteRaw(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
		}
		return routeHealthz
	case p == "/readyz":
		if h.method(w, r, "GET, HEAD") {
			h.ready(w)
		}
		return routeReadyz
	case p == "/v1/openapi.json":
		if h.method(w, r, "GET, HEAD") {
			api.WriteRaw(w, http.StatusOK, openapi.JSON())
		}
		return routeOpenAPI
	case p == "/ui":
		if h.method(w, r, "GET, HEAD") {
			serveUI(w, uiIndex)
		}
		return routeUI
	case isUIAsset(p):
		if h.method(w, r, "GET, HEAD") {
			serveUI(w, p[len("/ui/"):])
		}
		return routeUIAsset
	}
	return routeUnknown
}

// method reports whether r's method is one of allowed (a comma separated
// list as in an Allow header); if not it answers 405.
func (h *handler) method(w http.ResponseWriter, r *http.Request, allowed string) bool {
	for m := range strings.SplitSeq(allowed, ", ") {
		if r.Method == m {
			return true
		}
	}
	api.MethodNotAllowed(w, r, allowed)
	return false
}

// context returns the request context bounded by the request timeout
// (node/lazyctx: its timer is made only if something waits on it, so
// a reserve decided on the leader's fast path never pays for one).
func (h *handler) context(r *http.Request) (context.Context, context.CancelFunc) {
	ctx := lazyctx.New(r.Context(), time.Now().Add(h.timeout))
	return ctx, ctx.Release
}

// recorder remembers the status code written through it.
type recorder struct {
	http.ResponseWriter
	code int
}

var recorderPool = sync.Pool{New: func() any { return new(recorder) }}

func getRecorder(w http.ResponseWriter) *recorder {
	rec := recorderPool.Get().(*recorder)
	rec.ResponseWriter = w
	rec.code = 0
	return rec
}

func putRecorder(rec *recorder) {
	rec.ResponseWriter = nil
	recorderPool.Put(rec)
}

// WriteHeader implements http.ResponseWriter.
func (rec *recorder) WriteHeader(code int) {
	if rec.code == 0 {
		rec.code = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (rec *recorder) Write(b []byte) (int, error) {
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return rec.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }
