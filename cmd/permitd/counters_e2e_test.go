package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAnswersCountersAndMetricsAgree: what a client is answered, what the
// limit's counters say (GET /v1/limits/{name}, `permitd limits get`) and
// what /metrics exports agree, through the binary:
//
//   - a strict limit at 1 000/s whose permits expire a nanosecond after
//     their slot answers every reserve 429 (the grant expired before its
//     answer left); its counters count 3 refusals, all expired, and no
//     grant, and /metrics 3 refused reserves and 3 expired grants;
//   - 5 enforced grants, then shadow mode, then 1: 1 shadow grant, not 6;
//   - a grant made in shadow mode, replayed (same request_id) after shadow
//     mode was turned off and a fresh grant took the next slot, is
//     answered 429 (expired), not granted a second time.
func TestAnswersCountersAndMetricsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	ag := startLoneAgent(t, bin)
	wantCode(t, runCLI(t, bin, nil, "status", "--wait", "30s", "--servers", ag.httpAddr), exitOK)
	api := "http://" + ag.httpAddr
	hc := &http.Client{Timeout: 5 * time.Second}
	put := func(name, body string) {
		t.Helper()
		if code, b := do(t, hc, "PUT", api+"/v1/limits/"+name, body); code != 200 && code != 201 {
			t.Fatalf("PUT %s: %d %s", name, code, b)
		}
	}
	counters := func(name string) map[string]any {
		t.Helper()
		var m map[string]any
		if code, b := do(t, hc, "GET", api+"/v1/limits/"+name, ""); code != 200 || json.Unmarshal(b, &m) != nil {
			t.Fatalf("GET %s: %d %s", name, code, b)
		}
		return m
	}

	put("fast", `{"algorithm":"strict","rate":1000,"max_reserved":10,"expiry":"1ns"}`)
	for i := range 3 {
		code, b := do(t, hc, "POST", api+"/v1/limits/fast/reserve", `{"max_wait":"1s"}`)
		if code != 429 || !strings.Contains(string(b), "expired before its answer") {
			t.Fatalf("reserve %d: %d %s; want 429, the grant expired before its answer", i, code, b)
		}
	}
	var last map[string]any
	waitUntil(t, 10*time.Second, "the limit to count 3 expired refusals", func() bool {
		last = counters("fast")
		return last["refused_requests"] == 3.0 && last["expired_requests"] == 3.0
	})
	if last["granted_requests"] != 0.0 || last["granted_permits"] != 0.0 || last["expired_permits"] != 3.0 || last["net_permits"] != 3.0 {
		t.Errorf("counters of fast: %v; want 0 granted, 3 refused (3 expired, whose slots are spent: 3 net)", last)
	}
	r := runCLI(t, bin, nil, "limits", "get", "fast", "--json", "--servers", ag.httpAddr)
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, `"granted_requests": 0`) || !strings.Contains(r.stdout, `"expired_requests": 3`) {
		t.Errorf("limits get fast: %v", r)
	}

	put("sh", `{"algorithm":"bursty","rate":1000}`)
	for range 5 {
		do(t, hc, "POST", api+"/v1/limits/sh/reserve", `{"max_wait":"1s"}`)
	}
	put("sh", `{"algorithm":"bursty","rate":1000,"shadow":true}`)
	do(t, hc, "POST", api+"/v1/limits/sh/reserve", `{"max_wait":"1s"}`)
	if c := counters("sh"); c["shadow_granted"] != 1.0 || c["granted_requests"] != 6.0 {
		t.Errorf("counters of sh: %v; want 1 shadow grant of 6", c)
	}

	put("once", `{"algorithm":"strict","rate":1,"per":"100ms","shadow":true}`)
	if code, b := do(t, hc, "POST", api+"/v1/limits/once/reserve", `{"request_id":"X"}`); code != 200 {
		t.Fatalf("shadow reserve X: %d %s", code, b)
	}
	put("once", `{"algorithm":"strict","rate":1,"per":"100ms"}`)
	waitUntil(t, 10*time.Second, "a fresh enforced grant", func() bool {
		code, _ := do(t, hc, "POST", api+"/v1/limits/once/reserve", `{}`)
		return code == 200
	})
	if code, b := do(t, hc, "POST", api+"/v1/limits/once/reserve", `{"request_id":"X"}`); code != 429 || !strings.Contains(string(b), `"duplicate":true`) {
		t.Errorf("replay of X after a fresh grant: %d %s; want 429, a duplicate that expired", code, b)
	}

	resp, err := hc.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	// 4 answers turned into refusals: the 3 fresh grants (reported) and
	// the replay (a replay is not counted by the limit).
	for _, want := range []string{
		`permitd_reserves_expired_total 4`, `permitd_reserves_expired_unreported_total 0`,
		`permitd_shadow_granted_total{limit="sh"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Every 429 was counted refused: the 3 expired grants, the polls for a
	// fresh grant and the expired replay.
	m := regexp.MustCompile(`(?m)^permitd_reserve_requests_total\{outcome="refused",protocol="http"\} (\d+)`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics lacks the refused reserves")
	}
	if refused, err := strconv.Atoi(m[1]); err != nil || refused < 4 {
		t.Errorf("/metrics counts %s refused reserves; want at least 4", m[1])
	}
}
