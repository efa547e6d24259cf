package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestBinaryClusterSurvivesLeaderKill builds the real binary, runs three
// agents on loopback, kill -9s the leader mid-stream, restarts it, and checks
// that no two permits were usable closer than the interval (less each
// answer's round trip) and that service resumed.
func TestBinaryClusterSurvivesLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildPermitd(t)
	agents := newTestAgents(t, 3)
	ids, httpAddr, byID := indexAgents(agents)
	start := func(id string) {
		a := byID[id]
		a.start(t, bin, nil, "agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
			"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(agents))
	}
	kill := func(id string) { byID[id].signal(t, syscall.SIGKILL) }
	for _, id := range ids {
		start(id)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	leader := waitLeader(t, hc, httpAddr, ids)

	const interval = 50 * time.Millisecond
	body := fmt.Sprintf(`{"algorithm":"strict","rate":1,"per":"%s","max_reserved":4,"expiry":"5ms"}`, interval)
	if code, resp := do(t, hc, "PUT", "http://"+httpAddr[leader]+"/v1/limits/e2e", body); code != 200 && code != 201 {
		t.Fatalf("put limit: %d %s", code, resp)
	}

	type grant struct {
		use time.Time
		rtt time.Duration
	}
	var (
		gmu    sync.Mutex
		grants []grant
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := ids[(w+i)%len(ids)]
				reqID := fmt.Sprintf("e2e-%d-%d", w, i)
				for attempt := 0; attempt < 50; attempt++ {
					select {
					case <-stop:
						return
					default:
					}
					code, resp, sent, recv := timedReserve(hc, httpAddr[id], "e2e", "1s", reqID)
					if code == 200 {
						var r struct {
							WaitNs int64 `json:"wait_ns"`
						}
						if err := json.Unmarshal(resp, &r); err != nil {
							t.Errorf("bad grant %s: %v", resp, err)
							return
						}
						gmu.Lock()
						grants = append(grants, grant{use: recv.Add(time.Duration(r.WaitNs)), rtt: recv.Sub(sent)})
						gmu.Unlock()
						select {
						case <-time.After(time.Duration(r.WaitNs)):
						case <-stop:
							return
						}
						break
					}
					if code == 429 {
						break
					}
					// 503 or connection error: same request id, maybe another node.
					id = ids[(w+i+attempt+1)%len(ids)]
				}
			}
		}()
	}
	count := func() int { gmu.Lock(); defer gmu.Unlock(); return len(grants) }
	waitUntil(t, 20*time.Second, "10 grants", func() bool { return count() >= 10 })
	kill(leader)
	before := count()
	newLeader := waitLeader(t, hc, httpAddr, without(ids, leader))
	waitUntil(t, 20*time.Second, "service to resume", func() bool { return count() >= before+10 })
	start(leader)
	waitUntil(t, 20*time.Second, "restarted node to catch up", func() bool {
		code, resp := doQuiet(hc, "GET", "http://"+httpAddr[leader]+"/v1/status", "")
		return code == 200 && bytes.Contains(resp, []byte(`"leader_id":"`+newLeader+`"`))
	})
	after := count()
	waitUntil(t, 20*time.Second, "grants with the old leader back", func() bool { return count() >= after+5 })
	close(stop)
	wg.Wait()

	sort.Slice(grants, func(i, j int) bool { return grants[i].use.Before(grants[j].use) })
	for i := 1; i < len(grants); i++ {
		gap := grants[i].use.Sub(grants[i-1].use)
		tol := max(grants[i].rtt, grants[i-1].rtt)
		if gap < interval-tol {
			t.Errorf("permits %d and %d only %v apart (interval %v, tolerance %v)", i-1, i, gap, interval, tol)
		}
	}
	t.Logf("%d grants through a kill -9 of %s (new leader %s) and its restart", len(grants), leader, newLeader)

	// A correctness smoke of permitd bench against the same cluster: it
	// creates its limit, sends reserves through every node, and exits 0
	// only without errors.
	for _, proto := range []string{"http", "binary"} {
		for _, mode := range []string{"closed", "open"} {
			out, err := exec.Command(bin, "bench", "--servers", serversOf(agents...), "--limit", "smoke", "--protocol", proto, "--mode", mode,
				"--open-rate", "2000", "--concurrency", "4", "--duration", "1s", "--warmup", "200ms", "--request-ids", "--json").CombinedOutput()
			if err != nil {
				t.Fatalf("permitd bench --protocol %s --mode %s: %v\n%s", proto, mode, err, out)
			}
			var res struct {
				Requests, Granted, Errors int64
			}
			if err := json.Unmarshal(out, &res); err != nil || res.Requests == 0 || res.Errors != 0 || res.Granted == 0 {
				t.Fatalf("permitd bench --protocol %s --mode %s result: %s (%v)", proto, mode, out, err)
			}
		}
	}
	// And of its overload mode, the README's overload measurement in
	// one command: capacity passes around an open loop at 3x.
	out, err := exec.Command(bin, "bench", "--servers", serversOf(agents...), "--limit", "smoke", "--protocol", "binary", "--mode", "overload",
		"--capacity-concurrency", "8", "--capacity-passes", "2", "--capacity-duration", "300ms", "--concurrency", "1024",
		"--duration", "1s", "--warmup", "200ms", "--max-wait", "0s", "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("permitd bench --mode overload: %v\n%s", err, out)
	}
	var ov struct {
		CapacityBefore []float64 `json:"capacity_before_rps"`
		CapacityAfter  []float64 `json:"capacity_after_rps"`
		Capacity       float64   `json:"capacity_rps"`
		OfferedRPS     float64   `json:"offered_rps"`
		Open           struct {
			Mode     string
			Requests int64
			Errors   int64
		}
		GoodputRatio   float64    `json:"goodput_ratio"`
		GeneratorCores [3]float64 `json:"generator_cores"`
	}
	if err := json.Unmarshal(out, &ov); err != nil || len(ov.CapacityBefore) != 2 || len(ov.CapacityAfter) != 2 || ov.Capacity <= 0 ||
		ov.OfferedRPS <= 0 || ov.Open.Mode != "open" || ov.Open.Requests == 0 || ov.Open.Errors != 0 || ov.GoodputRatio <= 0 ||
		min(ov.GeneratorCores[0], ov.GeneratorCores[1], ov.GeneratorCores[2]) <= 0 {
		t.Fatalf("permitd bench --mode overload result: %s (%v)", out, err)
	}
}

func without(ids []string, x string) []string {
	var out []string
	for _, id := range ids {
		if id != x {
			out = append(out, id)
		}
	}
	return out
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var lns []net.Listener
	var out []int
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// indexAgents returns the agents' IDs (in agents' order), their HTTP
// addresses by ID and the agents by ID.
func indexAgents(agents []*testAgent) (ids []string, httpAddr map[string]string, byID map[string]*testAgent) {
	ids = make([]string, len(agents))
	httpAddr = map[string]string{}
	byID = map[string]*testAgent{}
	for i, a := range agents {
		ids[i], httpAddr[a.id], byID[a.id] = a.id, a.httpAddr, a
	}
	return ids, httpAddr, byID
}

// timedReserve asks the agent at addr for one permit of limit within
// maxWait under request ID reqID, and returns the answer with the times
// the request was sent and the answer received.
func timedReserve(hc *http.Client, addr, limit, maxWait, reqID string) (code int, resp []byte, sent, recv time.Time) {
	sent = time.Now()
	code, resp = doQuiet(hc, "POST", "http://"+addr+"/v1/limits/"+limit+"/reserve",
		fmt.Sprintf(`{"permits":1,"max_wait":%q,"request_id":%q}`, maxWait, reqID))
	return code, resp, sent, time.Now()
}

func doQuiet(hc *http.Client, method, url, body string) (int, []byte) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func do(t *testing.T, hc *http.Client, method, url, body string) (int, []byte) {
	t.Helper()
	var code int
	var b []byte
	waitUntil(t, 10*time.Second, method+" "+url, func() bool {
		code, b = doQuiet(hc, method, url, body)
		return code != 0 && code != 503
	})
	return code, b
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startCluster starts three agents of bin (with the agent flags extra)
// and waits for their leader; it returns the agents, an HTTP client, each
// agent's HTTP address by ID, and the leader's ID.
func startCluster(t *testing.T, bin string, extra ...string) (agents []*testAgent, hc *http.Client, httpAddr map[string]string, leader string) {
	t.Helper()
	agents = newTestAgents(t, 3)
	httpAddr = map[string]string{}
	var ids []string
	for _, a := range agents {
		a.start(t, bin, nil, append([]string{"agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
			"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(agents)}, extra...)...)
		httpAddr[a.id] = a.httpAddr
		ids = append(ids, a.id)
	}
	hc = &http.Client{Timeout: 5 * time.Second}
	return agents, hc, httpAddr, waitLeader(t, hc, httpAddr, ids)
}

func waitLeader(t *testing.T, hc *http.Client, httpAddr map[string]string, ids []string) string {
	t.Helper()
	var leader string
	waitUntil(t, 20*time.Second, "a leader", func() bool {
		for _, id := range ids {
			code, resp := doQuiet(hc, "GET", "http://"+httpAddr[id]+"/v1/status", "")
			if code != 200 {
				continue
			}
			var st struct {
				State string `json:"state"`
				Ready bool   `json:"ready"`
			}
			if json.Unmarshal(resp, &st) == nil && st.State == "leader" && st.Ready {
				leader = id
				return true
			}
		}
		return false
	})
	return leader
}
