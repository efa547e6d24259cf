package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestReserveWaitExpiredPermit: the README's promise that reserve --wait
// exits 1 when a permit expired before its line could be printed. A fake
// node answers the reserve with a grant whose first permit is already
// past its expiry when the answer arrives, so the branch is taken on every
// run without sleeping: the grant line is printed, no {"permit":J} line,
// and stderr says the permit expired.
func TestReserveWaitExpiredPermit(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
	}{{
		// What a node answers to a retried request ID whose grant's expiry
		// has passed (fsm: ExpiresInNanos = -1, Duplicate).
		name:   "replayed grant already expired",
		answer: `{"granted":true,"wait_ns":0,"expires_in_ns":-1,"spacing_ns":1000000000,"duplicate":true}`,
	}, {
		// A fresh grant whose expiry (1ns after the answer left) runs out
		// during the answer's trip.
		name:   "expiry runs out before the answer arrives",
		answer: `{"granted":true,"wait_ns":0,"expires_in_ns":1,"spacing_ns":1000000000,"duplicate":false}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/v1/limits/api/reserve" {
					t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintln(w, tc.answer)
			}))
			defer srv.Close()
			var stdout, stderr bytes.Buffer
			code := runReserve([]string{"api", "--permits", "2", "--wait", "--servers", strings.TrimPrefix(srv.URL, "http://"),
				"--timeout", "5s"}, &stdout, &stderr)
			if code != exitFailure {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailure, stdout.String(), stderr.String())
			}
			// One line an operator can read: how long ago, and when in UTC
			// (no Go monotonic clock reading).
			if !expiredLine.MatchString(stderr.String()) {
				t.Errorf("stderr %q, want one line matching %s", stderr.String(), expiredLine)
			}
			// The grant line, and no line for the expired permit (nor any later one).
			lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
			var grant map[string]any
			if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &grant) != nil || grant["granted"] != true {
				t.Fatalf("stdout %q, want only the grant line", stdout.String())
			}
			if _, ok := grant["permit"]; ok || strings.Contains(stdout.String(), `"permit":`) {
				t.Errorf("a permit line was printed for an expired permit: %q", stdout.String())
			}
		})
	}
}

// expiredLine is the one line reserve --wait prints for a permit that
// expired before use: how long ago and when in UTC, no Go monotonic clock
// reading.
var expiredLine = regexp.MustCompile(`^permitd reserve: permit expired before use: permit 0 expired [0-9.]+(µs|ms|s) ago \(at 20[0-9-]{8}T[0-9:.]+Z\); reserve again\n$`)
