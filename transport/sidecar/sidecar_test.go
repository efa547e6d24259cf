package sidecar

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeSidecarWorker answers TryAcquire from ok/err and records the calls.
type fakeSidecarWorker struct {
	mu     sync.Mutex
	ok     bool
	err    error
	calls  []string // "n/maxWait"
	status worker.Status
}

func (f *fakeSidecarWorker) TryAcquire(n int64, maxWait time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%d/%v", n, maxWait))
	return f.ok, f.err
}

func (f *fakeSidecarWorker) Stats() worker.Stats { return f.status.Stats }

func (f *fakeSidecarWorker) Status() worker.Status { return f.status }

func newFakeSidecarWorker() *fakeSidecarWorker {
	return &fakeSidecarWorker{status: worker.Status{
		Stats: worker.Stats{Limit: "api", Group: "g1", Holder: "w1", LeasedPermits: 50, SpentPermits: 7,
			OutstandingPermits: 12, ShareMilliPermitsPerSec: 100_000},
		LeaseID: 3, Epoch: 9, GrantPermitsLeft: 12, ExpiresIn: time.Second, SinceGoodRenewal: 10 * time.Millisecond,
		RetryEvery: 50 * time.Millisecond,
		Members:    map[string][]string{"g1": {"w1", "w2"}},
	}}
}

func TestSidecarReserve(t *testing.T) {
	unreachable := fmt.Errorf("worker: limit %q: %w: %w: the last good renewal was 5s ago", "api", worker.ErrNoPermits, worker.ErrRegisterUnreachable)
	tests := []struct {
		name      string
		method    string
		path      string
		body      string
		ok        bool
		err       error
		wantCode  int
		wantCall  string // "" : TryAcquire not called
		wantBody  map[string]any
		wantError string // substring of "error"
	}{
		{name: "granted now", path: "/v1/limits/api/reserve", body: `{"permits":3,"max_wait":"250ms","request_id":"r-1"}`, ok: true,
			wantCode: 200, wantCall: "3/250ms", wantBody: map[string]any{"granted": true, "wait_ns": 0.0}},
		{name: "empty body is one permit without waiting", path: "/v1/limits/api/reserve", ok: true,
			wantCode: 200, wantCall: "1/0s", wantBody: map[string]any{"granted": true, "wait_ns": 0.0}},
		{name: "refused", path: "/v1/limits/api/reserve", body: `{"permits":2}`,
			wantCode: 429, wantCall: "2/0s", wantBody: map[string]any{"granted": false, "retry_after_ns": 2e7}, wantError: "could not hand out 2 permits within max_wait 0s"},
		{name: "refused one", path: "/v1/limits/api/reserve", body: `{}`,
			wantCode: 429, wantCall: "1/0s", wantBody: map[string]any{"granted": false, "retry_after_ns": 1e7}, wantError: "could not hand out a permit"},
		{name: "fails closed", path: "/v1/limits/api/reserve", body: `{}`, err: unreachable,
			wantCode: 503, wantCall: "1/0s", wantError: "worker fails closed: the register is unreachable"},
		{name: "lease refused", path: "/v1/limits/api/reserve", err: fmt.Errorf("x: %w: limit not leased", worker.ErrNoPermits),
			wantCode: 503, wantCall: "1/0s", wantError: "gives it no lease"},
		{name: "stopped", path: "/v1/limits/api/reserve", err: fmt.Errorf("x: %w", worker.ErrStopped),
			wantCode: 503, wantCall: "1/0s", wantError: "not running"},
		{name: "other limit", path: "/v1/limits/other/reserve", body: `{}`, wantCode: 404, wantError: `serves only limit "api"`},
		{name: "bad name", path: "/v1/limits/b%21d/reserve", wantCode: 400, wantError: "limit name"},
		{name: "bad permits", path: "/v1/limits/api/reserve", body: `{"permits":0}`, wantCode: 400, wantError: `field "permits"`},
		{name: "unknown field", path: "/v1/limits/api/reserve", body: `{"n":1}`, wantCode: 400, wantError: "unknown field"},
		{name: "bad max_wait", path: "/v1/limits/api/reserve", body: `{"max_wait":"soon"}`, wantCode: 400, wantError: "max_wait"},
		{name: "max_wait too long", path: "/v1/limits/api/reserve", body: `{"max_wait":"1m"}`, wantCode: 400, wantError: "at most 10s"},
		{name: "wrong method", method: "GET", path: "/v1/limits/api/reserve", wantCode: 405, wantError: "allowed: POST"},
		{name: "unknown path", method: "GET", path: "/v1/limits", wantCode: 404, wantError: "unknown path"},
		{name: "multi-limit reserve", path: "/v1/reserve", body: `{"limits":[{"name":"api"}]}`, wantCode: 501, wantError: "decided by the register"},
		{name: "settle", path: "/v1/reservations/1/settle", body: `{"actual":[]}`, wantCode: 501, wantError: "decided by the register"},
		{name: "healthz", method: "GET", path: "/healthz", wantCode: 200, wantBody: map[string]any{"status": "ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw := newFakeSidecarWorker()
			fw.ok, fw.err = tt.ok, tt.err
			h := NewHandler(fw, Options{})
			method := tt.method
			if method == "" {
				method = "POST"
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, tt.path, strings.NewReader(tt.body)))
			require.Equal(t, tt.wantCode, rec.Code, "code; body %s", rec.Body)
			var got map[string]any
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), "body %q is not JSON", rec.Body)
			for k, v := range tt.wantBody {
				assert.Equal(t, v, got[k], "field %q (body %s)", k, rec.Body)
			}
			msg, _ := got["error"].(string)
			assert.Contains(t, msg, tt.wantError, "error")
			assert.Equal(t, tt.wantError == "", msg == "", "error %q, want it to contain %q", msg, tt.wantError)
			var calls string
			if len(fw.calls) > 0 {
				calls = strings.Join(fw.calls, ",")
			}
			assert.Equal(t, tt.wantCall, calls, "TryAcquire calls")
			if tt.wantCode == 429 || tt.wantCode == 503 {
				assert.NotEmpty(t, rec.Header().Get("Retry-After"), "no Retry-After header")
			}
		})
	}
}

func TestSidecarStatus(t *testing.T) {
	fw := newFakeSidecarWorker()
	fw.status.RegisterSilentFor = 1200 * time.Millisecond
	srv := httptest.NewServer(NewHandler(fw, Options{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st struct {
		Limit, Group, Holder string
		SharePerSec          float64 `json:"share_per_sec"`
		Lease                struct {
			LeaseID          uint64 `json:"lease_id"`
			Epoch            uint64 `json:"epoch"`
			GrantPermitsLeft int64  `json:"grant_permits_left"`
			ExpiresInNanos   int64  `json:"expires_in_ns"`
			RegisterSilent   int64  `json:"register_silent_ns"`
			Unreachable      *bool  `json:"unreachable"`
		}
		Stats struct {
			LeasedPermits int64 `json:"leased_permits"`
			SpentPermits  int64 `json:"spent_permits"`
		}
		Members map[string][]string
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st), "status %d", resp.StatusCode)
	require.Equal(t, 200, resp.StatusCode, "status")
	assert.Equal(t, "api", st.Limit, "status %+v", st)
	assert.Equal(t, "g1", st.Group, "status %+v", st)
	assert.Equal(t, "w1", st.Holder, "status %+v", st)
	assert.Equal(t, 100.0, st.SharePerSec, "status %+v", st)
	assert.Equal(t, uint64(3), st.Lease.LeaseID, "status %+v", st)
	assert.Equal(t, uint64(9), st.Lease.Epoch, "status %+v", st)
	assert.Equal(t, int64(12), st.Lease.GrantPermitsLeft, "status %+v", st)
	assert.Equal(t, int64(time.Second), st.Lease.ExpiresInNanos, "status %+v", st)
	assert.Equal(t, int64(1200*time.Millisecond), st.Lease.RegisterSilent, "status %+v", st)
	if assert.NotNil(t, st.Lease.Unreachable, "status %+v", st) {
		assert.False(t, *st.Lease.Unreachable, "status %+v", st)
	}
	assert.Equal(t, int64(50), st.Stats.LeasedPermits, "status %+v", st)
	assert.Equal(t, int64(7), st.Stats.SpentPermits, "status %+v", st)
	assert.Len(t, st.Members["g1"], 2, "status %+v", st)
}

// TestSidecarInvalidPermitsFromWorker: a worker rejecting the count is a
// 400, not a 503.
func TestSidecarInvalidPermitsFromWorker(t *testing.T) {
	fw := newFakeSidecarWorker()
	fw.err = fmt.Errorf("%w: 5 permits", worker.ErrInvalidPermits)
	rec := httptest.NewRecorder()
	NewHandler(fw, Options{}).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/limits/api/reserve", strings.NewReader(`{"permits":5}`)))
	assert.Equal(t, 400, rec.Code, "body %s", rec.Body)
	assert.ErrorIs(t, fw.err, worker.ErrInvalidPermits)
}

// TestSidecarRetryAfterIsNeverZero: a refusal says when to come back: the
// worker's next call to the register when it may spend too few permits
// now, its RetryEvery while a call is due or under way (a renewal waiting
// out an election), one pacing slot when it holds enough, never 0 (which
// invites a hot loop).
func TestSidecarRetryAfterIsNeverZero(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status func(*worker.Status)
		want   float64
	}{
		{"too few permits: the next renewal", func(s *worker.Status) { s.OutstandingPermits, s.NextRenewalIn = 0, 150*time.Millisecond }, 1.5e8},
		{"too few permits, a call under way (an election): RetryEvery", func(s *worker.Status) {
			s.OutstandingPermits, s.NextRenewalIn, s.RegisterSilentFor = 0, 0, 1200*time.Millisecond
		}, 5e7},
		// A renewal closed the grant: what is left of it is not
		// spendable, so the next grant, not a pacing slot, is what a
		// caller waits for.
		{"permits left but closed: RetryEvery", func(s *worker.Status) { s.OutstandingPermits, s.NextRenewalIn = 0, 0 }, 5e7},
		{"too few permits, renewal due, RetryEvery unknown: 100 ms", func(s *worker.Status) {
			s.OutstandingPermits, s.NextRenewalIn, s.RetryEvery = 0, 0, 0
		}, 1e8},
		{"no share known: 100 ms", func(s *worker.Status) { s.ShareMilliPermitsPerSec = 0 }, 1e8},
		{"a fast share: at least 1 ms", func(s *worker.Status) { s.ShareMilliPermitsPerSec = 1e12 }, 1e6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fw := newFakeSidecarWorker()
			tt.status(&fw.status)
			rec := httptest.NewRecorder()
			NewHandler(fw, Options{}).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/limits/api/reserve", strings.NewReader(`{}`)))
			var got map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &got)
			require.Equal(t, 429, rec.Code, "code")
			require.Equal(t, tt.want, got["retry_after_ns"], "retry_after_ns")
			require.NotEqual(t, "0", rec.Header().Get("Retry-After"), "Retry-After")
		})
	}
}

// TestSidecarReadyAndCounters: /readyz follows the worker's state, and
// /metrics counts the answers by outcome.
func TestSidecarReadyAndCounters(t *testing.T) {
	fw := newFakeSidecarWorker()
	h := NewHandler(fw, Options{})
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	rec := get("/readyz")
	require.Equal(t, 200, rec.Code, "ready worker: %s", rec.Body)
	// An election: the renewal's calls fail, nothing is left, but the
	// register has been silent for less than UnreachableAfter.
	fw.status.CutOff, fw.status.OutstandingPermits, fw.status.LastError = true, 0, "renew: no leader"
	fw.status.RegisterSilentFor = 1200 * time.Millisecond
	rec = get("/readyz")
	require.Equal(t, 200, rec.Code, "worker waiting out an election: %s", rec.Body)
	fw.status.Unreachable, fw.status.RegisterSilentFor = true, 3*time.Second
	rec = get("/readyz")
	require.Equal(t, 503, rec.Code, "cut-off worker: %s", rec.Body)
	require.Contains(t, rec.Body.String(), "has not answered it for 3s", "cut-off worker")
	fw.status.CutOff, fw.status.Unreachable, fw.status.LeaseID = false, false, 0
	rec = get("/readyz")
	require.Equal(t, 503, rec.Code, "worker without a lease: %s", rec.Body)
	require.Contains(t, rec.Body.String(), "no lease", "worker without a lease")
	post := func(body string) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/limits/api/reserve", strings.NewReader(body)))
	}
	fw.ok = true
	post(`{}`)
	post(`{}`)
	fw.ok = false
	post(`{}`)
	post(`{"permits":0}`)
	fw.err = fmt.Errorf("x: %w", worker.ErrStopped)
	post(`{}`)
	body := get("/metrics").Body.String()
	for _, want := range []string{
		`permitd_sidecar_reserves_total{group="g1",limit="api",outcome="granted",worker="w1"} 2`,
		`permitd_sidecar_reserves_total{group="g1",limit="api",outcome="refused",worker="w1"} 1`,
		`permitd_sidecar_reserves_total{group="g1",limit="api",outcome="invalid",worker="w1"} 1`,
		`permitd_sidecar_reserves_total{group="g1",limit="api",outcome="unavailable",worker="w1"} 1`,
	} {
		assert.Contains(t, body, want, "metrics")
	}
}
