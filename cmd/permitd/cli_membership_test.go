package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLIMembership runs the binary as an operator would through the
// membership mistakes and failures: a join that would move a member is
// refused and changes nothing; a removed node knows it (503 at once,
// /readyz fails, state "removed"); without a leader a reserve answers 503
// with Retry-After within its max_wait plus a second, not after the
// request's whole timeout; a misspelt limit gets one clean message with a
// suggestion.
func TestCLIMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a 3-node cluster")
	}
	bin := buildPermitd(t)
	agents := newTestAgents(t, 3)
	for _, a := range agents {
		a.start(t, bin, nil, "agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
			"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(agents))
	}
	all := serversOf(agents...)
	cli := func(t *testing.T, args ...string) cliResult {
		t.Helper()
		return runCLI(t, bin, nil, args...)
	}
	hc := &http.Client{Timeout: 20 * time.Second}
	wantCode(t, cli(t, "status", "--wait", "20s", "--servers", all), exitOK)
	wantCode(t, cli(t, "limits", "put", "api", "--algorithm", "strict", "--rate", "10", "--expiry", "1s", "--servers", all), exitOK)

	// show returns the cluster's membership as "id=raftaddr" items.
	show := func(t *testing.T) (members []string, leaderID string) {
		t.Helper()
		r := cli(t, "cluster", "show", "--json", "--servers", all)
		var c struct {
			LeaderID string `json:"leader_id"`
			Servers  []struct {
				ID       string `json:"id"`
				RaftAddr string `json:"raft_addr"`
			} `json:"servers"`
		}
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &c) != nil {
			t.Fatalf("cluster show: %v", r)
		}
		for _, s := range c.Servers {
			members = append(members, s.ID+"="+s.RaftAddr)
		}
		return members, c.LeaderID
	}

	t.Run("a misspelt limit: one message, no package names, a suggestion", func(t *testing.T) {
		r := cli(t, "reserve", "apo", "--servers", all)
		if r.code != exitFailure || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `limit "apo" not found`) ||
			!strings.Contains(r.stderr, `did you mean "api"?`) || strings.Count(r.stderr, "not found") != 1 {
			t.Fatalf("reserve of a misspelt limit: %v", r)
		}
		for _, pkg := range []string{"node:", "fsm:", "transport:", "client:", "bucket:"} {
			if strings.Contains(r.stderr, pkg) {
				t.Errorf("the message names the package %q: %q", pkg, r.stderr)
			}
		}
	})

	t.Run("a join that would move a member is refused and changes nothing", func(t *testing.T) {
		before, _ := show(t)
		r := cli(t, "cluster", "join", agents[0].id, "127.0.0.1:1", "--servers", all)
		if r.code != exitUsage || !strings.Contains(r.stderr, `server "n1" is already a member of the cluster at `+agents[0].raftAddr) {
			t.Fatalf("join with a member's ID at another address: %v", r)
		}
		r = cli(t, "cluster", "join", "n9", agents[1].raftAddr, "--servers", all)
		if r.code != exitUsage || !strings.Contains(r.stderr, "raft address "+agents[1].raftAddr+` is already the address of member "n2"`) {
			t.Fatalf("join with a member's address: %v", r)
		}
		if after, _ := show(t); strings.Join(after, ",") != strings.Join(before, ",") {
			t.Fatalf("membership changed by refused joins: %v → %v", before, after)
		}
	})

	var removed *testAgent
	t.Run("a removed node knows it", func(t *testing.T) {
		_, leaderID := show(t)
		for _, a := range agents {
			if a.id != leaderID {
				removed = a
			}
		}
		wantCode(t, cli(t, "cluster", "remove", removed.id, "--servers", all), exitOK)
		waitUntil(t, 10*time.Second, removed.id+" to know it was removed", func() bool {
			_, b := doQuiet(hc, "GET", "http://"+removed.httpAddr+"/v1/status", "")
			return strings.Contains(string(b), `"state":"removed"`)
		})
		if code, b := doQuiet(hc, "GET", "http://"+removed.httpAddr+"/readyz", ""); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz of a removed node: %d %s", code, b)
		}
		sent := time.Now()
		code, b := doQuiet(hc, "POST", "http://"+removed.httpAddr+"/v1/limits/api/reserve", `{"permits":1,"max_wait":"10s"}`)
		// At once: not after max_wait, nor after the request's timeout
		// (a removed node used to hang 10 s before its 503).
		if took := time.Since(sent); code != http.StatusServiceUnavailable || !strings.Contains(string(b), "removed from the cluster") || took > 5*time.Second {
			t.Errorf("reserve on a removed node: %d %s after %v", code, b, took)
		}
	})

	t.Run("without a leader a reserve answers 503 within max_wait plus a second", func(t *testing.T) {
		var up []*testAgent
		for _, a := range agents {
			if a != removed {
				up = append(up, a)
			}
		}
		_, leaderID := show(t)
		var survivor *testAgent
		for _, a := range up {
			if a.id == leaderID {
				a.signal(t, syscall.SIGKILL)
			} else {
				survivor = a
			}
		}
		if survivor == nil || len(up) != 2 {
			t.Fatalf("want two voters, one of them the leader %s: %v", leaderID, up)
		}
		waitUntil(t, 10*time.Second, survivor.id+" to know no leader", func() bool {
			_, b := doQuiet(hc, "GET", "http://"+survivor.httpAddr+"/v1/status", "")
			return strings.Contains(string(b), `"leader_id":""`)
		})
		req, err := http.NewRequest("POST", "http://"+survivor.httpAddr+"/v1/limits/api/reserve", strings.NewReader(`{"permits":1,"max_wait":"0s"}`))
		if err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// LeaderWait is 1 s; the slack covers a loaded machine. Before,
		// the answer came after the request's whole timeout (10 s).
		if took := time.Since(sent); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || took > 5*time.Second {
			t.Errorf("reserve without a leader: %d, Retry-After %q, after %v", resp.StatusCode, resp.Header.Get("Retry-After"), took)
		}
		r := cli(t, "reserve", "api", "--max-wait", "0s", "--servers", survivor.httpAddr)
		if r.code != exitFailure || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "503") {
			t.Errorf("permitd reserve without a leader: %v", r)
		}
	})
}
