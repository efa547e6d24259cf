package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStrangerJoinNeverVotes: the attack on three agents with TLS
// and tokens, run as an attacker would. A process holding a leaked admin
// token and a node certificate of another CA (its CA file also trusts
// the cluster's CA, so that its join over the API goes through) starts
// with --join: it is added, as a non-voter, and never votes; `permitd
// status` exits 1 and shows it with the leader's reason (its certificate).
// SIGKILL of a follower leaves two of three voters, and the cluster still
// commits (with the stranger a voter, two of four could not). A real
// fourth node then joins and is promoted.
func TestStrangerJoinNeverVotes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	dir, strange := t.TempDir(), t.TempDir()
	wantCode(t, runCLI(t, bin, nil, "certs", "create", "--out", dir, "--nodes", "n1,n2,n3,n4"), exitOK)
	wantCode(t, runCLI(t, bin, nil, "certs", "create", "--out", strange, "--nodes", "n9"), exitOK)
	file := func(name string) string { return filepath.Join(dir, name) }
	ours, err := os.ReadFile(file("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile(filepath.Join(strange, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(strange, "both-cas.crt")
	if err := os.WriteFile(bundle, append(theirs, ours...), 0o600); err != nil {
		t.Fatal(err)
	}
	secret, line := newToken(t, bin, "--role", "admin", "--name", "ops")
	tokenFile := file("tokens")
	if err := os.WriteFile(tokenFile, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PERMITD_TOKEN=" + secret}

	agents := newTestAgents(t, 5) // n1-n3 the cluster, n4 a real joiner, n5 the stranger (n9)
	cluster, n4, stranger := agents[:3], agents[3], agents[4]
	stranger.id = "n9"
	tlsOf := func(a *testAgent) []string {
		return []string{"--tls-cert", file("node-" + a.id + ".crt"), "--tls-key", file("node-" + a.id + ".key"), "--tls-ca", file("ca.crt"), "--token-file", tokenFile}
	}
	for _, a := range cluster {
		a.start(t, bin, nil, append([]string{"agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
			"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(cluster)}, tlsOf(a)...)...)
	}
	all := serversOf(cluster...)
	cli := func(args ...string) cliResult {
		return runCLI(t, bin, env, append(args, "--servers", all, "--tls-ca", file("ca.crt"))...)
	}
	wantCode(t, cli("status", "--wait", "30s"), exitOK)
	wantCode(t, cli("limits", "put", "api", "--algorithm", "strict", "--rate", "10", "--per", "1s"), exitOK)

	stranger.start(t, bin, env, "agent", "--id", stranger.id, "--data-dir", stranger.dataDir, "--raft-addr", stranger.raftAddr,
		"--http-addr", stranger.httpAddr, "--join", all, "--tls-cert", filepath.Join(strange, "node-n9.crt"),
		"--tls-key", filepath.Join(strange, "node-n9.key"), "--tls-ca", bundle)
	type member struct {
		ID    string `json:"id"`
		Voter bool   `json:"voter"`
	}
	show := func() (members map[string]member, leader string) {
		t.Helper()
		r := cli("cluster", "show", "--json")
		var c struct {
			LeaderID string   `json:"leader_id"`
			Servers  []member `json:"servers"`
		}
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &c) != nil {
			t.Fatalf("cluster show: %v", r)
		}
		members = map[string]member{}
		for _, s := range c.Servers {
			members[s.ID] = s
		}
		return members, c.LeaderID
	}
	waitUntil(t, 30*time.Second, "the stranger's join", func() bool { m, _ := show(); _, ok := m["n9"]; return ok })
	if m, _ := show(); m["n9"].Voter {
		t.Fatalf("the stranger joined as a voter: %+v", m)
	}
	var status cliResult
	waitUntil(t, 30*time.Second, "permitd status to report the stranger with its certificate", func() bool {
		status = cli("status")
		return status.code == exitFailure && strings.Contains(status.stderr, "certificate signed by unknown authority")
	})
	t.Logf("status with a stranger pending:\n%s%s", status.stdout, status.stderr)
	if !strings.Contains(status.stdout, "Joined, not voting yet") || !strings.Contains(status.stdout, "unreachable") ||
		!strings.Contains(status.stderr, "n9 (raft "+stranger.raftAddr+") joined and does not vote yet") ||
		!strings.Contains(status.stderr, "permitd cluster remove n9") || strings.Count(status.stderr, "\n") != 1 {
		t.Errorf("status with a stranger pending: %v", status)
	}
	_, leader := show()

	// A follower dies: two of three voters still commit.
	for _, a := range cluster {
		if a.id != leader {
			a.signal(t, syscall.SIGKILL)
			break
		}
	}
	if r := cli("limits", "put", "after-kill", "--algorithm", "strict", "--rate", "10", "--per", "1s", "--timeout", "20s"); r.code != exitOK {
		t.Fatalf("a commit with one of three voters down and a stranger pending: %v", r)
	}

	// A real node joins and is promoted once caught up.
	n4.start(t, bin, env, append([]string{"agent", "--id", n4.id, "--data-dir", n4.dataDir, "--raft-addr", n4.raftAddr,
		"--http-addr", n4.httpAddr, "--join", all}, tlsOf(n4)...)...)
	waitUntil(t, 30*time.Second, "n4 to be promoted", func() bool { m, _ := show(); return m["n4"].Voter })
	if m, _ := show(); m["n9"].Voter {
		t.Errorf("the stranger became a voter")
	}
	if !strings.Contains(n4.log.String(), "joined cluster") {
		t.Errorf("n4 did not log its join")
	}
}
