package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// monitoring_test.go: the Prometheus rules and the Grafana dashboard of
// deploy/ (README "Alerts and dashboard").

const (
	rulesFile     = "deploy/prometheus/permitd-rules.yml"
	rulesTestFile = "deploy/prometheus/permitd-rules.test.yml"
	dashboardFile = "deploy/grafana/permitd-dashboard.json"
)

// needTool returns the path of the Debian prometheus package's tool
// name; it skips the test without it, except under CI
// (PERMITD_REQUIRE_PROMETHEUS=1, set by .ci/run), where it fails.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("PERMITD_REQUIRE_PROMETHEUS") == "1" {
			t.Fatalf("%s not found, and PERMITD_REQUIRE_PROMETHEUS=1: install the prometheus package (apt-get install prometheus)", name)
		}
		t.Skipf("%s not found (apt-get install prometheus)", name)
	}
	return p
}

// TestAlertRules: the rules file passes `promtool check rules`, and its
// unit tests `promtool test rules`; every alert has a severity, a summary
// and a description, fires in a scenario of the test file and is tested
// silent on the healthy deployment of its first group.
func TestAlertRules(t *testing.T) {
	promtool := needTool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile(`(?m)^\s+- alert: `).Split(string(rules), -1)[1:]
	if len(blocks) == 0 {
		t.Fatalf("%s has no alerts", rulesFile)
	}
	groups := strings.Split(string(tests), "\n  - interval: ")
	if len(groups) < 3 {
		t.Fatalf("%s: want a healthy group and scenario groups, found %d groups", rulesTestFile, len(groups)-1)
	}
	healthy, scenarios := groups[1], strings.Join(groups[2:], "\n")
	for _, b := range blocks {
		name := strings.Fields(b)[0]
		for _, want := range []string{"\n        labels:\n          severity: ", "\n          summary: ", "\n          description: "} {
			if !strings.Contains(b, want) {
				t.Errorf("alert %s has no %q", name, strings.TrimSpace(want))
			}
		}
		if !strings.Contains(healthy, "alertname: "+name+", exp_alerts: []}") {
			t.Errorf("alert %s is not tested silent on the healthy deployment (the first group of %s)", name, filepath.Base(rulesTestFile))
		}
		if !regexp.MustCompile(`alertname: ` + name + `\n\s+exp_alerts:\n\s+- exp_labels: `).MatchString(scenarios) {
			t.Errorf("alert %s fires in no scenario of %s", name, filepath.Base(rulesTestFile))
		}
	}
}

// dashboardQueries returns every query of the dashboard file (the panels'
// targets and the variables'), with Grafana's variables replaced as
// Grafana would for job, All limits and templates, and a rate interval of
// rateInterval.
func dashboardQueries(t *testing.T, job, rateInterval string) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	subst := strings.NewReplacer("$job", job, "$limit", ".+", "$template", ".+", "$__rate_interval", rateInterval)
	var qs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, subst.Replace(tg.Expr))
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*), \w+\)$`)
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			m := labelValues.FindStringSubmatch(q["query"].(string))
			if m == nil {
				t.Fatalf("variable query %q is not label_values(SELECTOR, LABEL)", q["query"])
			}
			qs = append(qs, subst.Replace(m[1]))
		}
	}
	return qs
}

// TestDashboardQueriesReturnSeries runs every query of the dashboard
// against a real Prometheus (the Debian package's, on loopback) scraping
// a real cluster: three agents, a relay and a worker sidecar behind it,
// under load (linearized reserves, refusals, a held in-flight permit,
// leased reserves through the sidecar). Each query must return at least
// one series within the test's deadline.
func TestDashboardQueriesReturnSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and Prometheus")
	}
	promBin := needTool(t, "prometheus")
	bin := buildPermitd(t)
	agents := newTestAgents(t, 3)
	for _, a := range agents {
		a.start(t, bin, nil, "agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
			"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(agents))
	}
	ids, httpAddr, _ := indexAgents(agents)
	hc := &http.Client{Timeout: 5 * time.Second}
	leader := waitLeader(t, hc, httpAddr, ids)
	api := "http://" + httpAddr[leader] + "/v1/limits/"
	for _, put := range [][2]string{
		{"api", `{"algorithm":"strict","rate":20,"per":"1s"}`},
		{"inflight", `{"algorithm":"concurrency","max_in_flight":8,"ttl":"60s"}`},
		{"rl", `{"algorithm":"strict","rate":200,"per":"1s"}`},
		{"settled", `{"algorithm":"strict","rate":1,"per":"1s"}`},
	} {
		if code, resp := do(t, hc, "PUT", api+put[0], put[1]); code != 200 && code != 201 {
			t.Fatalf("put limit %s: %d %s", put[0], code, resp)
		}
	}
	if code, resp := do(t, hc, "PUT", api+"rl/lease-policy", `{"leased":true}`); code != 200 {
		t.Fatalf("put lease policy: %d %s", code, resp)
	}
	// A template whose keys the load below creates (its family series).
	if code, resp := do(t, hc, "PUT", "http://"+httpAddr[leader]+"/v1/templates/cust",
		`{"algorithm":"strict","rate":10,"per":"1s","idle":"1m","max_keys":100}`); code != 201 {
		t.Fatalf("put template: %d %s", code, resp)
	}

	ports := freePorts(t, 5)
	relayAddr, relayMetrics := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	sidecar, gossip, promAddr := fmt.Sprintf("127.0.0.1:%d", ports[2]), fmt.Sprintf("127.0.0.1:%d", ports[3]), fmt.Sprintf("127.0.0.1:%d", ports[4])
	rl := &testAgent{id: "relay"}
	rl.start(t, bin, nil, "relay", "--listen", relayAddr, "--metrics-addr", relayMetrics, "--servers", serversOf(agents...))
	w := &testAgent{id: "worker"}
	w.start(t, bin, nil, "worker", "--group", "g1", "--name", "w1", "--limit", "rl", "--servers", serversOf(agents...),
		"--relay", relayAddr, "--gossip-addr", gossip, "--http-addr", sidecar, "--ttl", "1s")
	superviseSidecars(t, hc, []*testAgent{rl, w}, nil)
	superviseSidecars(t, hc, nil, []string{sidecar})

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - {job_name: permitd, static_configs: [{targets: [%s, %s, %s]}]}
  - {job_name: permitd-workers, static_configs: [{targets: [%s]}]}
  - {job_name: permitd-relays, static_configs: [{targets: [%s]}]}
`, agents[0].httpAddr, agents[1].httpAddr, agents[2].httpAddr, sidecar, relayMetrics)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := &testAgent{id: "prometheus"}
	prom.start(t, promBin, nil, "--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", promAddr, "--log.level", "warn")
	t.Cleanup(func() {
		prom.signal(t, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("--- prometheus log:\n%s", prom.log.String())
		}
	})

	// Load until the end of the test: reserves at every agent (20 a
	// second are granted, the rest refused) and on three keys of the
	// template, one in-flight permit held, one reservation settled (a
	// permit refunded), reserves through the sidecar.
	if code, resp := do(t, hc, "POST", "http://"+httpAddr[leader]+"/v1/reserve", `{"limits":[{"name":"inflight","permits":1}]}`); code != 200 {
		t.Fatalf("reserve inflight: %d %s", code, resp)
	}
	var settled struct {
		ID string `json:"reservation_id"`
	}
	code, resp := do(t, hc, "POST", "http://"+httpAddr[leader]+"/v1/reserve", `{"limits":[{"name":"settled","permits":1}],"max_wait":"2s"}`)
	if code != 200 || json.Unmarshal(resp, &settled) != nil {
		t.Fatalf("reserve settled: %d %s", code, resp)
	}
	if code, resp := do(t, hc, "POST", "http://"+httpAddr[leader]+"/v1/reservations/"+settled.ID+"/settle", `{"actual":[{"name":"settled","permits":0}]}`); code != 200 {
		t.Fatalf("settle: %d %s", code, resp)
	}
	startSidecarLoad(t, hc, []string{sidecar}, "rl", "w", 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
					doQuiet(hc, "POST", "http://"+httpAddr[id]+"/v1/limits/api/reserve", `{"permits":1}`)
					if i%10 == 0 {
						doQuiet(hc, "POST", fmt.Sprintf("http://%s/v1/limits/cust:k%d/reserve", httpAddr[id], i/10%3), `{"permits":1}`)
					}
				}
			}
		}()
	}

	queries := dashboardQueries(t, "permitd", "10s")
	pending := map[string]bool{}
	for _, q := range queries {
		pending[q] = true
	}
	start := time.Now()
	var last time.Duration
	deadline := start.Add(25 * time.Second)
	for len(pending) > 0 && time.Now().Before(deadline) {
		for q := range pending {
			if n, err := promSeries(hc, promAddr, q); err == nil && n > 0 {
				delete(pending, q)
				last = time.Since(start)
			} else if err != nil && strings.Contains(err.Error(), "bad_data") {
				t.Errorf("query %s: %v", q, err)
				delete(pending, q)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%d queries, %d returned series, the last of them %v after Prometheus started", len(queries), len(queries)-len(pending), last.Round(time.Second/10))
	for _, q := range queries {
		if pending[q] {
			t.Errorf("no series: %s", q)
		}
	}
}

// promSeries runs the instant query q on the Prometheus at addr and
// returns how many series it answered.
func promSeries(hc *http.Client, addr, q string) (int, error) {
	resp, err := hc.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return len(r.Data.Result), nil
}
