package sidecar

import (
	"net/http"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/permitd/permitd/transport/worker"
)

// WorkerStatser is what the worker metrics read: a worker's counters.
// *worker.Worker implements it.
type WorkerStatser interface {
	Stats() worker.Stats
}

// WorkerMetrics exports the counters of the workers of one process (a
// sidecar has one; a program embedding transport/worker may have several) as
// Prometheus metrics, read from Stats at scrape time. Labels are limit,
// group and worker (the holder name): a worker process has few of each.
//
// Exposed series:
//
//	permitd_worker_leased_permits_total{limit,group,worker}         permits granted by the register
//	permitd_worker_spent_permits_total{limit,group,worker}          permits handed to callers (grants and stolen lots)
//	permitd_worker_stolen_in_permits_total{limit,group,worker}      permits received from peers
//	permitd_worker_stolen_out_permits_total{limit,group,worker}     permits given to peers
//	permitd_worker_credited_permits_total{limit,group,worker}       unspent permits credited back by the register
//	permitd_worker_expired_unused_permits_total{limit,group,worker} permits left at a grant's or stolen lot's expiry
//	permitd_worker_outstanding_permits{limit,group,worker}          permits the worker may spend now
//	permitd_worker_share_permits_per_second{limit,group,worker}     the share the register gave
//	permitd_worker_demand_permits_per_second{limit,group,worker}    the demand last reported
//	permitd_worker_overgrant_headroom_permits{limit}                see below
//
// Over-grant headroom. The bound says the fleet spends at most
// C + O + floor(W/I) + 1 permits in any window W: floor(W/I) + 1 is the
// rate, C + O the most it can spend above the rate. Above the rate the
// fleet can only spend permits that were minted earlier and are not spent
// yet: the register's free pool (at most C) and the permits held by leases
// (at most O). The part the workers hold is the headroom they could spend
// at once, with no register round trip: for each worker, its open grant's
// permits left plus its unexpired stolen lots (OutstandingPermits; a lot
// is debited from its donor before it is sent, so nothing is counted
// twice). permitd_worker_overgrant_headroom_permits is the sum of
// OutstandingPermits over the workers of this process, by limit; the
// fleet's headroom is its sum over all worker processes
// (sum by (limit) (permitd_worker_overgrant_headroom_permits)), which
// never exceeds O.
type WorkerMetrics struct {
	gatherer prometheus.Gatherer
}

// NewWorkerMetrics registers the metrics of workers on reg (a new private
// registry if reg is nil) and returns them; Handler serves reg if it is a
// prometheus.Gatherer. It panics if the metrics are already registered on
// reg, which is a programming error.
func NewWorkerMetrics(reg prometheus.Registerer, workers ...WorkerStatser) *WorkerMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &WorkerMetrics{}
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	}
	reg.MustRegister(newWorkerCollector(workers))
	return m
}

// Handler serves the metrics in the Prometheus text format, or is nil
// when the registry is not a Gatherer.
func (m *WorkerMetrics) Handler() http.Handler {
	if m == nil || m.gatherer == nil {
		return nil
	}
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

// workerSeries is one per-worker series: its description and how to read
// its value from Stats.
type workerSeries struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(worker.Stats) float64
}

// workerCollector reads the workers' Stats at scrape time.
type workerCollector struct {
	workers  []WorkerStatser
	series   []workerSeries
	headroom *prometheus.Desc
}

func newWorkerCollector(workers []WorkerStatser) *workerCollector {
	labels := []string{"limit", "group", "worker"}
	counter := func(name, help string, v func(worker.Stats) int64) workerSeries {
		return workerSeries{prometheus.NewDesc(name, help, labels, nil), prometheus.CounterValue, func(s worker.Stats) float64 { return float64(v(s)) }}
	}
	gauge := func(name, help string, v func(worker.Stats) float64) workerSeries {
		return workerSeries{prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue, v}
	}
	return &workerCollector{
		workers: append([]WorkerStatser(nil), workers...),
		series: []workerSeries{
			counter("permitd_worker_leased_permits_total", "Permits granted to the worker by the register (total of its grants).",
				func(s worker.Stats) int64 { return s.LeasedPermits }),
			counter("permitd_worker_spent_permits_total", "Permits the worker handed to its callers, from its grants and from stolen lots.",
				func(s worker.Stats) int64 { return s.SpentPermits }),
			counter("permitd_worker_stolen_in_permits_total", "Permits the worker received from peers (stealing).",
				func(s worker.Stats) int64 { return s.StolenInPermits }),
			counter("permitd_worker_stolen_out_permits_total", "Permits the worker gave to peers (debited before sending: a lost answer loses them).",
				func(s worker.Stats) int64 { return s.StolenOutPermits }),
			counter("permitd_worker_credited_permits_total", "Unspent permits the register credited back at a renewal or return.",
				func(s worker.Stats) int64 { return s.CreditedPermits }),
			counter("permitd_worker_expired_unused_permits_total", "Permits left unspent at a grant's local expiry before being reported, or at a stolen lot's deadline.",
				func(s worker.Stats) int64 { return s.ExpiredUnusedPermits }),
			counter("permitd_worker_gossip_rejected_total", "Gossip packets and streams dropped because they were not encrypted with a key this worker holds (--gossip-key-file): a process without the key, its joins and steal messages included.",
				func(s worker.Stats) int64 { return int64(s.GossipRejected) }),
			counter("permitd_worker_gossip_rejoins_total", "Joins of the seed list after the worker's start: while it was alone, or after it saw the member count drop and was one of the few members chosen to rejoin.",
				func(s worker.Stats) int64 { return int64(s.GossipRejoins) }),
			gauge("permitd_worker_outstanding_permits", "Permits the worker may spend now: its open grant's permits left plus unexpired stolen ones.",
				func(s worker.Stats) float64 { return float64(s.OutstandingPermits) }),
			gauge("permitd_worker_share_permits_per_second", "The worker's current share of the limit's rate, as the register computed it.",
				func(s worker.Stats) float64 { return float64(s.ShareMilliPermitsPerSec) / 1000 }),
			gauge("permitd_worker_demand_permits_per_second", "The demand the worker last reported to the register (measured, plus 10 % headroom).",
				func(s worker.Stats) float64 { return float64(s.DemandMilliPermitsPerSec) / 1000 }),
		},
		headroom: prometheus.NewDesc("permitd_worker_overgrant_headroom_permits",
			"Over-grant headroom of the workers of this process, by limit: the permits they hold and could spend at once, above the rate "+
				"(sum of permitd_worker_outstanding_permits). The fleet's headroom is the sum over all worker processes; it never exceeds O "+
				"(max outstanding permits), and with the register's free pool (at most C) it is the C + O term of the over-grant bound "+
				"C + O + floor(W/I) + 1.", []string{"limit"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *workerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.series {
		ch <- s.desc
	}
	ch <- c.headroom
}

// Collect implements prometheus.Collector.
func (c *workerCollector) Collect(ch chan<- prometheus.Metric) {
	headroom := map[string]int64{}
	for _, w := range c.workers {
		st := w.Stats()
		for _, s := range c.series {
			ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.value(st), st.Limit, st.Group, st.Holder)
		}
		headroom[st.Limit] += st.OutstandingPermits
	}
	limits := make([]string, 0, len(headroom))
	for l := range headroom {
		limits = append(limits, l)
	}
	sort.Strings(limits)
	for _, l := range limits {
		ch <- prometheus.MustNewConstMetric(c.headroom, prometheus.GaugeValue, float64(headroom[l]), l)
	}
}
