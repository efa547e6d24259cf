package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWrongPortMessages: the CLI's first-hour mistakes with addresses
// each name the cause and the fix, for status as for the other commands:
//   - status given a plain node's raft port: it resets the connection, as
//     a raft port does; give the nodes' --http-addr;
//   - a TLS client (PERMITD_TLS_CA in the environment) at a plain HTTP
//     port: drop --tls-ca, naming the variable it came from;
//   - plain HTTP at a TLS node's API port: the port speaks TLS;
//   - a TLS client without a certificate at a TLS node's raft port
//     (mutual TLS): it asks for a client certificate (or resets the
//     connection, if the reset overtakes the alert), as a raft port
//     does; give the --http-addr.
func TestWrongPortMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	file := certsOfN1(t, bin)
	plain, _ := startLeadingLoneAgent(t, bin)
	secure := startLoneAgent(t, bin, "--tls-cert", file("node-n1.crt"), "--tls-key", file("node-n1.key"), "--tls-ca", file("ca.crt"))
	wantCode(t, runCLI(t, bin, nil, "status", "--servers", secure.httpAddr, "--tls-ca", file("ca.crt"), "--wait", "20s"), exitOK)

	caEnv := []string{"PERMITD_TLS_CA=" + file("ca.crt")}
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		mention []string
	}{
		{"status at a raft port", nil, []string{"status", "--servers", plain.raftAddr},
			[]string{plain.raftAddr + " reset the connection without an HTTP answer, as a node's raft port does", "--http-addr"}},
		{"status, TLS from the environment, at a plain port", caEnv, []string{"status", "--servers", plain.httpAddr},
			[]string{plain.httpAddr + " speaks plain HTTP, not TLS: drop --tls-ca (it came from $PERMITD_TLS_CA: unset it)"}},
		{"limits list, TLS from the environment, at a plain port", caEnv, []string{"limits", "list", "--servers", plain.httpAddr},
			[]string{plain.httpAddr + " speaks plain HTTP, not TLS: drop --tls-ca (it came from $PERMITD_TLS_CA: unset it)"}},
		{"limits list, --tls-ca, at a plain port", nil, []string{"limits", "list", "--servers", plain.httpAddr, "--tls-ca", file("ca.crt")},
			[]string{plain.httpAddr + " speaks plain HTTP, not TLS: drop --tls-ca"}},
		{"status in plain HTTP at a TLS port", nil, []string{"status", "--servers", secure.httpAddr},
			[]string{"this port speaks TLS, not plain HTTP", "--tls-ca"}},
		{"status at a mutual TLS raft port", caEnv, []string{"status", "--servers", secure.raftAddr},
			[]string{secure.raftAddr + " ", "as a node's raft port", "--http-addr"}},
		{"limits list at a mutual TLS raft port", caEnv, []string{"limits", "list", "--servers", secure.raftAddr},
			[]string{secure.raftAddr + " ", "as a node's raft port", "--http-addr"}},
	} {
		r := runCLI(t, bin, tc.env, append(tc.args, "--timeout", "3s")...)
		if r.code == exitOK {
			t.Errorf("%s: exit 0: %v", tc.name, r)
			continue
		}
		for _, m := range tc.mention {
			if !strings.Contains(r.stderr, m) {
				t.Errorf("%s: stderr does not mention %q:\n%v", tc.name, m, r)
			}
		}
	}
}

// TestNoLeaderMessages: one node of three started (no quorum), --servers
// naming it and a node not started: a command fails naming the cause (the
// cluster has no leader, no quorum?, permitd status), not the refused
// connection of the last attempt, and also when its own --timeout runs
// out during an attempt after a 503 said so; a reserve whose max wait
// outlasts an attempt's default timeout (5 s) gets that 503 (the node
// answers after max wait plus a second).
func TestNoLeaderMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	agents := newTestAgents(t, 3)
	a := agents[0]
	a.start(t, bin, nil, "agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
		"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(agents))
	hc := &http.Client{Timeout: 2 * time.Second}
	waitUntil(t, 20*time.Second, a.id+" to answer", func() bool {
		code, _ := doQuiet(hc, "GET", "http://"+a.httpAddr+"/v1/status", "")
		return code == http.StatusOK
	})
	servers := serversOf(a, agents[1])
	rs := runParallel(t, bin, [][]string{
		{"limits", "list", "--servers", servers},
		{"reserve", "api", "--servers", servers, "--timeout", "1500ms"},
		{"reserve", "api", "--servers", servers, "--max-wait", "4500ms", "--timeout", "2s"},
	})
	for i, r := range rs {
		if r.code != exitFailure || !strings.Contains(r.stderr, "the cluster has no leader (no quorum? `permitd status` shows which nodes answer)") ||
			strings.Contains(r.stderr, "context deadline exceeded") {
			t.Errorf("without a leader: want exit 1 naming the missing leader, no raw context error: %v", r)
		}
		if (i > 0) != strings.Contains(r.stderr, "then --timeout ran out") {
			t.Errorf("without a leader: --timeout named only when it ran out: %v", r)
		}
	}
}

// certsOfN1 makes a CA, a certificate for node n1 and its key with
// `permitd certs create` in a fresh directory, and returns the path of a
// file there ("ca.crt", "node-n1.crt", "node-n1.key").
func certsOfN1(t *testing.T, bin string) func(name string) string {
	t.Helper()
	dir := t.TempDir()
	wantCode(t, runCLI(t, bin, nil, "certs", "create", "--out", dir, "--nodes", "n1"), exitOK)
	return func(name string) string { return filepath.Join(dir, name) }
}
