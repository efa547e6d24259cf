package server

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// limitsFSM returns an FSM with n strict limits l00000.. (one granted
// reserve each) and, on every tenth, an open reservation.
func limitsFSM(tb testing.TB, n int) *fsm.FSM {
	tb.Helper()
	f := fsm.New()
	var index uint64
	apply := func(b []byte, err error) {
		if err != nil {
			tb.Fatal(err)
		}
		index++
		f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b})
	}
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 100, Per: time.Second, MaxReserved: 10})
	if err != nil {
		tb.Fatal(err)
	}
	st := fsm.Stamp{Nanos: int64(time.Second), Term: 1}
	var batch []fsm.Reserve
	for i := range n {
		name := fmt.Sprintf("l%05d", i)
		apply(fsm.AppendPut(nil, st, fsm.PutLimit{Name: name, Config: cfg}))
		batch = append(batch, fsm.Reserve{Limit: name, Permits: 1, Track: i%10 == 0})
		if len(batch) == 512 || i == n-1 {
			apply(fsm.AppendReserveBatch(nil, st, batch))
			batch = batch[:0]
		}
	}
	return f
}

// TestLimitMetricsBound: beyond the bound, the first limits by name have
// series, the others are counted, and a limit's lease groups beyond
// maxLeaseGroupsPerLimit are counted under "(other)".
func TestLimitMetricsBound(t *testing.T) {
	f := limitsFSM(t, 30)
	m := NewLimitMetrics(20)
	reg := prometheus.NewRegistry()
	m.Register(reg, f)
	m.GrantedWait("l00003", "", int64(2*time.Millisecond))
	m.GrantedWait("l00025", "", 0) // beyond the bound: not exported
	for g := range maxLeaseGroupsPerLimit + 5 {
		m.LeaseGranted("l00001", fmt.Sprintf("g%03d", g), 2)
	}
	if n := testutil.CollectAndCount(m, "permitd_limit_requests_total"); n != 2*20 {
		t.Errorf("%d permitd_limit_requests_total series, want %d (two per exported limit)", n, 2*20)
	}
	if n := testutil.CollectAndCount(m, "permitd_limit_wait_seconds"); n != 1 {
		t.Errorf("%d wait histograms, want 1", n)
	}
	if n := testutil.CollectAndCount(m, "permitd_limit_lease_granted_permits_total"); n != maxLeaseGroupsPerLimit+1 {
		t.Errorf("%d lease group series, want %d", n, maxLeaseGroupsPerLimit+1)
	}
	want := `
# HELP permitd_limits_exported Limits that have per-limit series (the first --metrics-max-limits by name).
# TYPE permitd_limits_exported gauge
permitd_limits_exported 20
# HELP permitd_limits_unexported Limits beyond --metrics-max-limits (by name), which have no per-limit series.
# TYPE permitd_limits_unexported gauge
permitd_limits_unexported 10
# HELP permitd_limit_open_reservations Reservations with a part on the limit that were granted and are neither settled nor released yet.
# TYPE permitd_limit_open_reservations gauge
`
	for i := range 20 {
		v := 0
		if i%10 == 0 {
			v = 1
		}
		want += fmt.Sprintf("permitd_limit_open_reservations{limit=\"l%05d\"} %d\n", i, v)
	}
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "permitd_limits_exported", "permitd_limits_unexported", "permitd_limit_open_reservations"); err != nil {
		t.Error(err)
	}
	body := scrape(t, reg)
	for _, s := range []string{
		`permitd_limit_lease_granted_permits_total{group="(other)",limit="l00001"} 10`,
		`permitd_limit_requests_total{limit="l00019",outcome="granted"} 1`,
		`permitd_limit_rate_permits_per_second{limit="l00000"} 100`,
		`permitd_limit_wait_seconds_bucket{limit="l00003",le="0.01"} 1`,
	} {
		if !strings.Contains(body, s+"\n") {
			t.Errorf("the scrape lacks %s", s)
		}
	}
	if strings.Contains(body, `limit="l00020"`) || strings.Contains(body, `limit="l00025"`) {
		t.Errorf("the scrape has a limit beyond the bound")
	}
	m.LimitDeleted("l00003")
	if n := testutil.CollectAndCount(m, "permitd_limit_wait_seconds"); n != 0 {
		t.Errorf("a deleted limit keeps %d wait histograms", n)
	}
}

// scrape serves reg's /metrics once.
func scrape(tb testing.TB, reg *prometheus.Registry) string {
	tb.Helper()
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	return w.Body.String()
}

// BenchmarkLimitMetricsScrape10k measures a whole /metrics scrape of the
// per-limit series of 10 000 limits (each with a wait histogram), as
// Prometheus gets it (uncompressed text): ns/op is the agent's CPU per
// scrape, bytes/scrape its size.
//
//	go test ./transport/server -run '^$' -bench LimitMetricsScrape10k -benchmem
func BenchmarkLimitMetricsScrape10k(b *testing.B) {
	const n = 10000
	f := limitsFSM(b, n)
	m := NewLimitMetrics(n)
	reg := prometheus.NewRegistry()
	m.Register(reg, f)
	for i := range n {
		m.GrantedWait(fmt.Sprintf("l%05d", i), "", int64(i)*int64(time.Microsecond))
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	var size int
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/scrape")
	body := scrape(b, reg)
	b.ReportMetric(float64(strings.Count(body, "\n")), "lines/scrape")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(body))
	_ = zw.Close()
	b.ReportMetric(float64(gz.Len()), "gzip-bytes/scrape")
}

// BenchmarkLimitStats10k measures the read of 10 000 limits' stats: how
// long a scrape holds the state's read lock (and so may delay applying
// an entry).
func BenchmarkLimitStats10k(b *testing.B) {
	f := limitsFSM(b, 10000)
	b.ReportAllocs()
	for range b.N {
		f.LimitStats(-1)
	}
}

// TestLimitMetricsKeepsExportedWaits: the wait histograms kept are those
// of the limits whose names sort first (at most the bound), which the
// exported limits are always among, so a million keys do not each keep
// one.
func TestLimitMetricsKeepsExportedWaits(t *testing.T) {
	m := NewLimitMetrics(2)
	for _, name := range []string{"k:3", "k:4", "k:2", "k:5", "k:1", "k:2"} {
		m.GrantedWait(name, "", 0)
	}
	kept := func() []string {
		m.mu.Lock()
		defer m.mu.Unlock()
		names := slices.Sorted(maps.Keys(m.waits))
		if !slices.Equal(names, m.waitNames) {
			t.Errorf("histograms of %v, sorted names %v", names, m.waitNames)
		}
		return names
	}
	if got, want := kept(), []string{"k:1", "k:2"}; !slices.Equal(got, want) {
		t.Fatalf("bound 2, grants on k:3 k:4 k:2 k:5 k:1 k:2: histograms of %v, want %v", got, want)
	}
	if h := m.waits["k:2"]; h.count != 2 {
		t.Errorf("k:2's histogram counts %d waits, want 2", h.count)
	}
	m.LimitDeleted("k:1")
	m.GrantedWait("k:9", "", 0)
	if got, want := kept(), []string{"k:2", "k:9"}; !slices.Equal(got, want) {
		t.Fatalf("k:1 deleted, a grant on k:9: histograms of %v, want %v", got, want)
	}
	m.Restored()
	if got := kept(); len(got) != 0 {
		t.Fatalf("restored: histograms of %v, want none", got)
	}
}
