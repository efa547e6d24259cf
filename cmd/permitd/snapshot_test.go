package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
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
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("permitd %v: %v", args, err)
		}
		return code, out.String(), errb.String()
	}
	startCluster := func(prefix string, seeded map[string]string) (map[string]string, []string, func()) {
		ports := freePorts(t, 6)
		ids := []string{prefix + "1", prefix + "2", prefix + "3"}
		raftAddr, httpAddr := map[string]string{}, map[string]string{}
		var initial []string
		for i, id := range ids {
			raftAddr[id] = fmt.Sprintf("127.0.0.1:%d", ports[2*i])
			httpAddr[id] = fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])
			initial = append(initial, id+"="+raftAddr[id])
		}
		if seeded != nil {
			for _, id := range ids {
				code, out, errs := run("snapshot", "restore", seeded["file"], "--data-dir", seeded[id], "--id", id, "--initial-cluster", strings.Join(initial, ","))
				if code != 0 || !strings.Contains(out, `"applied_index"`) {
					t.Fatalf("snapshot restore %s: exit %d\n%s%s", id, code, out, errs)
				}
			}
		}
		var procs []*exec.Cmd
		for _, id := range ids {
			args := []string{"agent", "--id", id, "--raft-addr", raftAddr[id], "--http-addr", httpAddr[id]}
			if seeded == nil {
				args = append(args, "--data-dir", t.TempDir(), "--initial-cluster", strings.Join(initial, ","))
			} else {
				args = append(args, "--data-dir", seeded[id])
			}
			cmd := exec.Command(bin, args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			procs = append(procs, cmd)
		}
		stop := func() {
			for _, p := range procs {
				_ = p.Process.Signal(syscall.SIGKILL)
				_ = p.Wait()
			}
		}
		t.Cleanup(stop)
		waitLeader(t, hc, httpAddr, ids)
		var servers []string
		for _, id := range ids {
			servers = append(servers, httpAddr[id])
		}
		return httpAddr, servers, stop
	}

	httpAddr, servers, stop := startCluster("s", nil)
	list := strings.Join(servers, ",")
	api := "http://" + httpAddr["s1"]
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
		if code, _, errs := run("reserve", "slow", "--max-wait", "1h", "--servers", list); code != 0 {
			t.Fatalf("reserve: exit %d %s", code, errs)
		}
	}
	file := filepath.Join(t.TempDir(), "backup.snap")
	code, out, errs := run("snapshot", "save", file, "--servers", list)
	if code != 0 || !strings.Contains(out, `"applied_index"`) {
		t.Fatalf("snapshot save: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := run("snapshot", "restore", file, "--data-dir", t.TempDir()); code != 2 || !strings.Contains(errs, "--id are required") {
		t.Fatalf("restore without --id: exit %d %s", code, errs)
	}
	stop()

	seeded := map[string]string{"file": file, "r1": t.TempDir(), "r2": t.TempDir(), "r3": t.TempDir()}
	httpAddr, servers, _ = startCluster("r", seeded)
	api = "http://" + httpAddr["r2"]
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
	code, out, errs = run("reserve", "slow", "--max-wait", "1h", "--servers", strings.Join(servers, ","))
	var g struct {
		WaitNs int64 `json:"wait_ns"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &g) != nil || g.WaitNs < int64(time.Minute) {
		t.Fatalf("reserve after the restore: exit %d, %s%s (want a wait of over a minute)", code, out, errs)
	}
}
