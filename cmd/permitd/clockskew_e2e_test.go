package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClockSkewOfAnHourEitherWay: the README says cluster time is tested
// with clocks ±1 h off. The agent takes --clock-offset -1h as well as +1h
// (it refused the negative one: "below the minimum"), a cluster of a node
// an hour behind and one an hour ahead grants through both, and the hook
// jepsen-lite's clock nemesis drives (POST /v1/debug/clock, offsets of ±1 h
// and rates from 0.5 to 2) takes the same range as the flag: both refuse
// an offset past a day either way, with the same words.
func TestClockSkewOfAnHourEitherWay(t *testing.T) {
	bin := buildPermitd(t)
	const outOfRange = "allowed: a Go duration string from -24h0m0s to 24h0m0s"
	validate := func(offset string) cliResult {
		return runCLI(t, bin, nil, "agent", "--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:7001",
			"--http-addr", "127.0.0.1:8001", "--initial-cluster", "n1=127.0.0.1:7001", "--clock-offset", offset, "--validate")
	}
	for _, offset := range []string{"-1h", "1h", "-24h", "24h", "-1ns"} {
		wantCode(t, validate(offset), exitOK)
	}
	for _, offset := range []string{"-24h0m0.000000001s", "25h"} {
		wantUsageError(t, validate(offset), outOfRange)
	}

	agents := newTestAgents(t, 2)
	httpAddr := map[string]string{}
	for i, a := range agents {
		offset := []string{"-1h", "1h"}[i]
		a.start(t, bin, nil, "agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr, "--http-addr", a.httpAddr,
			"--initial-cluster", initialCluster(agents), "--clock-offset", offset, "--test-hooks")
		httpAddr[a.id] = a.httpAddr
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	leader := waitLeader(t, hc, httpAddr, []string{"n1", "n2"})
	if code, resp := do(t, hc, "PUT", "http://"+httpAddr[leader]+"/v1/limits/skew", `{"algorithm":"strict","rate":100,"max_reserved":100,"expiry":"10s"}`); code != 200 && code != 201 {
		t.Fatalf("put limit: %d %s", code, resp)
	}
	reserveThroughEach := func(when string) {
		t.Helper()
		for _, a := range agents {
			code, resp := do(t, hc, "POST", "http://"+a.httpAddr+"/v1/limits/skew/reserve", `{"max_wait":"5s"}`)
			if code != 200 {
				t.Fatalf("%s: reserve through %s: %d %s, want a grant", when, a.id, code, resp)
			}
		}
	}
	reserveThroughEach("started an hour behind and an hour ahead")

	setClock := func(a *testAgent, body string) (int, string) {
		t.Helper()
		code, resp := doQuiet(hc, "POST", "http://"+a.httpAddr+"/v1/debug/clock", body)
		var ans struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(resp, &ans)
		return code, ans.Error
	}
	for _, a := range agents {
		for _, body := range []string{`{"offset_delta":"-1h","rate":1}`, `{"offset_delta":"1h","rate":1}`, `{"rate":0.5}`, `{"rate":2}`, `{"offset_delta":"24h","rate":1}`} {
			if code, msg := setClock(a, body); code != http.StatusOK {
				t.Fatalf("%s: POST /v1/debug/clock %s: %d %s, want 200", a.id, body, code, msg)
			}
		}
		if code, msg := setClock(a, `{"offset_delta":"-25h","rate":1}`); code != http.StatusBadRequest || !strings.Contains(msg, "allowed: from -24h0m0s to 24h0m0s") {
			t.Fatalf("%s: POST /v1/debug/clock -25h: %d %q, want 400 naming the range", a.id, code, msg)
		}
	}
	reserveThroughEach("after the clock nemesis' jumps and rates")
}
