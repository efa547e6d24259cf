package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// familymetrics.go: the keys a template creates are exported as one
// family per template (label template="prefix"), never one series per
// key, so that a million keys cost the series of their templates
// (fsm.MaxTemplates at most):
//
//	permitd_template_keys{template}                     live keys (replicated state)
//	permitd_template_max_keys{template}                 the template's cap on live keys
//	permitd_template_rate_permits_per_second{template}  each key's configured rate (not for concurrency)
//	permitd_template_keys_created_total{template}       keys created on first use (applied entries)
//	permitd_template_keys_dropped_total{template}       keys dropped as idle (applied entries)
//	permitd_template_keys_full_total{template}          reserves refused KeysFull (applied entries)
//	permitd_template_requests_total{template,outcome}   granted|refused, over the family
//	permitd_template_permits_total{template,outcome}    granted, over the family
//	permitd_template_wait_seconds{template}             waits of granted reserves (applied entries)
//
// The request and permit counters are the source's (node.Node.TemplateStats:
// the live keys' counters plus those of the keys that left the family since
// the node started, so they only grow while it runs).

// familyObserved is what a node observed of one template's keys applying
// entries, since it started or restored a snapshot.
type familyObserved struct {
	created, dropped, full uint64
	wait                   waitHistogram
}

// familyDescs are the descriptions of the family series.
type familyDescs struct {
	keys, maxKeys, rate, created, dropped, full, requests, permits, wait *prometheus.Desc
}

func newFamilyDescs() familyDescs {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"template"}, labels...), nil)
	}
	return familyDescs{
		keys:    d("permitd_template_keys", "Live keys the template created (a deleted template is listed while its keys live); the same on every node."),
		maxKeys: d("permitd_template_max_keys", "The most keys of the template that may live at once."),
		rate:    d("permitd_template_rate_permits_per_second", "The configured rate of each key of the template in permits per second (absent for concurrency templates)."),
		created: d("permitd_template_keys_created_total", "Keys the template created on their first reserve, as this node applied the entries since it started."),
		dropped: d("permitd_template_keys_dropped_total", "Keys of the template the register dropped as idle and at rest, as this node applied the entries since it started."),
		full: d("permitd_template_keys_full_total",
			"Reserves refused because a new key of the template would pass a cap on keys (the template's max keys, or all templates'), as this node applied the entries since it started."),
		requests: d("permitd_template_requests_total",
			"Reserves the register answered on the template's keys, by outcome (granted, refused): the live keys' counters plus those of the keys that left the family (dropped, made explicit, deleted) since this node started.", "outcome"),
		permits: d("permitd_template_permits_total",
			"Permits granted on the template's keys (outcome=granted): the live keys' counters plus those of the keys that left the family (dropped, made explicit, deleted) since this node started.", "outcome"),
		wait: d("permitd_template_wait_seconds",
			"Wait before the permits of a granted reserve on a key of the template may be used, observed by this node applying the entries since it started."),
	}
}

func (d *familyDescs) describe(ch chan<- *prometheus.Desc) {
	for _, x := range []*prometheus.Desc{d.keys, d.maxKeys, d.rate, d.created, d.dropped, d.full, d.requests, d.permits, d.wait} {
		ch <- x
	}
}

// familyLocked returns what was observed of template's keys, making it
// first; nil past 2 × fsm.MaxTemplates templates (Collect forgets those
// gone). Called with mu held.
func (m *LimitMetrics) familyLocked(template string) *familyObserved {
	f := m.families[template]
	if f == nil && len(m.families) < 2*fsm.MaxTemplates {
		f = &familyObserved{}
		m.families[template] = f
	}
	return f
}

// KeyChanged implements node.ApplyObserver.
func (m *LimitMetrics) KeyChanged(c fsm.KeyChange) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.familyLocked(c.Template)
	if f == nil {
		return
	}
	switch c.Kind {
	case fsm.KeyCreated:
		f.created++
	case fsm.KeyDroppedIdle:
		f.dropped++
	}
}

// KeysFull implements node.ApplyObserver.
func (m *LimitMetrics) KeysFull(template string) {
	m.mu.Lock()
	if f := m.familyLocked(template); f != nil {
		f.full++
	}
	m.mu.Unlock()
}

// collectFamilies sends the family series of every template.
func (m *LimitMetrics) collectFamilies(ch chan<- prometheus.Metric) {
	fams := m.src.TemplateStats()
	obs := make([]familyObserved, len(fams))
	m.mu.Lock()
	for i := range fams {
		if f := m.families[fams[i].Prefix]; f != nil {
			obs[i] = *f
		}
	}
	if len(m.families) > fsm.MaxTemplates {
		live := make(map[string]bool, len(fams))
		for i := range fams {
			live[fams[i].Prefix] = true
		}
		for p := range m.families {
			if !live[p] {
				delete(m.families, p)
			}
		}
	}
	m.mu.Unlock()

	d := &m.family
	for i := range fams {
		t, o, p := &fams[i], &obs[i], fams[i].Prefix
		ch <- prometheus.MustNewConstMetric(d.keys, prometheus.GaugeValue, float64(t.LiveKeys), p)
		ch <- prometheus.MustNewConstMetric(d.maxKeys, prometheus.GaugeValue, float64(t.MaxKeys), p)
		if t.Config.Spec.Algorithm != bucket.Concurrency {
			ch <- prometheus.MustNewConstMetric(d.rate, prometheus.GaugeValue, ratePerSecond(t.Config), p)
		}
		counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), append([]string{p}, labels...)...)
		}
		counter(d.created, o.created)
		counter(d.dropped, o.dropped)
		counter(d.full, o.full)
		counter(d.requests, t.GrantedRequests, "granted")
		counter(d.requests, t.RefusedRequests, "refused")
		counter(d.permits, t.GrantedPermits, "granted")
		ch <- o.wait.constHistogram(d.wait, p)
	}
}
