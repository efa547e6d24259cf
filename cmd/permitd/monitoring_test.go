package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
