package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIAgentStartChecks runs agents that must refuse to start: on an
// empty data directory with neither --initial-cluster nor --join, and with
// an --initial-cluster that lacks their --id. Each exits 2 at once with one
// line and leaves the data directory as it was.
func TestCLIAgentStartChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildPermitd(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--id", "n1", "--data-dir", dir},
			"--data-dir " + dir + " holds no node state: give --initial-cluster ID=RAFTADDR,... (the same list to every initial node) to start a new cluster, or --join HTTPADDR,... to join a running one"},
		{[]string{"agent", "--id", "n1", "--data-dir", missing}, "--initial-cluster ID=RAFTADDR"},
		{[]string{"agent", "--id", "n4", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1:7001,n2=127.0.0.1:7002"},
			"--initial-cluster n1=127.0.0.1:7001,n2=127.0.0.1:7002 does not contain this node's --id n4"},
		{[]string{"agent", "--id", "n1", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1:7001", "--join", "127.0.0.1:8001"},
			"give --initial-cluster or --join, not both"},
		{[]string{"agent", "--id", "n1", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1"}, `--initial-cluster item "n1=127.0.0.1": "127.0.0.1" is not HOST:PORT`},
		{[]string{"agent", "--id", "n1", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1:1,n1=127.0.0.1:2"}, `ID "n1" given twice`},
		{[]string{"agent", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1:1"}, "--id and --data-dir are required"},
		{[]string{"agent", "--id", "n1", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1:1", "--election-timeout", "100ms"},
			"--election-timeout 100ms is shorter than --heartbeat-timeout 500ms"},
		{[]string{"agent", "--id", "n1", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1:1", "--heartbeat-timeout", "1ms"},
			`--heartbeat-timeout "1ms" is below the minimum; allowed: a Go duration string >= 5ms`},
		{[]string{"agent", "--id", "n1", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1:1", "--log-level", "loud"},
			`--log-level "loud" is not allowed; allowed: trace, debug, info, warn or error`},
		{[]string{"agent", "--id", "n1", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1:1", "--log-format", "xml"},
			`--log-format "xml" is not allowed; allowed: text or json`},
		{[]string{"agent", "--id", "n1", "--data-dir", dir, "--initial-cluster", "n1=127.0.0.1:1", "--test-break-timeline"},
			"needs --test-hooks"},
	} {
		r := runCLI(t, bin, nil, c.args...)
		wantUsageError(t, r, c.want)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("the data directory changed: %v %v", entries, err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("the missing data directory was created: %v", err)
	}
	// A failure after the settings were accepted (here: the HTTP port is
	// the raft port, already taken) exits 1 with one line, in either log
	// format.
	addr := "127.0.0.1:" + fmt.Sprint(freePorts(t, 1)[0])
	for _, format := range []string{"text", "json"} {
		r := runCLI(t, bin, nil, "agent", "--id", "n1", "--data-dir", t.TempDir(), "--initial-cluster", "n1="+addr,
			"--raft-addr", addr, "--http-addr", addr, "--log-format", format)
		if r.code != 1 || !strings.Contains(r.stderr, "listen on --http-addr "+addr) {
			t.Fatalf("port in use, %s logs: %v", format, r)
		}
		last := r.stderr[strings.LastIndex(strings.TrimSuffix(r.stderr, "\n"), "\n")+1:]
		if format == "json" && !json.Valid([]byte(last)) || format == "text" && !strings.HasPrefix(last, "permitd agent: start: ") {
			t.Fatalf("port in use, %s logs: last line %q", format, last)
		}
	}
}

// TestCLIConfigAndEnvironment checks the settings of the agent and the
// worker from a config file and PERMITD_* variables with --validate
// (which prints the effective settings and exits): the precedence flags >
// environment > file > defaults, and one-line errors naming the file,
// line and key or the variable.
func TestCLIConfigAndEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildPermitd(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.json")
	writeFile(t, cfg, `{
  "id": "n1",
  "data-dir": "`+filepath.Join(dir, "data")+`",
  "initial-cluster": ["n1=127.0.0.1:7101", "n2=127.0.0.1:7102"],
  "http-addr": "127.0.0.1:9001",
  "raft-addr": "127.0.0.1:7101",
  "heartbeat-timeout": "200ms",
  "max-batch": 64,
  "pprof": true
}
`)
	settings := func(t *testing.T, r cliResult) map[string]any {
		t.Helper()
		wantCode(t, r, 0)
		var m map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
			t.Fatalf("--validate output is not JSON: %v\n%v", err, r)
		}
		return m
	}

	t.Run("precedence", func(t *testing.T) {
		m := settings(t, runCLI(t, bin, nil, "agent", "--config", cfg, "--validate"))
		if m["http-addr"] != "127.0.0.1:9001" || m["heartbeat-timeout"] != "200ms" || m["max-batch"] != 64.0 || m["pprof"] != true ||
			m["initial-cluster"] != "n1=127.0.0.1:7101,n2=127.0.0.1:7102" || m["election-timeout"] != "500ms" || m["log-level"] != "info" {
			t.Fatalf("file and defaults: %v", m)
		}
		env := []string{"PERMITD_HTTP_ADDR=127.0.0.1:9002", "PERMITD_MAX_BATCH=32"}
		m = settings(t, runCLI(t, bin, env, "agent", "--config", cfg, "--validate"))
		if m["http-addr"] != "127.0.0.1:9002" || m["max-batch"] != 32.0 || m["heartbeat-timeout"] != "200ms" {
			t.Fatalf("environment over file: %v", m)
		}
		m = settings(t, runCLI(t, bin, env, "agent", "--config", cfg, "--http-addr", "127.0.0.1:9003", "--validate"))
		if m["http-addr"] != "127.0.0.1:9003" || m["max-batch"] != 32.0 {
			t.Fatalf("flag over environment: %v", m)
		}
		// PERMITD_CONFIG names the file; settings by environment alone.
		m = settings(t, runCLI(t, bin, []string{"PERMITD_CONFIG=" + cfg}, "agent", "--validate"))
		if m["id"] != "n1" || m["http-addr"] != "127.0.0.1:9001" {
			t.Fatalf("PERMITD_CONFIG: %v", m)
		}
		m = settings(t, runCLI(t, bin, []string{"PERMITD_ID=n2", "PERMITD_DATA_DIR=" + dir, "PERMITD_INITIAL_CLUSTER=n2=127.0.0.1:7102",
			"PERMITD_TEST_HOOKS=true"}, "agent", "--validate"))
		if m["id"] != "n2" || m["test-hooks"] != true || m["http-addr"] != "127.0.0.1:8001" {
			t.Fatalf("environment alone: %v", m)
		}
		// --validate's output is a config file giving the same settings.
		r := runCLI(t, bin, env, "agent", "--config", cfg, "--validate")
		out := filepath.Join(dir, "out.json")
		writeFile(t, out, r.stdout)
		if r2 := runCLI(t, bin, nil, "agent", "--config", out, "--validate"); r2.stdout != r.stdout {
			t.Fatalf("round trip:\n%s\n%s", r.stdout, r2.stdout)
		}
	})

	t.Run("an unknown variable is a warning", func(t *testing.T) {
		r := runCLI(t, bin, []string{"PERMITD_GROUP=g1"}, "agent", "--config", cfg, "--validate")
		wantCode(t, r, 0)
		if r.stderr != "permitd agent: warning: ignoring PERMITD_GROUP: permitd agent has no setting --group\n" {
			t.Fatalf("stderr %q", r.stderr)
		}
	})

	t.Run("errors", func(t *testing.T) {
		bad := func(name, text string) string {
			p := filepath.Join(dir, name)
			writeFile(t, p, text)
			return p
		}
		base := `"id": "n1", "data-dir": "` + dir + `", "initial-cluster": "n1=127.0.0.1:7101"`
		for _, c := range []struct {
			env  []string
			args []string
			want string
		}{
			{nil, []string{"--config", bad("unknown.json", "{\n"+base+",\n  \"heartbeat_timeout\": \"1s\"\n}")},
				`config ` + dir + `/unknown.json:3: key "heartbeat_timeout": unknown key (did you mean "heartbeat-timeout"?); keys are the flag names of permitd agent`},
			{nil, []string{"--config", bad("type.json", "{"+base+",\n\"max-batch\": \"lots\"}")},
				`type.json:2: key "max-batch": want an integer, got the string "lots"`},
			{nil, []string{"--config", bad("number.json", "{"+base+",\n\"heartbeat-timeout\": 5}")},
				`number.json:2: key "heartbeat-timeout": want a duration string such as "500ms" or "2s", got the number 5 (a duration needs a unit, as in "5s")`},
			{nil, []string{"--config", bad("value.json", "{"+base+",\n\"heartbeat-timeout\": \"5\"}")},
				`value.json:2: key "heartbeat-timeout": "5" is not a duration: a number needs a unit`},
			{nil, []string{"--config", bad("range.json", "{"+base+",\n\n\"max-batch\": 0}")},
				`range.json:3: key "max-batch": 0 is out of range; allowed: an integer from 1 to 65536`},
			{nil, []string{"--config", bad("bool.json", "{"+base+",\n\"pprof\": \"yes\"}")}, `bool.json:2: key "pprof": want true or false, got the string "yes"`},
			{nil, []string{"--config", bad("dup.json", "{"+base+",\n\"id\": \"n2\"}")}, `dup.json: line 2: key "id" given twice (first on line 1)`},
			{nil, []string{"--config", bad("syntax.json", "{"+base+",\n\"pprof\": true,\n}")}, `syntax.json:3: invalid JSON`},
			{nil, []string{"--config", bad("array.json", `["id", "n1"]`)}, `array.json: want a JSON object of settings`},
			{nil, []string{"--config", bad("empty.json", "")}, `empty.json: the file is empty`},
			{nil, []string{"--config", bad("self.json", "{"+base+",\n\"config\": \"x.json\"}")}, `self.json:2: key "config": --config can be given only on the command line`},
			{nil, []string{"--config", bad("list.json", "{"+base+",\n\"join\": [\"127.0.0.1:8001\", 3]}")}, `list.json:2: key "join": want a string or an array of strings, got an array with the number 3`},
			{nil, []string{"--config", filepath.Join(dir, "nosuch.json")}, "--config: open " + dir + "/nosuch.json: no such file or directory"},
			{[]string{"PERMITD_HEARTBEAT_TIMEOUT=5"}, []string{"--config", cfg}, `environment variable PERMITD_HEARTBEAT_TIMEOUT: "5" is not a duration`},
			{[]string{"PERMITD_PPROF=maybe"}, []string{"--config", cfg}, `environment variable PERMITD_PPROF: "maybe" is not a boolean`},
			{[]string{"PERMITD_CONFIG=" + filepath.Join(dir, "nosuch.json")}, nil, "--config: open "},
		} {
			r := runCLI(t, bin, c.env, append(append([]string{"agent"}, c.args...), "--validate")...)
			wantUsageError(t, r, c.want)
		}
	})

	t.Run("worker", func(t *testing.T) {
		wcfg := filepath.Join(dir, "worker.json")
		writeFile(t, wcfg, `{"group": "batch", "limit": "llm", "servers": ["127.0.0.1:8001", "127.0.0.1:8002"], "ttl": "2s", "weight": 3}`)
		m := settings(t, runCLI(t, bin, []string{"PERMITD_WEIGHT=5"}, "worker", "--config", wcfg, "--validate", "--gossip-addr", "127.0.0.1:7950"))
		if m["group"] != "batch" || m["servers"] != "127.0.0.1:8001,127.0.0.1:8002" || m["ttl"] != "2s" || m["weight"] != 5.0 ||
			m["gossip-addr"] != "127.0.0.1:7950" || m["log-level"] != "info" {
			t.Fatalf("worker settings: %v", m)
		}
		wantUsageError(t, runCLI(t, bin, nil, "worker", "--config", wcfg, "--validate", "--ttl", "10ms"),
			`--ttl "10ms" is out of range; allowed: a Go duration string from 100ms to 1m0s`)
		wantUsageError(t, runCLI(t, bin, nil, "worker", "--config", wcfg, "--validate", "--margin", "1500ms"), "margin")
		// The renewal period and the register-call timeout reach the
		// worker's config, which checks them against the TTL.
		m = settings(t, runCLI(t, bin, nil, "worker", "--config", wcfg, "--validate", "--renew-every", "1500ms", "--register-timeout", "700ms"))
		if m["renew-every"] != "1.5s" || m["register-timeout"] != "700ms" || m["unreachable-after"] != "3s" {
			t.Fatalf("worker settings: renew-every %v, register-timeout %v, unreachable-after %v (default 3s)", m["renew-every"], m["register-timeout"], m["unreachable-after"])
		}
		if m = settings(t, runCLI(t, bin, nil, "worker", "--config", wcfg, "--validate", "--unreachable-after", "10s")); m["unreachable-after"] != "10s" {
			t.Fatalf("worker settings: unreachable-after %v, want 10s", m["unreachable-after"])
		}
		wantUsageError(t, runCLI(t, bin, nil, "worker", "--config", wcfg, "--validate", "--unreachable-after", "0s"), "--unreachable-after")
		wantUsageError(t, runCLI(t, bin, nil, "worker", "--config", wcfg, "--validate", "--renew-every", "1900ms"),
			"renew every 1.9s with TTL 2s and margin 200ms (allowed: 0 < renew every < TTL - margin")
		writeFile(t, wcfg, `{"group": "batch", "limit": "llm", "servers": "127.0.0.1:8001", "wieght": 3}`)
		wantUsageError(t, runCLI(t, bin, nil, "worker", "--config", wcfg), `key "wieght": unknown key (did you mean "weight"?)`)
	})
}
