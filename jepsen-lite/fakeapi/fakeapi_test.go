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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func strictBound(t *testing.T, interval int64) bound.Bound {
	t.Helper()
	b, err := bound.Strict(interval)
	require.NoError(t, err)
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
			if tt.ok {
				require.NoError(t, err, "New")
			} else {
				require.ErrorIs(t, err, ErrInvalid, "New")
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
			require.Equal(t, tt.wantViolations, s.Violations, "violations: stats %+v", s)
			require.Equal(t, tt.wantMinGap, s.MinGapNanos, "min gap: stats %+v", s)
			require.Equal(t, tt.wantMaxWindow, s.MaxWindowCount, "max window: stats %+v", s)
		})
	}
}

// serveUnix starts s on a unix socket in a temp dir and returns a client.
func serveUnix(t *testing.T, s *Server) *Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api.sock")
	l, err := ListenUnix(path)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, s.Shutdown(ctx))
		assert.NoError(t, <-done)
	})
	c := NewUnixClient(path)
	t.Cleanup(c.CloseIdleConnections) // runs before the shutdown above
	return c
}

func TestServerUnixSocket(t *testing.T) {
	// An interval of an hour: every call after the first breaks spacing.
	s, err := New(Config{Mode: Spacing, IntervalNanos: int64(time.Hour)})
	require.NoError(t, err)
	c := serveUnix(t, s)
	ctx := context.Background()
	const workers, each = 4, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				sent := int64(i)
				_, err := c.Call(ctx, CallRequest{Worker: string(rune('a' + w)), RequestID: "r", SentNanos: &sent})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	calls, err := c.Calls(ctx)
	require.NoError(t, err)
	require.Len(t, calls, workers*each)
	for i, call := range calls {
		require.Equal(t, int64(i), call.Seq, "call %d: %+v", i, call)
		require.NotNil(t, call.SentNanos, "call %d: %+v", i, call)
		require.Equal(t, "r", call.RequestID, "call %d: %+v", i, call)
		if i > 0 {
			require.GreaterOrEqual(t, call.TimeNanos, calls[i-1].TimeNanos, "call %d before call %d", i, i-1)
		}
	}
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(workers*each), st.Calls, "stats %+v", st)
	require.Equal(t, int64(workers*each-1), st.Violations, "stats %+v", st)
	require.Equal(t, Spacing, st.Mode, "stats %+v", st)
}

func TestServerLoopbackWindow(t *testing.T) {
	b := strictBound(t, int64(time.Hour))
	s, err := New(Config{Mode: Window, WindowNanos: int64(time.Hour), Bound: b, MaxCalls: 3})
	require.NoError(t, err)
	l, err := ListenLoopback()
	require.NoError(t, err)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	c := NewClient("http://"+l.Addr().String(), nil)
	ctx := context.Background()
	for range 3 {
		_, err := c.Call(ctx, CallRequest{Worker: "w"})
		require.NoError(t, err)
	}
	_, err = c.Call(ctx, CallRequest{Worker: "w"})
	require.ErrorContains(t, err, "503", "call past MaxCalls")
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	// Bound floor(W/I)+1 = 2 for W = I: the third call breaks it.
	require.Equal(t, int64(3), st.Calls, "stats %+v", st)
	require.Equal(t, int64(1), st.Dropped, "stats %+v", st)
	require.Equal(t, int64(1), st.Violations, "stats %+v", st)
	require.Equal(t, int64(2), st.Bound, "stats %+v", st)
	require.Equal(t, int64(3), st.MaxWindowCount, "stats %+v", st)
	require.Equal(t, b.Formula, st.Formula, "stats %+v", st)
}

func TestServerBadRequests(t *testing.T) {
	s, err := New(Config{Mode: Spacing, IntervalNanos: 1})
	require.NoError(t, err)
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
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			buf := new(strings.Builder)
			_, err = io.Copy(buf, resp.Body)
			require.NoError(t, err)
			require.Equal(t, tt.code, resp.StatusCode, "body %s", buf)
			require.Contains(t, buf.String(), tt.want)
		})
	}
	require.Empty(t, s.Calls(), "bad requests recorded")
}

func TestRecordInProcess(t *testing.T) {
	s, err := New(Config{Mode: Spacing, IntervalNanos: 1, Start: time.Now()})
	require.NoError(t, err)
	sent := int64(42)
	c, err := s.Record("w", "id", &sent)
	require.NoError(t, err)
	sent = 7 // the recorded call keeps its own copy
	got := s.Calls()
	require.Len(t, got, 1)
	require.Equal(t, int64(42), *got[0].SentNanos)
	require.Equal(t, Call{Seq: 0, Worker: "w", RequestID: "id", SentNanos: got[0].SentNanos, TimeNanos: c.TimeNanos}, got[0])
	*got[0].SentNanos = 9
	require.Equal(t, int64(42), *s.Calls()[0].SentNanos, "Calls shares memory with the server")
}

// TestKeyedMode: every key is judged alone (two keys called at once are
// no violation, one key called twice within its interval is one), a call
// must name its key in Keyed mode and no other, and Stats sums the keys.
func TestKeyedMode(t *testing.T) {
	if _, err := New(Config{Mode: Keyed, KeyMode: Multi}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("keyed mode with key mode multi: %v; want ErrInvalid", err)
	}
	s, err := New(Config{Mode: Keyed, KeyMode: Spacing, IntervalNanos: int64(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"t:a", "t:b", "t:a"} {
		if _, err := s.RecordCall(CallRequest{Worker: "w", RequestID: "r", Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Mode != Keyed || st.Keys != 2 || st.Calls != 3 || st.Violations != 1 {
		t.Fatalf("stats %+v; want keyed, 2 keys, 3 calls, 1 violation (t:a twice)", st)
	}
	if _, err := s.RecordCall(CallRequest{Worker: "w", RequestID: "r"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a call without a key in keyed mode: %v; want ErrInvalid", err)
	}
	plain, err := New(Config{Mode: Spacing, IntervalNanos: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.RecordCall(CallRequest{Worker: "w", Key: "t:a"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a call with a key in spacing mode: %v; want ErrInvalid", err)
	}
}
