package server

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// limitmetrics.go: the per-limit series. Most are read at scrape time
// from the node's replicated state (fsm.FSM.LimitStats, one consistent
// read), so every node that has applied the same log exports the same
// numbers; the wait histogram and the lease grants per group are what
// the node observed applying entries (node.ApplyObserver), which every
// node does for every entry, so they agree too, counted since the node
// started (or restored a snapshot).

// DefaultMetricsMaxLimits is the default bound on the limits that get
// per-limit series (the agent's --metrics-max-limits).
const DefaultMetricsMaxLimits = 5000

// maxLeaseGroupsPerLimit bounds the groups of one limit that get their
// own permitd_limit_lease_granted_permits_total series; the grants of
// further groups are counted under otherLeaseGroup.
const maxLeaseGroupsPerLimit = 100

// otherLeaseGroup is the group label of the grants to groups beyond
// maxLeaseGroupsPerLimit: not a valid group name, so it names no group.
const otherLeaseGroup = "(other)"

// limitWaitBuckets are the buckets of permitd_limit_wait_seconds, fewer
// than permitd_reserve_wait_seconds' since there is one histogram per
// limit.
var limitWaitBuckets = []float64{0, 0.001, 0.01, 0.1, 1, 10, 60}

// LimitMetrics exports the per-limit series of the first MaxLimits
// explicit limits by name (those beyond are counted in
// permitd_limits_unexported), and per template the series of its keys as
// one family (familymetrics.go), never one series per key:
//
//	permitd_limit_requests_total{limit,outcome}    outcome: granted|refused (refused counts expired grants)
//	permitd_limit_expired_requests_total{limit}    grants answered as refusals: they expired while held
//	permitd_limit_permits_total{limit,outcome}     outcome: granted|refunded|charged|expired
//	permitd_limit_rate_permits_per_second{limit}   configured rate (not for concurrency limits)
//	permitd_limit_in_flight_permits{limit}         concurrency limits: permits held now
//	permitd_limit_max_in_flight_permits{limit}     concurrency limits: the cap
//	permitd_limit_open_reservations{limit}         granted reservations not yet settled or released
//	permitd_limit_lease_outstanding_permits{limit} leased limits: permits held by leases
//	permitd_limit_lease_granted_permits_total{limit,group}  permits granted to leases, by group (applied entries)
//	permitd_limit_wait_seconds{limit}              histogram of granted waits (applied entries)
//	permitd_limits_exported, permitd_limits_unexported
//	permitd_template_*{template}                   familymetrics.go
//
// It is also the node's node.ApplyObserver. The zero value is not
// usable; call NewLimitMetrics.
type LimitMetrics struct {
	maxLimits int
	src       LimitStatsSource

	mu sync.Mutex
	// waits holds the wait histograms of at most maxLimits limits: those
	// whose names sort first among the limits with a grant observed
	// (waitNames, sorted). An exported limit is always among them (fewer
	// than maxLimits limits sort before it), so a million keys cost the
	// histograms of the exported ones only; a histogram dropped for a
	// name that sorts before it starts again from 0 if its limit is
	// exported later.
	waits     map[string]*waitHistogram
	waitNames []string
	leases    map[string]map[string]uint64
	// families is what was observed of each template's keys (familymetrics.go).
	families map[string]*familyObserved
	family   familyDescs

	requests, expired, permits, rate     *prometheus.Desc
	inFlight, maxInFlight, reservations  *prometheus.Desc
	leaseOutstanding, leaseGranted, wait *prometheus.Desc
	exported, unexported                 *prometheus.Desc
}

// waitHistogram counts granted waits: counts[i] those <= limitWaitBuckets[i]
// and above the previous bound, counts[len] the rest.
type waitHistogram struct {
	counts [8]uint64
	count  uint64
	sum    float64
}

// NewLimitMetrics returns the per-limit metrics of at most maxLimits
// limits (the first by name; < 0: DefaultMetricsMaxLimits). Pass it to
// the node as its node.Config.Applied, then Register it.
func NewLimitMetrics(maxLimits int) *LimitMetrics {
	if maxLimits < 0 {
		maxLimits = DefaultMetricsMaxLimits
	}
	limit := []string{"limit"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append(limit, labels...), nil)
	}
	return &LimitMetrics{
		maxLimits: maxLimits,
		waits:     make(map[string]*waitHistogram),
		leases:    make(map[string]map[string]uint64),
		families:  make(map[string]*familyObserved),
		family:    newFamilyDescs(),
		requests: d("permitd_limit_requests_total",
			"Reserves on the limit the register answered, by outcome (granted, refused; refused counts the grants that expired before their answer left), since the limit was created; the same on every node.", "outcome"),
		expired: d("permitd_limit_expired_requests_total",
			"Reserves on the limit the register granted but whose permit expired while a node held the answer, so that they were answered as refusals (a subset of outcome=\"refused\")."),
		permits: d("permitd_limit_permits_total",
			"Permits of the limit by outcome: granted (by reserves answered as grants), refunded and charged (by settlements), expired (of grants answered as refusals), since the limit was created.", "outcome"),
		rate: d("permitd_limit_rate_permits_per_second",
			"The limit's configured rate in permits per second (absent for concurrency limits; +Inf for an unlimited bursty limit)."),
		inFlight: d("permitd_limit_in_flight_permits",
			"Concurrency limits: permits held now (at the register's cluster time)."),
		maxInFlight: d("permitd_limit_max_in_flight_permits",
			"Concurrency limits: the most permits that may be held at once."),
		reservations: d("permitd_limit_open_reservations",
			"Reservations with a part on the limit that were granted and are neither settled nor released yet."),
		leaseOutstanding: d("permitd_limit_lease_outstanding_permits",
			"Leased limits: permits held by leases (current grants and permits given away that still linger)."),
		leaseGranted: d("permitd_limit_lease_granted_permits_total",
			"Leased limits: permits granted to leases and renewals by group (a renewal's kept permits are not counted again), as this node applied them since it started; groups beyond the first 100 of a limit are counted as group=\"(other)\".", "group"),
		wait: d("permitd_limit_wait_seconds",
			"Wait before the permits of a granted reserve on the limit may be used, as the register decided it, observed by this node applying the entries since it started."),
		exported: prometheus.NewDesc("permitd_limits_exported",
			"Limits that have per-limit series (the first --metrics-max-limits by name).", nil, nil),
		unexported: prometheus.NewDesc("permitd_limits_unexported",
			"Limits beyond --metrics-max-limits (by name), which have no per-limit series.", nil, nil),
	}
}

// LimitStatsSource is the state LimitMetrics reads at every scrape (a
// *node.Node, or an *fsm.FSM in tests); its reads must not block.
type LimitStatsSource interface {
	// LimitStats returns the first maxLimits explicit limits by name and
	// how many there are (fsm.FSM.LimitStats).
	LimitStats(maxLimits int) ([]fsm.LimitStats, int)
	// TemplateStats returns every template and its family of live keys
	// (fsm.FSM.TemplateStats).
	TemplateStats() []fsm.TemplateStats
}

// Register registers m on reg, reading the state from src at every
// scrape.
func (m *LimitMetrics) Register(reg prometheus.Registerer, src LimitStatsSource) {
	m.src = src
	reg.MustRegister(m)
}

// GrantedWait implements node.ApplyObserver: a templated key's wait is
// counted in its family's histogram.
func (m *LimitMetrics) GrantedWait(limit, template string, waitNanos int64) {
	v := time.Duration(waitNanos).Seconds()
	m.mu.Lock()
	if template != "" {
		if f := m.familyLocked(template); f != nil {
			f.wait.observe(v)
		}
		m.mu.Unlock()
		return
	}
	h := m.waits[limit]
	if h == nil {
		if h = m.newWaitHistogram(limit); h == nil {
			m.mu.Unlock()
			return
		}
	}
	h.observe(v)
	m.mu.Unlock()
}

// observe counts a wait of v seconds.
func (h *waitHistogram) observe(v float64) {
	i := 0
	for i < len(limitWaitBuckets) && v > limitWaitBuckets[i] {
		i++
	}
	h.counts[i]++
	h.count++
	h.sum += v
}

// constHistogram is h as a metric of d.
func (h *waitHistogram) constHistogram(d *prometheus.Desc, labels ...string) prometheus.Metric {
	// A fresh map each: the const histogram keeps it.
	buckets := make(map[float64]uint64, len(limitWaitBuckets))
	var cum uint64
	for j, b := range limitWaitBuckets {
		cum += h.counts[j]
		buckets[b] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.count, h.sum, buckets, labels...)
}

// newWaitHistogram adds a histogram for limit if its name sorts among the
// first maxLimits kept, dropping the one whose name sorts last if that
// makes one too many; nil if limit's name sorts after maxLimits others.
// Called with mu held.
func (m *LimitMetrics) newWaitHistogram(limit string) *waitHistogram {
	n := len(m.waitNames)
	if m.maxLimits == 0 || (n >= m.maxLimits && limit > m.waitNames[n-1]) {
		return nil
	}
	i, _ := slices.BinarySearch(m.waitNames, limit)
	m.waitNames = slices.Insert(m.waitNames, i, limit)
	if len(m.waitNames) > m.maxLimits {
		last := m.waitNames[len(m.waitNames)-1]
		delete(m.waits, last)
		m.waitNames = m.waitNames[:len(m.waitNames)-1]
	}
	h := &waitHistogram{}
	m.waits[limit] = h
	return h
}

// LeaseGranted implements node.ApplyObserver.
func (m *LimitMetrics) LeaseGranted(limit, group string, permits int64) {
	m.mu.Lock()
	g := m.leases[limit]
	if g == nil {
		g = make(map[string]uint64)
		m.leases[limit] = g
	}
	if _, ok := g[group]; !ok && len(g) >= maxLeaseGroupsPerLimit {
		group = otherLeaseGroup
	}
	g[group] += uint64(permits)
	m.mu.Unlock()
}

// LimitDeleted implements node.ApplyObserver.
func (m *LimitMetrics) LimitDeleted(limit string) {
	m.mu.Lock()
	if _, ok := m.waits[limit]; ok {
		delete(m.waits, limit)
		i, _ := slices.BinarySearch(m.waitNames, limit)
		m.waitNames = slices.Delete(m.waitNames, i, i+1)
	}
	delete(m.leases, limit)
	m.mu.Unlock()
}

// Restored implements node.ApplyObserver.
func (m *LimitMetrics) Restored() {
	m.mu.Lock()
	clear(m.waits)
	m.waitNames = nil
	clear(m.leases)
	clear(m.families)
	m.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (m *LimitMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.requests, m.expired, m.permits, m.rate, m.inFlight, m.maxInFlight,
		m.reservations, m.leaseOutstanding, m.leaseGranted, m.wait, m.exported, m.unexported} {
		ch <- d
	}
	m.family.describe(ch)
}

// observed is what the node observed of one limit, copied for a scrape.
type observed struct {
	wait   waitHistogram
	waited bool
	groups map[string]uint64
}

// Collect implements prometheus.Collector.
func (m *LimitMetrics) Collect(ch chan<- prometheus.Metric) {
	stats, total := m.src.LimitStats(m.maxLimits)
	obs := make([]observed, len(stats))
	m.mu.Lock()
	for i := range stats {
		name := stats[i].Info.Name
		if h := m.waits[name]; h != nil {
			obs[i].wait, obs[i].waited = *h, true
		}
		if g := m.leases[name]; len(g) > 0 {
			obs[i].groups = make(map[string]uint64, len(g))
			for k, v := range g {
				obs[i].groups[k] = v
			}
		}
	}
	m.mu.Unlock()

	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for i := range stats {
		s := &stats[i]
		in := &s.Info
		name := in.Name
		counter(m.requests, in.GrantedRequests, name, "granted")
		counter(m.requests, in.RefusedRequests, name, "refused")
		counter(m.expired, in.ExpiredRequests, name)
		counter(m.permits, in.GrantedPermits, name, "granted")
		counter(m.permits, in.RefundedPermits, name, "refunded")
		counter(m.permits, in.ChargedPermits, name, "charged")
		counter(m.permits, in.ExpiredPermits, name, "expired")
		if s.Concurrency {
			gauge(m.inFlight, float64(s.InFlightPermits), name)
			gauge(m.maxInFlight, float64(s.MaxInFlightPermits), name)
		} else {
			gauge(m.rate, ratePerSecond(in.Config), name)
		}
		gauge(m.reservations, float64(s.OpenReservations), name)
		if in.Leased {
			gauge(m.leaseOutstanding, float64(s.LeaseOutstandingPermits), name)
		}
		for g, v := range obs[i].groups {
			counter(m.leaseGranted, v, name, g)
		}
		if obs[i].waited {
			ch <- obs[i].wait.constHistogram(m.wait, name)
		}
	}
	gauge(m.exported, float64(len(stats)))
	gauge(m.unexported, float64(total-len(stats)))
	m.collectFamilies(ch)
}

// ratePerSecond is a limit's configured rate in permits per second.
func ratePerSecond(c bucket.Config) float64 {
	per := c.Spec.Per
	if per <= 0 {
		per = time.Second
	}
	if math.IsInf(c.Spec.Rate, 1) {
		return math.Inf(1)
	}
	return c.Spec.Rate / per.Seconds()
}
