package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBinaryWorkersStayWithinBound builds the real binary, runs three
// agents and two `permitd worker` sidecars in two groups on a leased strict
// limit, reserves through both sidecars, and checks that grants happen,
// that the total granted stays within the over-grant bound
// C + O + floor(W/I) + 1 over the run's length W, that the sidecars' status
// answers, and that SIGTERM stops the workers with exit status 0.
func TestBinaryWorkersStayWithinBound(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildPermitd(t)
	ports := freePorts(t, 10)
	ids := []string{"a1", "a2", "a3"}
	httpAddr := map[string]string{}
	var initial, servers []string
	for i, id := range ids {
		initial = append(initial, fmt.Sprintf("%s=127.0.0.1:%d", id, ports[2*i]))
		httpAddr[id] = fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])
		servers = append(servers, httpAddr[id])
	}
	type proc struct {
		name string
		cmd  *exec.Cmd
		log  *lockedBuffer
	}
	var procs []*proc
	start := func(name string, args ...string) *proc {
		cmd := exec.Command(bin, args...)
		buf := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = buf, buf
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		p := &proc{name: name, cmd: cmd, log: buf}
		procs = append(procs, p)
		return p
	}
	t.Cleanup(func() {
		for _, p := range procs {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Signal(syscall.SIGKILL)
				_ = p.cmd.Wait()
			}
		}
		if t.Failed() {
			for _, p := range procs {
				t.Logf("--- %s log:\n%s", p.name, p.log.String())
			}
		}
	})
	for i, id := range ids {
		start(id, "agent", "--id", id, "--data-dir", t.TempDir(), "--raft-addr", strings.Split(initial[i], "=")[1],
			"--http-addr", httpAddr[id], "--initial-cluster", strings.Join(initial, ","))
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	leader := waitLeader(t, hc, httpAddr, ids)
	base := "http://" + httpAddr[leader] + "/v1/limits/wl"
	if code, resp := do(t, hc, "PUT", base, `{"algorithm":"strict","rate":200,"per":"1s"}`); code != 200 && code != 201 {
		t.Fatalf("put limit: %d %s", code, resp)
	}
	if code, resp := do(t, hc, "PUT", base+"/lease-policy", `{"leased":true}`); code != 200 {
		t.Fatalf("put lease policy: %d %s", code, resp)
	}
	code, resp := do(t, hc, "GET", base+"/leases", "")
	var pool struct {
		IntervalNanos         int64 `json:"interval_ns"`
		BurstPermits          int64 `json:"burst_permits"`
		MaxOutstandingPermits int64 `json:"max_outstanding_permits"`
	}
	if err := json.Unmarshal(resp, &pool); code != 200 || err != nil || pool.IntervalNanos <= 0 {
		t.Fatalf("get leases: %d %s (%v)", code, resp, err)
	}

	gossip := []string{fmt.Sprintf("127.0.0.1:%d", ports[6]), fmt.Sprintf("127.0.0.1:%d", ports[7])}
	sidecar := []string{fmt.Sprintf("127.0.0.1:%d", ports[8]), fmt.Sprintf("127.0.0.1:%d", ports[9])}
	var workers []*proc
	for i := range 2 {
		workers = append(workers, start(fmt.Sprintf("worker%d", i+1), "worker", "--group", fmt.Sprintf("g%d", i+1),
			"--name", fmt.Sprintf("w%d", i+1), "--limit", "wl", "--servers", strings.Join(servers, ","),
			"--gossip-addr", gossip[i], "--join", gossip[1-i], "--http-addr", sidecar[i], "--ttl", "1s", "--log-level", "debug"))
	}
	for _, s := range sidecar {
		waitUntil(t, 10*time.Second, "sidecar "+s+" healthy", func() bool {
			code, _ := doQuiet(hc, "GET", "http://"+s+"/healthz", "")
			return code == 200
		})
	}

	// Reserve through both sidecars, 3 callers each, for about 2 s.
	load := startSidecarLoad(t, hc, sidecar, "wl", "s", 3)
	waitUntil(t, 10*time.Second, "grants through both sidecars", func() bool {
		return load.granted[0].Load() > 0 && load.granted[1].Load() > 0
	})
	waitUntil(t, 10*time.Second, "2 s of reserves", func() bool { return time.Since(load.start) >= 2*time.Second })
	load.stop()
	granted, other := load.granted, &load.other

	total, w := load.total(), load.window()
	bound := pool.BurstPermits + pool.MaxOutstandingPermits + int64(w)/pool.IntervalNanos + 1
	t.Logf("granted %d (%d + %d) in %v; bound C %d + O %d + floor(W/I) %d + 1 = %d; other answers %d",
		total, granted[0].Load(), granted[1].Load(), w, pool.BurstPermits, pool.MaxOutstandingPermits,
		int64(w)/pool.IntervalNanos, bound, other.Load())
	if total > bound {
		t.Errorf("granted %d permits in %v, over the bound %d", total, w, bound)
	}
	if other.Load() != 0 {
		t.Errorf("%d answers other than 200 and 429", other.Load())
	}

	for i, s := range sidecar {
		code, resp := doQuiet(hc, "GET", "http://"+s+"/v1/status", "")
		var st struct {
			Group string `json:"group"`
			Lease struct {
				LeaseID uint64 `json:"lease_id"`
			} `json:"lease"`
			ShareMilli int64 `json:"share_milli_per_sec"`
			Stats      struct {
				SpentPermits int64 `json:"spent_permits"`
			} `json:"stats"`
		}
		if err := json.Unmarshal(resp, &st); code != 200 || err != nil {
			t.Fatalf("sidecar %s status: %d %s (%v)", s, code, resp, err)
		}
		if st.Group != fmt.Sprintf("g%d", i+1) || st.Lease.LeaseID == 0 || st.ShareMilli <= 0 || st.Stats.SpentPermits < granted[i].Load() {
			t.Errorf("sidecar %s status %s: want group g%d, a lease, a share and spent >= %d", s, resp, i+1, granted[i].Load())
		}
	}

	// A sidecar with a lease is ready; a 429's Retry-After header is at
	// least a second (HTTP's unit).
	for _, s := range sidecar {
		if code, resp := doQuiet(hc, "GET", "http://"+s+"/readyz", ""); code != 200 {
			t.Errorf("sidecar %s /readyz: %d %s", s, code, resp)
		}
	}
	for k := 0; ; k++ {
		resp, err := hc.Post("http://"+sidecar[0]+"/v1/limits/wl/reserve", "application/json",
			strings.NewReader(`{"permits":1,"max_wait":"0s"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 429 {
			if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
				t.Errorf("429 with Retry-After %q", ra)
			}
			break
		}
		if k == 10000 {
			t.Fatalf("no 429 from the sidecar in %d reserves with max_wait 0", k)
		}
	}

	// The sidecar's /metrics: the worker's series, its answers by
	// outcome, the build and the process.
	code, resp = doQuiet(hc, "GET", "http://"+sidecar[0]+"/metrics", "")
	for _, want := range []string{"permitd_worker_spent_permits_total{", `permitd_build_info{goversion="go`, `version="` + testVersion + `"} 1`,
		`permitd_sidecar_reserves_total{group="g1",limit="wl",outcome="granted",worker="w1"} `,
		`permitd_sidecar_reserves_total{group="g1",limit="wl",outcome="refused",worker="w1"} `,
		"go_goroutines ", "process_cpu_seconds_total "} {
		if code != 200 || !strings.Contains(string(resp), want) {
			t.Errorf("sidecar /metrics (%d) lacks %q", code, want)
		}
	}

	// At the default log level a worker says where it listens.
	for i, p := range workers {
		if !strings.Contains(p.log.String(), "permitd-worker: listening: name=w"+fmt.Sprint(i+1)) {
			t.Errorf("%s did not log where it listens:\n%s", p.name, p.log.String())
		}
	}

	for _, p := range workers {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM %s: %v", p.name, err)
		}
	}
	for _, p := range workers {
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s exited with %v, want status 0", p.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not exit within 10 s of SIGTERM", p.name)
		}
	}
	// Exit 0 means the register holds no lease of either worker: each was
	// returned (or had already expired, which the worker's last command then
	// applied). The read comes right after the exits, without waiting for
	// the count to drop: a lease left open only leaves active_leases at
	// the pool's next command after its TTL, so a wait would hang on it or,
	// with any other command, hide it. Only a failed read is asked again.
	var after struct {
		ActiveLeases int `json:"active_leases"`
	}
	waitUntil(t, 5*time.Second, "the pool's leases read", func() bool {
		code, resp = doQuiet(hc, "GET", base+"/leases", "")
		return code == 200 && json.Unmarshal(resp, &after) == nil
	})
	if after.ActiveLeases != 0 {
		t.Errorf("after both workers exited 0 the pool shows %d active leases, want 0: %s", after.ActiveLeases, resp)
	}
}
