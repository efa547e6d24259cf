package fakeapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
)

func strictBound(t *testing.T, interval int64) bound.Bound {
	t.Helper()
	b, err := bound.Strict(interval)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConfigValidate(t *testing.T) {
	b := strictBound(t, 10)
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"spacing", Config{Mode: Spacing, IntervalNanos: 1}, true},
		{"window", Config{Mode: Window, WindowNanos: 1, Bound: b}, true},
		{"no mode", Config{IntervalNanos: 1}, false},
		{"spacing without interval", Config{Mode: Spacing}, false},
		{"window without window", Config{Mode: Window, Bound: b}, false},
		{"window without bound", Config{Mode: Window, WindowNanos: 1}, false},
		{"negative tolerance", Config{Mode: Spacing, IntervalNanos: 1, ToleranceNanos: -1}, false},
		{"negative max calls", Config{Mode: Spacing, IntervalNanos: 1, MaxCalls: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("New: %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestMonitor(t *testing.T) {
	tests := []struct {
		name           string
		cfg            Config
		times          []int64
		wantViolations int64
		wantMinGap     int64
		wantMaxWindow  int64
	}{
		{"spacing ok", Config{Mode: Spacing, IntervalNanos: 10}, []int64{0, 10, 25, 35}, 0, 10, 0},
		{"spacing two short gaps", Config{Mode: Spacing, IntervalNanos: 10}, []int64{0, 9, 20, 21}, 2, 1, 0},
		{"spacing short gap within tolerance", Config{Mode: Spacing, IntervalNanos: 10, ToleranceNanos: 1}, []int64{0, 9, 19}, 0, 9, 0},
		{"spacing single call", Config{Mode: Spacing, IntervalNanos: 10}, []int64{5}, 0, -1, 0},
		// Strict(10) over W=10: at most 2 calls in any closed window of 10.
		{"window ok", Config{Mode: Window, WindowNanos: 10, Bound: bound.Bound{Formula: "floor(W/10)+1", Max: func(w int64) int64 { return w/10 + 1 }}}, []int64{0, 10, 20, 30}, 0, 10, 2},
		{"window three in ten", Config{Mode: Window, WindowNanos: 10, Bound: bound.Bound{Formula: "floor(W/10)+1", Max: func(w int64) int64 { return w/10 + 1 }}}, []int64{0, 5, 10, 30}, 1, 5, 3},
		{"window tolerance shrinks window", Config{Mode: Window, WindowNanos: 10, ToleranceNanos: 1, Bound: bound.Bound{Formula: "floor(W/10)+1", Max: func(w int64) int64 { return w/10 + 1 }}}, []int64{0, 5, 10, 30}, 0, 5, 2},
		{"window burst", Config{Mode: Window, WindowNanos: 10, Bound: bound.Bound{Formula: "floor(W/10)+1", Max: func(w int64) int64 { return w/10 + 1 }}}, []int64{0, 1, 2, 3, 4}, 3, 1, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMonitor(tt.cfg)
			for _, at := range tt.times {
				m.observe(at)
			}
			s := m.stats()
			if s.Violations != tt.wantViolations || s.MinGapNanos != tt.wantMinGap || s.MaxWindowCount != tt.wantMaxWindow {
				t.Fatalf("stats %+v; want violations %d min gap %d max window %d", s, tt.wantViolations, tt.wantMinGap, tt.wantMaxWindow)
			}
		})
	}
}

// serveUnix starts s on a unix socket in a temp dir and returns a client.
func serveUnix(t *testing.T, s *Server) *Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api.sock")
	l, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	c := NewUnixClient(path)
	t.Cleanup(c.CloseIdleConnections) // runs before the shutdown above
	return c
}

func TestServerUnixSocket(t *testing.T) {
	// An interval of an hour: every call after the first breaks spacing.
	s, err := New(Config{Mode: Spacing, IntervalNanos: int64(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	c := serveUnix(t, s)
	ctx := context.Background()
	const workers, each = 4, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				sent := int64(i)
				if _, err := c.Call(ctx, CallRequest{Worker: string(rune('a' + w)), RequestID: "r", SentNanos: &sent}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	calls, err := c.Calls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != workers*each {
		t.Fatalf("%d calls, want %d", len(calls), workers*each)
	}
	for i, call := range calls {
		if call.Seq != int64(i) || call.SentNanos == nil || call.RequestID != "r" {
			t.Fatalf("call %d: %+v", i, call)
		}
		if i > 0 && call.TimeNanos < calls[i-1].TimeNanos {
			t.Fatalf("call %d at %d before call %d at %d", i, call.TimeNanos, i-1, calls[i-1].TimeNanos)
		}
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Calls != workers*each || st.Violations != workers*each-1 || st.Mode != Spacing {
		t.Fatalf("stats %+v", st)
	}
}

func TestServerLoopbackWindow(t *testing.T) {
	b := strictBound(t, int64(time.Hour))
	s, err := New(Config{Mode: Window, WindowNanos: int64(time.Hour), Bound: b, MaxCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ListenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	c := NewClient("http://"+l.Addr().String(), nil)
	ctx := context.Background()
	for range 3 {
		if _, err := c.Call(ctx, CallRequest{Worker: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Call(ctx, CallRequest{Worker: "w"}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("call past MaxCalls: %v", err)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Bound floor(W/I)+1 = 2 for W = I: the third call breaks it.
	if st.Calls != 3 || st.Dropped != 1 || st.Violations != 1 || st.Bound != 2 || st.MaxWindowCount != 3 || st.Formula != b.Formula {
		t.Fatalf("stats %+v", st)
	}
}

func TestServerBadRequests(t *testing.T) {
	s, err := New(Config{Mode: Spacing, IntervalNanos: 1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	tests := []struct {
		name, method, path, body, want string
		code                           int
	}{
		{"not json", "POST", "/call", `nope`, "allowed:", 400},
		{"unknown field", "POST", "/call", `{"worker":"w","x":1}`, "unknown field", 400},
		{"trailing", "POST", "/call", `{"worker":"w"}{}`, "trailing data", 400},
		{"no worker", "POST", "/call", `{"request_id":"r"}`, "worker", 400},
		{"long id", "POST", "/call", `{"worker":"w","request_id":"` + strings.Repeat("x", 300) + `"}`, "request_id", 400},
		{"huge body", "POST", "/call", `{"worker":"` + strings.Repeat("x", 5000) + `"}`, "at most", 400},
		{"wrong method", "GET", "/call", ``, "", 405},
		{"unknown path", "GET", "/nope", ``, "", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := new(strings.Builder)
			if _, err := io.Copy(buf, resp.Body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.code || !strings.Contains(buf.String(), tt.want) {
				t.Fatalf("%d %s; want %d containing %q", resp.StatusCode, buf, tt.code, tt.want)
			}
		})
	}
	if len(s.Calls()) != 0 {
		t.Fatalf("bad requests recorded: %v", s.Calls())
	}
}

func TestRecordInProcess(t *testing.T) {
	s, err := New(Config{Mode: Spacing, IntervalNanos: 1, Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	sent := int64(42)
	c, err := s.Record("w", "id", &sent)
	if err != nil {
		t.Fatal(err)
	}
	sent = 7 // the recorded call keeps its own copy
	got := s.Calls()
	if len(got) != 1 || *got[0].SentNanos != 42 || got[0] != (Call{Seq: 0, Worker: "w", RequestID: "id", SentNanos: got[0].SentNanos, TimeNanos: c.TimeNanos}) {
		t.Fatalf("calls %+v", got)
	}
	*got[0].SentNanos = 9
	if *s.Calls()[0].SentNanos != 42 {
		t.Fatal("Calls shares memory with the server")
	}
}
