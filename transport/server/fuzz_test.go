package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzHandlers sends arbitrary method, path and body to the handler backed
// by the fake store and checks that it never panics, never answers a 5xx
// other than 503, and answers every error as a JSON {"error": ...}.
func FuzzHandlers(f *testing.F) {
	for _, b := range append(badInputs(), leaseBadInputs()...) {
		f.Add(b.method, b.path, b.body)
	}
	for _, s := range [][3]string{
		{"PUT", "/v1/limits/a", `{"algorithm":"strict","rate":1,"per":"6s","max_reserved":3,"expiry":"1s"}`},
		{"PUT", "/v1/limits/b", `{"algorithm":"bursty","rate":1e9,"max_burst_seconds":1e300}`},
		{"PUT", "/v1/limits/c", `{"algorithm":"warmup","rate":1e-300,"warmup":"2562047h"}`},
		{"POST", "/v1/limits/a/reserve", `{"permits":1,"max_wait":"1s","request_id":"r1"}`},
		{"POST", "/v1/limits/a/reserve", `{"permits":922337203685477580,"max_wait":"2562047h"}`},
		{"GET", "/v1/limits", ""},
		{"GET", "/v1/status", ""},
		{"GET", "/metrics", ""},
		{"POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"h:1"}`},
		{"DELETE", "/v1/cluster/servers/n2", ""},
		{"HEAD", "/readyz", ""},
		{"BREW", "/v1/limits/a", "{}"},
		{"PUT", "/v1/limits/a/lease-policy", `{"leased":true,"burst_permits":5,"max_outstanding_permits":1152921504606846976}`},
		{"POST", "/v1/limits/a/lease", `{"holder":"h","group":"g","weight":3,"demand_per_sec":1.5e-3,"ttl":"1s","request_id":"q1"}`},
		{"POST", "/v1/limits/a/lease", `{"holder":"h","group":"g","demand_per_sec":1e9,"ttl":"1m"}`},
		{"POST", "/v1/limits/a/leases/1/renew", `{"epoch":1,"spent":1,"stolen_out":0,"stolen_in":2,"demand_per_sec":0,"ttl":"100ms","request_id":"q2"}`},
		{"POST", "/v1/limits/a/leases/18446744073709551615/return", `{"epoch":18446744073709551615,"spent":0}`},
		{"GET", "/v1/limits/a/leases", ""},
		{"PUT", "/v1/limits/a/lease-policy", `{"leased":false}`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	e := newEnv(f, HandlerOptions{})
	e.mustPut(f, "a", `{"algorithm":"strict","rate":1,"per":"1s","max_reserved":1000}`)
	f.Fuzz(func(t *testing.T, method, path, body string) {
		u, err := url.ParseRequestURI(path)
		if err != nil || method == "" {
			t.Skip()
		}
		req := &http.Request{Method: method, URL: u, Header: http.Header{}, Body: http.NoBody, RequestURI: path, Host: "x"}
		if body != "" {
			req.Body = httpBody(body)
			req.ContentLength = int64(len(body))
		}
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, req)
		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s %q: %d %s", method, path, body, w.Code, w.Body)
		}
		if w.Code >= 300 {
			var m map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || m["error"] == nil {
				t.Fatalf("%s %s %q: %d without a JSON error: %q", method, path, body, w.Code, w.Body)
			}
		}
	})
}

func httpBody(s string) *readCloser { return &readCloser{strings.NewReader(s)} }

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
