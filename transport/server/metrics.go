package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/permitd/permitd/transport/api"
)

// Metrics is permitd's set of Prometheus metrics, registered on a registry
// the caller owns. A nil *Metrics is valid and records nothing, so callers
// need no nil checks.
//
// Exposed series (label values are fixed sets; limit names are never
// labels here: LimitMetrics has the per-limit series). protocol is http
// or binary: the request counters count every protocol's requests alike,
// each by the node that answered the client (a relay's batch counts each
// of its commands):
//
//	permitd_reserve_requests_total{protocol,outcome}   outcome: granted|refused|keys_full|unknown|invalid|error
//	permitd_granted_permits_total{protocol}
//	permitd_lease_requests_total{protocol,outcome}     lease, renew and return; outcome: granted|refused|fenced|returned|unknown|invalid|error
//	permitd_reserve_wait_seconds{protocol}             histogram of granted waits
//	permitd_http_request_duration_seconds{route,code}
//	permitd_batch_size                        reserves per raft entry (ObserveBatch)
//	permitd_apply_latency_seconds             raft apply latency (ObserveBatch)
//	permitd_raft_state{state}                 1 for the current state, else 0
//	permitd_raft_term, permitd_raft_commit_index, permitd_raft_applied_index
//	permitd_is_leader                         1 on the leader, else 0
//	permitd_reserves_expired_total            grants this node answered 429: expired while it held them
//	permitd_reserves_expired_unreported_total of those, fresh ones the register still counts as granted
//	permitd_raft_last_snapshot_index          the index the node's last raft snapshot covers
//	permitd_snapshot_failures_total{op}       op: take (encode or write: a full disk) | restore
//
// The raft gauges are read from the status function at scrape time.
type Metrics struct {
	gatherer     prometheus.Gatherer
	proto        [numProtocols]protoMetrics
	httpDuration *prometheus.HistogramVec
	batchSize    prometheus.Histogram
	applyLatency prometheus.Histogram

	// httpObservers caches one observer per (route, code), so a request
	// does not hash label values.
	httpObservers [numRoutes]observerCache
}

// protoMetrics are the request counters of one protocol.
type protoMetrics struct {
	reserves       [numOutcomes]prometheus.Counter
	leases         [numLeaseOutcomes]prometheus.Counter
	grantedPermits prometheus.Counter
	reserveWait    prometheus.Observer
}

// protocol is the protocol label of the request counters.
type protocol uint8

const (
	protoHTTP protocol = iota
	protoBinary
	numProtocols
)

var protocolLabels = [numProtocols]string{"http", "binary"}

type observerCache struct {
	mu  sync.RWMutex
	obs map[int]prometheus.Observer
}

// reserveOutcome is the outcome label of permitd_reserve_requests_total.
type reserveOutcome uint8

const (
	outcomeGranted reserveOutcome = iota
	outcomeRefused
	outcomeUnknown
	outcomeInvalid
	outcomeError
	// outcomeKeysFull: a reserve that would have created a templated key
	// past a cap (fsm.KeysFull, 429).
	outcomeKeysFull
	numOutcomes
)

var outcomeLabels = [numOutcomes]string{"granted", "refused", "unknown", "invalid", "error", "keys_full"}

// leaseOutcome is the outcome label of permitd_lease_requests_total.
type leaseOutcome uint8

const (
	leaseGranted leaseOutcome = iota
	leaseRefused
	leaseFenced
	leaseReturned
	leaseUnknown
	leaseInvalid
	leaseError
	numLeaseOutcomes
)

var leaseOutcomeLabels = [numLeaseOutcomes]string{"granted", "refused", "fenced", "returned", "unknown", "invalid", "error"}

// raftStates are the values of the state label of permitd_raft_state.
var raftStates = []string{"leader", "follower", "candidate", "shutdown"}

// NewMetrics creates permitd's metrics and registers them on reg (a new
// private registry if reg is nil). status, if not nil, is called once per
// scrape for the raft gauges; it must not block. If reg is also a
// prometheus.Gatherer (a *prometheus.Registry is), the handler serves it on
// /metrics. NewMetrics panics if the metrics are already registered on reg,
// which is a programming error.
func NewMetrics(reg prometheus.Registerer, status func() api.Status) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{}
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	}
	reserves := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "permitd_reserve_requests_total",
		Help: "Reserve requests answered by this node, by protocol (http, binary) and outcome: granted, refused (429), keys_full (429: a template's key could not be created, its cap is reached), unknown (no such limit), invalid (400/413), error (503).",
	}, []string{"protocol", "outcome"})
	leases := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "permitd_lease_requests_total",
		Help: "Lease, renew and return requests answered by this node (each command of a relay's batch), by protocol (http, binary) and outcome: granted, refused (429), fenced (409), returned, unknown (no such limit), invalid (400/413), error (503).",
	}, []string{"protocol", "outcome"})
	granted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "permitd_granted_permits_total",
		Help: "Permits granted by reserve requests answered by this node, by protocol.",
	}, []string{"protocol"})
	wait := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "permitd_reserve_wait_seconds",
		Help:    "Wait before a granted permit may be used, as answered to the client by this node, by protocol.",
		Buckets: []float64{0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300},
	}, []string{"protocol"})
	for p, pl := range protocolLabels {
		pm := &m.proto[p]
		for i, l := range outcomeLabels {
			pm.reserves[i] = reserves.WithLabelValues(pl, l)
		}
		for i, l := range leaseOutcomeLabels {
			pm.leases[i] = leases.WithLabelValues(pl, l)
		}
		pm.grantedPermits = granted.WithLabelValues(pl)
		pm.reserveWait = wait.WithLabelValues(pl)
	}
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "permitd_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by route pattern and status code.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"route", "code"})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "permitd_batch_size",
		Help:    "Reserves carried by one raft log entry.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1 .. 2048
	})
	m.applyLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "permitd_apply_latency_seconds",
		Help:    "Time from submitting a batch to raft until it was applied.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100µs .. ~3.3s
	})
	reg.MustRegister(reserves, leases, granted, wait, m.httpDuration, m.batchSize, m.applyLatency)
	if status != nil {
		reg.MustRegister(newStatusCollector(status))
	}
	return m
}

// ObserveBatch records one raft entry of size reserves that took
// applyLatency from submission to application. The node calls it.
func (m *Metrics) ObserveBatch(size int, applyLatency time.Duration) {
	if m == nil {
		return
	}
	m.batchSize.Observe(float64(size))
	m.applyLatency.Observe(applyLatency.Seconds())
}

func (m *Metrics) countReserve(p protocol, o reserveOutcome) {
	if m == nil {
		return
	}
	m.proto[p].reserves[o].Inc()
}

func (m *Metrics) countLease(p protocol, o leaseOutcome) {
	if m == nil {
		return
	}
	m.proto[p].leases[o].Inc()
}

func (m *Metrics) reserveGranted(p protocol, permits, waitNanos int64) {
	if m == nil {
		return
	}
	pm := &m.proto[p]
	pm.reserves[outcomeGranted].Inc()
	pm.grantedPermits.Add(float64(permits))
	pm.reserveWait.Observe(time.Duration(waitNanos).Seconds())
}

func (m *Metrics) observeHTTP(rt route, code int, d time.Duration) {
	if m == nil {
		return
	}
	c := &m.httpObservers[rt]
	c.mu.RLock()
	o, ok := c.obs[code]
	c.mu.RUnlock()
	if !ok {
		o = m.httpDuration.WithLabelValues(routeLabels[rt], strconv.Itoa(code))
		c.mu.Lock()
		if c.obs == nil {
			c.obs = make(map[int]prometheus.Observer)
		}
		c.obs[code] = o
		c.mu.Unlock()
	}
	o.Observe(d.Seconds())
}

// httpHandler serves the gatherer, or is nil without one.
func (m *Metrics) httpHandler() http.Handler {
	if m == nil || m.gatherer == nil {
		return nil
	}
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

// statusCollector exports the raft gauges from a status function at
// scrape time.
type statusCollector struct {
	status                            func() api.Status
	state, term, commit, applied, led *prometheus.Desc
	pending, shed                     *prometheus.Desc
	expired, unreported               *prometheus.Desc
	lastSnapshot, snapshotFailures    *prometheus.Desc
}

func newStatusCollector(status func() api.Status) *statusCollector {
	return &statusCollector{
		status:  status,
		state:   prometheus.NewDesc("permitd_raft_state", "1 for the node's current raft state, 0 for the others.", []string{"state"}, nil),
		term:    prometheus.NewDesc("permitd_raft_term", "Current raft term.", nil, nil),
		commit:  prometheus.NewDesc("permitd_raft_commit_index", "Raft commit index.", nil, nil),
		applied: prometheus.NewDesc("permitd_raft_applied_index", "Raft index applied to the state machine.", nil, nil),
		led:     prometheus.NewDesc("permitd_is_leader", "1 if this node is the raft leader, else 0.", nil, nil),
		pending: prometheus.NewDesc("permitd_reserves_pending", "Reserves this node holds now (at most --max-pending-reserves).", nil, nil),
		shed:    prometheus.NewDesc("permitd_reserves_shed_total", "Reserves refused at once (503 overloaded) because the node held --max-pending-reserves.", nil, nil),
		expired: prometheus.NewDesc("permitd_reserves_expired_total",
			"Reserves the register granted that this node answered as refusals (429, counted in permitd_reserve_requests_total{outcome=\"refused\"} by the node that answered the client) because the permit expired while it held the answer; the limit's counters count them as refusals too (expired_requests).", nil, nil),
		unreported: prometheus.NewDesc("permitd_reserves_expired_unreported_total",
			"Of permitd_reserves_expired_total, fresh grants this node could not report to the register, whose counters therefore still count them as granted.", nil, nil),
		lastSnapshot: prometheus.NewDesc("permitd_raft_last_snapshot_index", "The raft index this node's last snapshot covers (its log is compacted up to it).", nil, nil),
		snapshotFailures: prometheus.NewDesc("permitd_snapshot_failures_total",
			"Raft snapshots this node failed on since it started, by op: take (encoding or writing one: a full or failing disk), restore (one sent by the leader or read at start).", []string{"op"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.term
	ch <- c.commit
	ch <- c.applied
	ch <- c.led
	ch <- c.pending
	ch <- c.shed
	ch <- c.expired
	ch <- c.unreported
	ch <- c.lastSnapshot
	ch <- c.snapshotFailures
}

// Collect implements prometheus.Collector.
func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	known := false
	for _, s := range raftStates {
		v := 0.0
		if st.State == s {
			v, known = 1, true
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, s)
	}
	if !known && st.State != "" {
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, 1, st.State)
	}
	leader := 0.0
	if st.State == "leader" {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(c.commit, prometheus.GaugeValue, float64(st.CommitIndex))
	ch <- prometheus.MustNewConstMetric(c.applied, prometheus.GaugeValue, float64(st.AppliedIndex))
	ch <- prometheus.MustNewConstMetric(c.led, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.PendingReserves))
	ch <- prometheus.MustNewConstMetric(c.shed, prometheus.CounterValue, float64(st.ShedReserves))
	ch <- prometheus.MustNewConstMetric(c.expired, prometheus.CounterValue, float64(st.ExpiredGrants))
	ch <- prometheus.MustNewConstMetric(c.unreported, prometheus.CounterValue, float64(st.ExpiredGrantsUnreported))
	ch <- prometheus.MustNewConstMetric(c.lastSnapshot, prometheus.GaugeValue, float64(st.LastSnapshotIndex))
	ch <- prometheus.MustNewConstMetric(c.snapshotFailures, prometheus.CounterValue, float64(st.SnapshotFailures), "take")
	ch <- prometheus.MustNewConstMetric(c.snapshotFailures, prometheus.CounterValue, float64(st.RestoreFailures), "restore")
}
