package sidecar

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/permitd/permitd/transport/worker"
)

// statsWorker is a WorkerStatser whose counters the test sets.
type statsWorker struct {
	mu sync.Mutex
	s  worker.Stats
}

func (w *statsWorker) Stats() worker.Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s
}

func (w *statsWorker) set(f func(*worker.Stats)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.s)
}

// scrape GETs path from h and returns the samples: "name{labels}" -> value
// text, comments skipped.
func scrape(t *testing.T, h http.Handler, path string) map[string]string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	require.Equal(t, http.StatusOK, rec.Code, "GET %s: %s", path, rec.Body.String())
	ct := rec.Header().Get("Content-Type")
	assert.True(t, strings.HasPrefix(ct, "text/plain"), "GET %s: Content-Type %q, want text/plain (Prometheus text format)", path, ct)
	out := map[string]string{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		out[line[:i]] = line[i+1:]
	}
	return out
}

// TestSidecarMetrics scrapes a sidecar's /metrics after a known sequence of
// counters and checks every per-worker series and the headroom.
func TestSidecarMetrics(t *testing.T) {
	fw := newFakeSidecarWorker()
	fw.status.Stats = worker.Stats{Limit: "api", Group: "g1", Holder: "w1"}
	h := NewHandler(fw, Options{})
	lbl := `{group="g1",limit="api",worker="w1"}`

	// Before anything happened every series is 0.
	got := scrape(t, h, "/metrics")
	for _, name := range []string{"permitd_worker_leased_permits_total", "permitd_worker_spent_permits_total",
		"permitd_worker_outstanding_permits", "permitd_worker_share_permits_per_second"} {
		assert.Equal(t, "0", got[name+lbl], "fresh: %s%s", name, lbl)
	}
	assert.Equal(t, "0", got[`permitd_worker_overgrant_headroom_permits{limit="api"}`], "fresh: headroom")

	// A grant of 500 at a share of 250.5/s; 120 spent (20 of them stolen
	// from a peer's lot of 30), 40 given away, 10 of the lot expired, 300
	// credited back at the renewal: 500 - 120 + 20 - 40 - 300 = 60 left
	// of the open grant (the worker computes OutstandingPermits itself).
	fw.status.Stats = worker.Stats{Limit: "api", Group: "g1", Holder: "w1",
		LeasedPermits: 500, SpentPermits: 120, SpentStolenPermits: 20, StolenInPermits: 30, StolenOutPermits: 40,
		CreditedPermits: 300, ExpiredUnusedPermits: 10, OutstandingPermits: 60,
		ShareMilliPermitsPerSec: 250_500, DemandMilliPermitsPerSec: 1_100_000,
		GossipRejected: 7, GossipRejoins: 3}
	got = scrape(t, h, "/metrics")
	for _, tc := range []struct {
		series, want string
	}{
		{"permitd_worker_leased_permits_total" + lbl, "500"},
		{"permitd_worker_spent_permits_total" + lbl, "120"},
		{"permitd_worker_stolen_in_permits_total" + lbl, "30"},
		{"permitd_worker_stolen_out_permits_total" + lbl, "40"},
		{"permitd_worker_credited_permits_total" + lbl, "300"},
		{"permitd_worker_expired_unused_permits_total" + lbl, "10"},
		{"permitd_worker_outstanding_permits" + lbl, "60"},
		{"permitd_worker_share_permits_per_second" + lbl, "250.5"},
		{"permitd_worker_demand_permits_per_second" + lbl, "1100"},
		{`permitd_worker_overgrant_headroom_permits{limit="api"}`, "60"},
		{"permitd_worker_gossip_rejected_total" + lbl, "7"},
		{"permitd_worker_gossip_rejoins_total" + lbl, "3"},
	} {
		if assert.Contains(t, got, tc.series) {
			assert.Equal(t, tc.want, got[tc.series], tc.series)
		}
	}

	// HEAD is allowed, POST is not.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/metrics", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, "POST /metrics")
}

// TestWorkerMetricsHeadroom checks the headroom sums the outstanding
// permits of several workers by limit, and that each worker gets its own
// labelled series.
func TestWorkerMetricsHeadroom(t *testing.T) {
	ws := []*statsWorker{
		{s: worker.Stats{Limit: "api", Group: "A", Holder: "a1", OutstandingPermits: 7, ShareMilliPermitsPerSec: 1000}},
		{s: worker.Stats{Limit: "api", Group: "B", Holder: "b1", OutstandingPermits: 11}},
		{s: worker.Stats{Limit: "llm", Group: "A", Holder: "a2", OutstandingPermits: 3}},
	}
	m := NewWorkerMetrics(nil, ws[0], ws[1], ws[2])
	h := m.Handler()
	require.NotNil(t, h, "Handler() = nil with a private registry")
	check := func(step string, want map[string]string) {
		t.Helper()
		got := scrape(t, h, "/")
		for k, v := range want {
			assert.Equal(t, v, got[k], "%s: %s", step, k)
		}
	}
	check("start", map[string]string{
		`permitd_worker_overgrant_headroom_permits{limit="api"}`:                     "18",
		`permitd_worker_overgrant_headroom_permits{limit="llm"}`:                     "3",
		`permitd_worker_outstanding_permits{group="B",limit="api",worker="b1"}`:      "11",
		`permitd_worker_share_permits_per_second{group="A",limit="api",worker="a1"}`: "1",
	})
	// b1 spends its 11 and steals 4 from a1 (debited there first).
	ws[1].set(func(s *worker.Stats) { s.SpentPermits += 11; s.StolenInPermits += 4; s.OutstandingPermits = 4 })
	ws[0].set(func(s *worker.Stats) { s.StolenOutPermits += 4; s.OutstandingPermits = 3 })
	check("after a steal", map[string]string{
		`permitd_worker_overgrant_headroom_permits{limit="api"}`:                     "7",
		`permitd_worker_spent_permits_total{group="B",limit="api",worker="b1"}`:      "11",
		`permitd_worker_stolen_in_permits_total{group="B",limit="api",worker="b1"}`:  "4",
		`permitd_worker_stolen_out_permits_total{group="A",limit="api",worker="a1"}`: "4",
	})

	// A registerer that is not a Gatherer: no handler.
	assert.Nil(t, NewWorkerMetrics(noGather{prometheus.NewRegistry()}, ws[0]).Handler(), "Handler() != nil without a Gatherer")
}

// noGather is a Registerer that is not a Gatherer.
type noGather struct{ prometheus.Registerer }

// TestStatusCarriesTheGossipCounters: the sidecar's status JSON has the
// worker's gossip counters.
func TestStatusCarriesTheGossipCounters(t *testing.T) {
	b, err := json.Marshal(newSidecarStatus(worker.Status{Stats: worker.Stats{GossipRejected: 7, GossipRejoins: 3}}))
	require.NoError(t, err)
	for _, want := range []string{`"gossip_rejected":7`, `"gossip_rejoins":3`} {
		assert.Contains(t, string(b), want, "status")
	}
}
