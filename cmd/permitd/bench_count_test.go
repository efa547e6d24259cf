package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startInProcessAgent starts a one-node cluster in this process (fsync
// on, as an agent runs) and returns its HTTP address once it leads; the
// test's cleanup stops it.
func startInProcessAgent(t *testing.T) string {
	t.Helper()
	ports := freePorts(t, 2)
	raftAddr, httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	var stderr bytes.Buffer
	a, initial, ok, code := agentSettings([]string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", raftAddr,
		"--http-addr", httpAddr, "--initial-cluster", "n1=" + raftAddr}, nil, io.Discard, &stderr)
	if !ok {
		t.Fatalf("agent settings: exit %d: %s", code, stderr.String())
	}
	ag, err := startAgent(a, initial, newLogger("permitd", "error", "text", io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ag.stop() })
	waitLeader(t, &http.Client{Timeout: 5 * time.Second}, map[string]string{"n1": httpAddr}, []string{"n1"})
	return httpAddr
}

// benchCounts is what a bench report says of its counts, in every mode
// (a run's, the middle phase's of --mode overload, or --mode inflight's
// reserves).
type benchCounts struct {
	Requests int64 `json:"requests"`
	Reserves int64 `json:"reserves"`
	Granted  int64 `json:"granted"`
	Refused  int64 `json:"refused"`
	Shed     int64 `json:"shed"`
	Errors   int64 `json:"errors"`
	Open     *struct {
		Requests, Granted, Refused, Shed, Errors int64
	} `json:"open"`
	FirstError string `json:"first_error"`
	// Stages: the leader's breakdown of the closed and open loops'
	// reserves (bench's stages.go).
	Stages *struct {
		Reserves int64   `json:"reserves"`
		LeaderMs float64 `json:"leader_ms"`
	} `json:"stages"`
	StagesError string `json:"stages_error"`
}

// limitCounters reads limit name's granted and refused reserves from the
// register at addr.
func limitCounters(t *testing.T, addr, name string) (granted, refused int64) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/limits/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Granted *int64 `json:"granted_requests"`
		Refused *int64 `json:"refused_requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != 200 || l.Granted == nil || l.Refused == nil {
		t.Fatalf("GET limit %s: %d, %v, %+v", name, resp.StatusCode, err, l)
	}
	return *l.Granted, *l.Refused
}

// TestBenchCountsEveryRequestOnce runs permitd bench against a one-node
// register in this process, in every mode and over every protocol: each
// request it reports is granted, refused, shed or an error, exactly one
// of them (requests = granted + refused + shed + errors), and without a
// warm-up the granted and refused it reports are the register's own
// counts of the limit it created (the requests in flight at the end of
// the window counted on both sides); --max-requests sends exactly that
// many.
func TestBenchCountsEveryRequestOnce(t *testing.T) {
	addr := startInProcessAgent(t)
	// A limit of 500/s that refuses what it cannot grant at once: runs
	// see both answers.
	refusing := []string{"--algorithm", "bursty", "--rate", "500", "--max-wait", "0s"}
	cases := []struct {
		name string
		args []string
		// register: compare with the register's counts (no warm-up, one
		// run on the limit); max: the --max-requests sent.
		register bool
		max      int64
	}{
		{"closed-http", []string{"--concurrency", "8"}, true, 0},
		{"closed-binary", []string{"--concurrency", "8", "--protocol", "binary"}, true, 0},
		{"open-http", []string{"--mode", "open", "--open-rate", "3000", "--concurrency", "16"}, true, 0},
		{"open-binary", []string{"--mode", "open", "--open-rate", "3000", "--concurrency", "16", "--protocol", "binary", "--binary-conns", "2"}, true, 0},
		{"multi-limit-http", []string{"--concurrency", "8", "--limits", "2"}, true, 0},
		// --keys 3: reserves on the templated keys LIMIT:k0..k2, made from
		// the template bench puts (the register's counts are summed).
		{"keys-closed-http", []string{"--concurrency", "8", "--keys", "3"}, true, 0},
		{"keys-closed-binary", []string{"--concurrency", "8", "--protocol", "binary", "--keys", "3"}, true, 0},
		{"keys-open-binary", []string{"--mode", "open", "--open-rate", "3000", "--concurrency", "16", "--protocol", "binary", "--keys", "3"}, true, 0},
		{"request-ids-binary", []string{"--concurrency", "8", "--protocol", "binary", "--request-ids"}, true, 0},
		{"max-requests-one-worker", []string{"--concurrency", "1", "--max-requests", "5", "--duration", "30s"}, true, 5},
		{"max-requests-closed-binary", []string{"--concurrency", "8", "--max-requests", "50", "--duration", "30s", "--protocol", "binary"}, true, 50},
		{"max-requests-open-http", []string{"--mode", "open", "--open-rate", "3000", "--concurrency", "8", "--max-requests", "50", "--duration", "30s"}, true, 50},
		{"max-requests-open-binary", []string{"--mode", "open", "--open-rate", "3000", "--concurrency", "8", "--max-requests", "50", "--duration", "30s", "--protocol", "binary"}, true, 50},
		{"warmup-closed-http", []string{"--concurrency", "8", "--warmup", "150ms"}, false, 0},
		{"warmup-open-binary", []string{"--mode", "open", "--open-rate", "3000", "--concurrency", "16", "--protocol", "binary", "--warmup", "150ms"}, false, 0},
		{"inflight", []string{"--mode", "inflight", "--max-in-flight", "2", "--concurrency", "4", "--hold", "1ms", "--max-wait", "0s"}, true, 0},
		{"overload-http", []string{"--mode", "overload", "--capacity-passes", "1", "--capacity-duration", "200ms", "--capacity-concurrency", "4", "--concurrency", "16"}, false, 0},
		{"overload-binary", []string{"--mode", "overload", "--capacity-passes", "1", "--capacity-duration", "200ms", "--capacity-concurrency", "4", "--concurrency", "16", "--protocol", "binary"}, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			limit := "count-" + tc.name
			args := []string{"--servers", addr, "--limit", limit, "--duration", "300ms", "--warmup", "0s", "--json"}
			if !strings.Contains(tc.name, "inflight") {
				args = append(args, refusing...)
			}
			args = append(args, tc.args...) // later flags win
			var stdout, stderr bytes.Buffer
			code := runBench(args, &stdout, &stderr)
			var c benchCounts
			if err := json.Unmarshal(stdout.Bytes(), &c); err != nil || code != 0 {
				t.Fatalf("permitd bench %s: exit %d, %v: %s %s", strings.Join(args, " "), code, err, stdout.String(), stderr.String())
			}
			if c.Open != nil { // overload: the middle phase
				c.Requests, c.Granted, c.Refused, c.Shed, c.Errors = c.Open.Requests, c.Open.Granted, c.Open.Refused, c.Open.Shed, c.Open.Errors
			}
			if tc.name == "inflight" {
				c.Requests = c.Reserves
			}
			if c.Requests == 0 || c.Errors != 0 || c.Requests != c.Granted+c.Refused+c.Shed+c.Errors {
				t.Fatalf("requests %d, granted %d, refused %d, shed %d, errors %d (first %q); want some requests, no errors, and requests = granted + refused + shed + errors",
					c.Requests, c.Granted, c.Refused, c.Shed, c.Errors, c.FirstError)
			}
			if loop := !strings.HasPrefix(tc.name, "inflight") && !strings.HasPrefix(tc.name, "overload"); loop {
				// Without a warm-up, every reserve committed between the
				// readings is a measured one.
				warm := strings.HasPrefix(tc.name, "warmup")
				if c.Stages == nil || c.Stages.Reserves <= 0 || (!warm && c.Stages.Reserves > c.Granted+c.Refused) || c.Stages.LeaderMs <= 0 {
					t.Errorf("stages %+v (error %q) over %d granted and %d refused; want a breakdown of some of those reserves", c.Stages, c.StagesError, c.Granted, c.Refused)
				}
			}
			if tc.max > 0 && c.Requests != tc.max {
				t.Errorf("--max-requests %d: %d requests counted", tc.max, c.Requests)
			}
			if !tc.register {
				return
			}
			names := []string{limit}
			if strings.Contains(tc.name, "multi-limit") {
				names = append(names, limit+"-2")
			}
			if strings.HasPrefix(tc.name, "keys-") {
				// Every key was drawn (and so created), and together
				// they decided what bench counted.
				var g, r int64
				for k := range 3 {
					gk, rk := limitCounters(t, addr, limit+":k"+strconv.Itoa(k))
					if gk+rk == 0 {
						t.Errorf("key %s:k%d decided nothing", limit, k)
					}
					g, r = g+gk, r+rk
				}
				if g != c.Granted || r != c.Refused {
					t.Errorf("keys %s:k0..k2: the register counted %d granted, %d refused; bench %d granted, %d refused", limit, g, r, c.Granted, c.Refused)
				}
				return
			}
			for _, name := range names {
				g, r := limitCounters(t, addr, name)
				if g != c.Granted || (len(names) == 1 && r != c.Refused) {
					t.Errorf("limit %s: the register counted %d granted, %d refused; bench %d granted, %d refused (of %d requests)",
						name, g, r, c.Granted, c.Refused, c.Requests)
				}
			}
			t.Logf("requests %s = granted %d + refused %d + shed %d", strconv.FormatInt(c.Requests, 10), c.Granted, c.Refused, c.Shed)
		})
	}
}
