package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSnapshotSaveRestoreCLI: `permitd snapshot save` from a running
// cluster, `permitd snapshot restore` into three empty directories, and a
// new cluster started on them keeps every limit (with its counters), the
// lease and the last grant.
func TestSnapshotSaveRestoreCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildPermitd(t)
	hc := &http.Client{Timeout: 5 * time.Second}
	run := func(args ...string) cliResult { t.Helper(); return runCLI(t, bin, nil, args...) }
	// startCluster starts agents on their data directories (with
	// --initial-cluster unless seeded) and waits for a leader.
	startCluster := func(agents []*testAgent, seeded bool) {
		t.Helper()
		ids := make([]string, len(agents))
		httpAddr := map[string]string{}
		for i, a := range agents {
			args := []string{"agent", "--id", a.id, "--raft-addr", a.raftAddr, "--http-addr", a.httpAddr, "--data-dir", a.dataDir}
			if !seeded {
				args = append(args, "--initial-cluster", initialCluster(agents))
			}
			a.start(t, bin, nil, args...)
			ids[i], httpAddr[a.id] = a.id, a.httpAddr
		}
		waitLeader(t, hc, httpAddr, ids)
	}

	old := newTestAgents(t, 3)
	startCluster(old, false)
	list := serversOf(old...)
	api := "http://" + old[0].httpAddr
	for _, put := range []struct{ name, body string }{
		{"slow", `{"algorithm":"strict","rate":1,"per":"1m","max_reserved":3,"expiry":"1h"}`},
		{"hot", `{"algorithm":"strict","rate":1000,"per":"1s"}`},
	} {
		if code, b := do(t, hc, "PUT", api+"/v1/limits/"+put.name, put.body); code != 201 {
			t.Fatalf("put %s: %d %s", put.name, code, b)
		}
	}
	if code, b := do(t, hc, "PUT", api+"/v1/limits/hot/lease-policy", `{"leased":true}`); code != 200 {
		t.Fatalf("lease policy: %d %s", code, b)
	}
	if code, b := do(t, hc, "POST", api+"/v1/limits/hot/lease", `{"holder":"w1","group":"g","demand_per_sec":5,"ttl":"60s"}`); code != 200 {
		t.Fatalf("lease: %d %s", code, b)
	}
	for range 2 {
		wantCode(t, run("reserve", "slow", "--max-wait", "1h", "--servers", list), exitOK)
	}
	file := filepath.Join(t.TempDir(), "backup.snap")
	if r := run("snapshot", "save", file, "--servers", list); r.code != exitOK || !strings.Contains(r.stdout, `"applied_index"`) {
		t.Fatalf("snapshot save: %v", r)
	}
	wantUsageError(t, run("snapshot", "restore", file, "--data-dir", t.TempDir()), "--data-dir and --id are required")
	wantUsageError(t, run("snapshot", "restore", file, "--data-dir", t.TempDir(), "--id", "x", "--raft-addr", "127.0.0.1:1", "extra"), `unexpected argument "extra"`)
	for _, a := range old {
		a.signal(t, syscall.SIGKILL)
	}

	// A new cluster on other addresses, seeded from the file.
	seeded := newTestAgents(t, 3)
	for _, a := range seeded {
		r := run("snapshot", "restore", file, "--data-dir", a.dataDir, "--id", a.id, "--initial-cluster", initialCluster(seeded))
		if r.code != exitOK || !strings.Contains(r.stdout, `"applied_index"`) {
			t.Fatalf("snapshot restore %s: %v", a.id, r)
		}
	}
	startCluster(seeded, true)
	api = "http://" + seeded[1].httpAddr
	var slow struct {
		GrantedRequests uint64 `json:"granted_requests"`
		IntervalNanos   int64  `json:"interval_ns"`
	}
	code, b := do(t, hc, "GET", api+"/v1/limits/slow", "")
	if code != 200 || json.Unmarshal(b, &slow) != nil || slow.GrantedRequests != 2 || slow.IntervalNanos != int64(time.Minute) {
		t.Fatalf("limit slow after the restore: %d %s", code, b)
	}
	code, b = do(t, hc, "GET", api+"/v1/limits/hot/leases", "")
	if code != 200 || !strings.Contains(string(b), `"holder":"w1"`) {
		t.Fatalf("leases after the restore: %d %s", code, b)
	}
	// The last grant is kept: the next permit of "slow" waits over a minute.
	r := run("reserve", "slow", "--max-wait", "1h", "--servers", serversOf(seeded...))
	var g struct {
		WaitNs int64 `json:"wait_ns"`
	}
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &g) != nil || g.WaitNs < int64(time.Minute) {
		t.Fatalf("reserve after the restore (want a wait of over a minute): %v", r)
	}
}
