package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/permitd/permitd/fsm"
)

// shadowmetrics.go: what limits in shadow mode would have done, exported
// per limit at scrape time from this replica's state (a follower's view
// may lag the leader's by the entries it has not applied yet).

// shadowCollector exports the shadow counters of the limits in shadow
// mode.
type shadowCollector struct {
	limits       func() []fsm.LimitInfo
	refuse, wait *prometheus.Desc
	grants       *prometheus.Desc
}

// RegisterShadowMetrics registers, on reg, the counters of limits in
// shadow mode, read from limits at every scrape:
// permitd_shadow_would_refuse_total, permitd_shadow_would_wait_total and
// permitd_shadow_granted_total, labelled by limit. limits returns the
// limits in shadow mode (others are skipped) and must not block, nor
// cost what the whole register would (node.Node.LocalShadowLimits).
func RegisterShadowMetrics(reg prometheus.Registerer, limits func() []fsm.LimitInfo) {
	reg.MustRegister(&shadowCollector{
		limits: limits,
		refuse: prometheus.NewDesc("permitd_shadow_would_refuse_total",
			"Reserves a limit in shadow mode granted but would have refused (since the limit was created).", []string{"limit"}, nil),
		wait: prometheus.NewDesc("permitd_shadow_would_wait_total",
			"Reserves a limit in shadow mode granted at once but would have made wait.", []string{"limit"}, nil),
		grants: prometheus.NewDesc("permitd_shadow_granted_total",
			"Reserves a limit granted while in shadow mode (since the limit was created; grants made while it was enforced are not counted).", []string{"limit"}, nil),
	})
}

// Describe implements prometheus.Collector.
func (c *shadowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.refuse
	ch <- c.wait
	ch <- c.grants
}

// Collect implements prometheus.Collector.
func (c *shadowCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.limits() {
		if !l.Shadow {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.refuse, prometheus.CounterValue, float64(l.ShadowWouldRefuse), l.Name)
		ch <- prometheus.MustNewConstMetric(c.wait, prometheus.CounterValue, float64(l.ShadowWouldWait), l.Name)
		ch <- prometheus.MustNewConstMetric(c.grants, prometheus.CounterValue, float64(l.ShadowGranted), l.Name)
	}
}
