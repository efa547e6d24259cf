package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/permitd/permitd/cmd/internal/bench"
)

// benchStub answers reserves in turn granted, refused and shed (503
// "overloaded", after shedDelay), or with errEvery > 0 a 500 every
// errEvery-th; /v1/status reports n1 term 2 first and n2 term 3 after.
func benchStub(t *testing.T, shedDelay time.Duration, errEvery int64) string {
	t.Helper()
	var reserves, statuses atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/status" {
			if statuses.Add(1) == 1 {
				w.Write([]byte(`{"leader_id":"n1","term":2}`))
			} else {
				w.Write([]byte(`{"leader_id":"n2","term":3}`))
			}
			return
		}
		n := reserves.Add(1)
		switch {
		case errEvery > 0 && n%errEvery == 0:
			w.WriteHeader(500)
			w.Write([]byte(`{"error":"boom"}`))
		case errEvery > 0 || n%3 == 0:
			w.Write([]byte(`{"granted":true,"wait_ns":0}`))
		case n%3 == 1:
			w.WriteHeader(429)
			w.Write([]byte(`{"granted":false,"retry_after_ns":1000}`))
		default:
			time.Sleep(shedDelay)
			w.WriteHeader(503)
			w.Write([]byte(`{"error":"reserve: overloaded: the node holds as many reserves as it may"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestBenchCountsShedApartAndReportsTheLeaderChange: over HTTP in the
// closed and open loops, a 503 "overloaded" is shed, not an error, and
// is left out of the latencies (the shed answers are slow, the admitted
// fast); the leader and term before and after the run are the nodes'.
func TestBenchCountsShedApartAndReportsTheLeaderChange(t *testing.T) {
	for _, mode := range []string{"closed", "open"} {
		t.Run(mode, func(t *testing.T) {
			delay := 600 * time.Millisecond
			if mode == "open" {
				delay = 0 // latency counts from the schedule: slow sheds would hold slots
			}
			addr := benchStub(t, delay, 0)
			var stdout, stderr bytes.Buffer
			code := runBench([]string{"--servers", addr, "--create=false", "--mode", mode, "--open-rate", "300", "--concurrency", "8",
				"--duration", "1s", "--warmup", "100ms", "--json"}, &stdout, &stderr)
			var res bench.Result
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatalf("exit %d, %v: %s %s", code, err, stdout.String(), stderr.String())
			}
			if code != 0 || res.Errors != 0 || res.Shed == 0 || res.Granted == 0 || res.Refused == 0 || res.Granted+res.Refused+res.Shed != res.Requests {
				t.Fatalf("exit %d; %+v; want 0, no errors, shed counted apart", code, res)
			}
			if delay > 0 && res.MaxMs >= 500 {
				t.Errorf("max latency %.1f ms: the shed answers (600 ms) are in the admitted latencies", res.MaxMs)
			}
			if res.LeaderBefore != "n1" || res.TermBefore != 2 || res.LeaderAfter != "n2" || res.TermAfter != 3 {
				t.Errorf("leader %s/%d before, %s/%d after; want n1/2, n2/3", res.LeaderBefore, res.TermBefore, res.LeaderAfter, res.TermAfter)
			}
		})
	}
}

// TestBenchExitsOneOnMoreThanOnePercentErrors: one reserve in ten fails
// (500): bench reports them and exits 1.
func TestBenchExitsOneOnMoreThanOnePercentErrors(t *testing.T) {
	addr := benchStub(t, 0, 10)
	var stdout, stderr bytes.Buffer
	code := runBench([]string{"--servers", addr, "--create=false", "--concurrency", "2", "--duration", "300ms", "--warmup", "50ms"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stdout.String(), "errors=") || !strings.Contains(stdout.String(), "first error: HTTP 500") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 with the errors reported", code, stdout.String(), stderr.String())
	}
}

// A script running the overload measurement reads its exit status: a
// cluster that answers nothing fails the run (1) with the pass named, and
// prints no report.
func TestOverloadModeExitsOneWhenAPassFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var stdout, stderr bytes.Buffer
	code := runBench([]string{"--mode", "overload", "--servers", addr, "--create=false", "--protocol", "binary",
		"--capacity-concurrency", "2", "--capacity-duration", "100ms", "--warmup", "0s", "--json"}, &stdout, &stderr)
	if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "the warm-up pass") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1, nothing, an error naming the warm-up pass", code, stdout.String(), stderr.String())
	}
}
