package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/permitd/permitd/transport/client"
)

// scrapeSeries reads addr's /metrics into one value per series, keyed
// name{label="value",...} (labels sorted; a histogram gives its _count
// and _sum, and a _bucket per bound), and returns the raw page too.
func scrapeSeries(hc *http.Client, addr string) (map[string]float64, []byte, error) {
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var buf strings.Builder
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(teeReader{resp.Body, &buf})
	if err != nil {
		return nil, nil, err
	}
	out := map[string]float64{}
	key := func(name string, m *dto.Metric, extra ...string) string {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		ls = append(ls, extra...)
		sort.Strings(ls)
		return name + "{" + strings.Join(ls, ",") + "}"
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				out[key(name, m)] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key(name, m)] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key(name+"_count", m)] = float64(m.Histogram.GetSampleCount())
				out[key(name+"_sum", m)] = m.Histogram.GetSampleSum()
				for _, b := range m.Histogram.GetBucket() {
					out[key(name+"_bucket", m, fmt.Sprintf("le=%q", fmt.Sprint(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out, []byte(buf.String()), nil
}

// teeReader copies what is read from r into w.
type teeReader struct {
	r interface{ Read([]byte) (int, error) }
	w *strings.Builder
}

func (t teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.w.Write(p[:n])
	return n, err
}

// perLimit keeps the permitd_limit_* and permitd_limits_* series of s.
func perLimit(s map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range s {
		if strings.HasPrefix(k, "permitd_limit_") || strings.HasPrefix(k, "permitd_limits_") {
			out[k] = v
		}
	}
	return out
}

// sumOver sums the values of the series called key over every node.
func sumOver(nodes []map[string]float64, key string) float64 {
	var sum float64
	for _, s := range nodes {
		sum += s[key]
	}
	return sum
}

// TestPerLimitMetricsOnEveryNode runs three agents with
// --metrics-max-limits 5 (seven limits: two have no series), a worker leasing directly and one through a
// relay, and sends a known mix: HTTP reserves, binary reserves (the Go
// client's WithBinaryReserves), reserves of several limits settled and
// released, and leases. Every node then exports the same per-limit
// series, equal to what was sent; the node-level request counters,
// summed over the nodes, count each protocol's requests; the two limits
// beyond the bound have no series and are counted; and `promtool check
// metrics` finds nothing wrong with a real scrape.
func TestPerLimitMetricsOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	promtool, promErr := exec.LookPath("promtool")
	if promErr != nil && os.Getenv("PERMITD_REQUIRE_PROMTOOL") == "1" {
		t.Fatalf("promtool (Debian package prometheus) is required here: %v", promErr)
	}
	bin := buildPermitd(t)
	agents, hc, httpAddr, leader := startCluster(t, bin, "--metrics-max-limits", "5")
	lead := "http://" + httpAddr[leader] + "/v1/limits/"
	for name, spec := range map[string]string{
		"a":   `{"algorithm":"bursty","rate":1000,"per":"1s"}`,
		"b":   `{"algorithm":"strict","rate":1,"per":"1h"}`,
		"c":   `{"algorithm":"concurrency","max_in_flight":10,"ttl":"10m"}`,
		"d":   `{"algorithm":"strict","rate":7,"per":"1s"}`,
		"rl":  `{"algorithm":"strict","rate":200,"per":"1s"}`,
		"zz1": `{"algorithm":"strict","rate":5,"per":"1s"}`,
		"zz2": `{"algorithm":"strict","rate":5,"per":"1s"}`,
	} {
		if code, resp := do(t, hc, "PUT", lead+name, spec); code != 200 && code != 201 {
			t.Fatalf("put limit %s: %d %s", name, code, resp)
		}
	}
	if code, resp := do(t, hc, "PUT", lead+"rl/lease-policy", `{"leased":true}`); code != 200 {
		t.Fatalf("put lease policy: %d %s", code, resp)
	}

	// HTTP: three reserves of one permit on a, one at each node; three on
	// b (the first granted, then refused: one permit an hour).
	for _, a := range agents {
		if code, resp := do(t, hc, "POST", "http://"+a.httpAddr+"/v1/limits/a/reserve", `{"permits":1}`); code != 200 {
			t.Fatalf("HTTP reserve on a at %s: %d %s", a.id, code, resp)
		}
	}
	for i, want := range []int{200, 429, 429} {
		if code, resp := do(t, hc, "POST", "http://"+agents[i].httpAddr+"/v1/limits/b/reserve", `{"permits":1}`); code != want {
			t.Fatalf("HTTP reserve %d on b: %d %s, want %d", i, code, resp, want)
		}
	}
	// Binary: five reserves of two permits on a, one on b (refused).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bc, err := client.New(strings.Split(serversOf(agents...), ","), client.WithBinaryReserves(1))
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	for i := range 5 {
		if g, err := bc.Reserve(ctx, "a", 2, 0); err != nil || !g.Granted {
			t.Fatalf("binary reserve %d on a: %+v %v", i, g, err)
		}
	}
	if g, err := bc.Reserve(ctx, "b", 1, 0); err != nil || g.Granted {
		t.Fatalf("binary reserve on b: %+v %v; want a refusal", g, err)
	}
	// Reserves of several limits (HTTP): r1 settled under its cost
	// (refund) and released, r2 settled over it (charge), r3 left open.
	hcl, err := client.New(strings.Split(serversOf(agents...), ","))
	if err != nil {
		t.Fatal(err)
	}
	defer hcl.Close()
	reserveMany := func(wants ...client.Want) client.Reservation {
		t.Helper()
		r, err := hcl.ReserveMany(ctx, wants, client.ReserveOptions{})
		if err != nil || !r.Granted {
			t.Fatalf("reserve %+v: %+v %v", wants, r, err)
		}
		return r
	}
	var refunded, charged int64
	settle := func(id string, actual ...client.Want) {
		t.Helper()
		s, err := hcl.Settle(ctx, id, actual)
		if err != nil || !s.Settled {
			t.Fatalf("settle %s: %+v %v", id, s, err)
		}
		for _, l := range s.Limits {
			if l.Limit == "a" {
				refunded += l.Refunded
				charged += l.Charged
			}
		}
	}
	r1 := reserveMany(client.Want{Limit: "a", Permits: 4}, client.Want{Limit: "c", Permits: 2})
	settle(r1.ID, client.Want{Limit: "a", Permits: 1})
	if rel, err := hcl.Release(ctx, r1.ID); err != nil || rel.Released != 2 {
		t.Fatalf("release r1: %+v %v", rel, err)
	}
	r2 := reserveMany(client.Want{Limit: "a", Permits: 2})
	settle(r2.ID, client.Want{Limit: "a", Permits: 5})
	reserveMany(client.Want{Limit: "a", Permits: 1}, client.Want{Limit: "c", Permits: 3})
	if refunded != 3 || charged != 3 {
		t.Fatalf("the settlements refunded %d and charged %d on a; want 3 and 3", refunded, charged)
	}

	// Leases: w1 renews at the nodes over the binary protocol, w2 through
	// the relay's batches.
	ports := freePorts(t, 6)
	relayAddr, relayMetrics := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	relay := &testAgent{id: "relay"}
	relay.start(t, bin, nil, "relay", "--listen", relayAddr, "--metrics-addr", relayMetrics, "--servers", serversOf(agents...))
	t.Cleanup(func() { relay.signal(t, syscall.SIGKILL) })
	waitUntil(t, 10*time.Second, "the relay's metrics", func() bool { return relayCounter(hc, relayMetrics, "permitd_relay_batches_total") >= 0 })
	sidecar := []string{fmt.Sprintf("127.0.0.1:%d", ports[2]), fmt.Sprintf("127.0.0.1:%d", ports[3])}
	gossip := []string{fmt.Sprintf("127.0.0.1:%d", ports[4]), fmt.Sprintf("127.0.0.1:%d", ports[5])}
	workers := make([]*testAgent, 2)
	for i := range workers {
		workers[i] = &testAgent{id: fmt.Sprintf("worker%d", i+1)}
		args := []string{"worker", "--group", fmt.Sprintf("g%d", i+1), "--name", fmt.Sprintf("w%d", i+1),
			"--limit", "rl", "--servers", serversOf(agents...),
			"--gossip-addr", gossip[i], "--join", gossip[1-i], "--http-addr", sidecar[i], "--ttl", "1s"}
		if i == 1 {
			args = append(args, "--relay", relayAddr)
		}
		workers[i].start(t, bin, nil, args...)
	}
	superviseSidecars(t, hc, workers, sidecar)
	load := startSidecarLoad(t, hc, sidecar, "rl", "r", 1)
	waitUntil(t, 15*time.Second, "renewals through the relay and directly", func() bool {
		pool, err := hcl.Leases(ctx, "rl")
		return err == nil && pool.Renewals >= 4 && relayCounter(hc, relayMetrics, "permitd_relay_batched_commands_total") >= 3
	})
	load.stop()
	// Stopped, the workers return their leases; then nothing changes.
	for _, w := range workers {
		w.signal(t, syscall.SIGTERM)
	}
	relay.signal(t, syscall.SIGTERM)

	// Every node has applied the same log when their per-limit series
	// agree and their applied indexes are equal.
	var nodes []map[string]float64
	var page []byte
	waitUntil(t, 20*time.Second, "every node's per-limit series equal", func() bool {
		nodes = nodes[:0]
		for _, a := range agents {
			s, body, err := scrapeSeries(hc, a.httpAddr)
			if err != nil {
				return false
			}
			nodes = append(nodes, s)
			page = body
		}
		for _, s := range nodes[1:] {
			if s["permitd_raft_applied_index{}"] != nodes[0]["permitd_raft_applied_index{}"] ||
				!maps.Equal(perLimit(s), perLimit(nodes[0])) {
				return false
			}
		}
		return true
	})
	pool, err := hcl.Leases(ctx, "rl")
	if err != nil {
		t.Fatal(err)
	}

	// The register's numbers are what was sent, on every node.
	want := map[string]float64{
		`permitd_limit_requests_total{limit="a",outcome="granted"}`: 3 + 5 + 3,
		`permitd_limit_requests_total{limit="a",outcome="refused"}`: 0,
		`permitd_limit_permits_total{limit="a",outcome="granted"}`:  3 + 10 + 4 + 2 + 1,
		`permitd_limit_permits_total{limit="a",outcome="refunded"}`: 3,
		`permitd_limit_permits_total{limit="a",outcome="charged"}`:  3,
		`permitd_limit_permits_total{limit="a",outcome="expired"}`:  0,
		`permitd_limit_expired_requests_total{limit="a"}`:           0,
		`permitd_limit_rate_permits_per_second{limit="a"}`:          1000,
		`permitd_limit_open_reservations{limit="a"}`:                1,
		`permitd_limit_wait_seconds_count{limit="a"}`:               11,
		`permitd_limit_requests_total{limit="b",outcome="granted"}`: 1,
		`permitd_limit_requests_total{limit="b",outcome="refused"}`: 3,
		`permitd_limit_rate_permits_per_second{limit="b"}`:          1.0 / 3600,
		`permitd_limit_wait_seconds_count{limit="b"}`:               1,
		`permitd_limit_requests_total{limit="c",outcome="granted"}`: 2,
		`permitd_limit_permits_total{limit="c",outcome="granted"}`:  5,
		`permitd_limit_in_flight_permits{limit="c"}`:                3,
		`permitd_limit_max_in_flight_permits{limit="c"}`:            10,
		`permitd_limit_open_reservations{limit="c"}`:                1,
		`permitd_limit_wait_seconds_count{limit="c"}`:               2,
		`permitd_limit_requests_total{limit="d",outcome="granted"}`: 0,
		`permitd_limit_rate_permits_per_second{limit="d"}`:          7,
		`permitd_limit_rate_permits_per_second{limit="rl"}`:         200,
		`permitd_limit_lease_outstanding_permits{limit="rl"}`:       float64(pool.OutstandingPermits),
		`permitd_limits_exported{}`:                                 5,
		`permitd_limits_unexported{}`:                               2,
	}
	for i, s := range nodes {
		for k, v := range want {
			if got, ok := s[k]; !ok || got != v {
				t.Errorf("%s: %s = %v (present %v), want %v", agents[i].id, k, got, ok, v)
			}
		}
		for _, absent := range []string{`permitd_limit_rate_permits_per_second{limit="c"}`, `permitd_limit_in_flight_permits{limit="a"}`} {
			if _, ok := s[absent]; ok {
				t.Errorf("%s exports %s", agents[i].id, absent)
			}
		}
		for k := range perLimit(s) {
			if strings.Contains(k, `limit="zz`) {
				t.Errorf("%s exports %s, beyond --metrics-max-limits 5", agents[i].id, k)
			}
		}
		for _, g := range []string{"g1", "g2"} {
			if v := s[`permitd_limit_lease_granted_permits_total{group="`+g+`",limit="rl"}`]; v <= 0 {
				t.Errorf("%s: no lease grants to group %s (%v)", agents[i].id, g, v)
			}
		}
	}

	// Each request was counted once, by the node that answered it, under
	// its protocol.
	for k, v := range map[string]float64{
		`permitd_reserve_requests_total{outcome="granted",protocol="http"}`:   3 + 1 + 3,
		`permitd_reserve_requests_total{outcome="refused",protocol="http"}`:   2,
		`permitd_reserve_requests_total{outcome="granted",protocol="binary"}`: 5,
		`permitd_reserve_requests_total{outcome="refused",protocol="binary"}`: 1,
		`permitd_granted_permits_total{protocol="http"}`:                      3 + 1 + 6 + 2 + 4,
		`permitd_granted_permits_total{protocol="binary"}`:                    10,
		`permitd_reserve_wait_seconds_count{protocol="binary"}`:               5,
		`permitd_lease_requests_total{outcome="granted",protocol="http"}`:     0,
		`permitd_lease_requests_total{outcome="granted",protocol="binary"}`:   float64(pool.LeasesOpened + pool.Renewals),
		`permitd_lease_requests_total{outcome="returned",protocol="binary"}`:  float64(pool.Returns),
	} {
		if got := sumOver(nodes, k); got != v {
			t.Errorf("%s summed over the nodes = %v, want %v", k, got, v)
		}
	}

	if promErr != nil {
		t.Logf("promtool not found (Debian package prometheus): the scrape is not linted")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(page))
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
