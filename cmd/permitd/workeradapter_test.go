package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node/worker"
	"github.com/permitd/permitd/transport/client"
)

// recordingRegister answers every request with code and body and records
// the last request's path and JSON body.
type recordingRegister struct {
	mu   sync.Mutex
	path string
	body map[string]any
	code int
	resp string
}

func (s *recordingRegister) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.path = r.URL.Path
	s.body = nil
	_ = json.Unmarshal(b, &s.body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(s.code)
	_, _ = io.WriteString(w, s.resp)
}

func newAdapter(t *testing.T, servers ...string) clientRegister {
	t.Helper()
	c, err := client.New(servers, client.WithRounds(1), client.WithAttemptTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return clientRegister{c: c}
}

func TestClientRegisterRequestsAndAnswers(t *testing.T) {
	rec := &recordingRegister{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	reg := newAdapter(t, srv.Listener.Addr().String())
	ctx := context.Background()

	type call func() (fsm.LeaseResult, error)
	tests := []struct {
		name     string
		code     int
		resp     string
		call     call
		wantPath string
		wantBody map[string]any
		want     fsm.LeaseResult
	}{
		{
			name: "lease granted", code: 200,
			resp: `{"status":"granted","lease_id":7,"epoch":1,"permits":40,"expires_in_ns":2000000000,"share_per_sec":100,"share_milli_per_sec":100000,"credited_permits":0,"retry_after_ns":0,"duplicate":true}`,
			call: func() (fsm.LeaseResult, error) {
				return reg.Lease(ctx, "lim", fsm.Lease{Limit: "lim", Holder: "h1", Group: "g1", Weight: 3,
					DemandMilliPermitsPerSec: 1234567, TTLNanos: int64(2 * time.Second), RequestID: "r1"})
			},
			wantPath: "/v1/limits/lim/lease",
			wantBody: map[string]any{"holder": "h1", "group": "g1", "weight": 3.0, "demand_per_sec": 1234.567, "ttl": "2s", "request_id": "r1"},
			want: fsm.LeaseResult{Status: fsm.LeaseGranted, LeaseID: 7, Epoch: 1, Permits: 40, ExpiresInNanos: int64(2 * time.Second),
				ShareMilliPermitsPerSec: 100000, Duplicate: true},
		},
		{
			name: "lease refused", code: 429,
			resp: `{"status":"refused","lease_id":7,"epoch":2,"retry_after_ns":5000,"error":"holder holds lease 7"}`,
			call: func() (fsm.LeaseResult, error) {
				return reg.Lease(ctx, "lim", fsm.Lease{Holder: "h1", Group: "g1", TTLNanos: int64(time.Second), RequestID: "r2"})
			},
			wantPath: "/v1/limits/lim/lease",
			want:     fsm.LeaseResult{Status: fsm.LeaseRefused, LeaseID: 7, Epoch: 2, RetryAfterNanos: 5000, Detail: "holder holds lease 7"},
		},
		{
			name: "renew granted", code: 200,
			resp: `{"status":"granted","lease_id":7,"epoch":3,"permits":20,"expires_in_ns":1000,"share_milli_per_sec":5,"credited_permits":4}`,
			call: func() (fsm.LeaseResult, error) {
				return reg.Renew(ctx, "lim", fsm.Renew{Report: fsm.Report{LeaseID: 7, Epoch: 2, SpentPermits: 10, StolenOutPermits: 2, StolenInPermits: 1}, DemandMilliPermitsPerSec: 500, TTLNanos: int64(time.Second), RequestID: "r3"})
			},
			wantPath: "/v1/limits/lim/leases/7/renew",
			wantBody: map[string]any{"epoch": 2.0, "spent": 10.0, "stolen_out": 2.0, "stolen_in": 1.0, "demand_per_sec": 0.5, "ttl": "1s", "request_id": "r3"},
			want:     fsm.LeaseResult{Status: fsm.LeaseGranted, LeaseID: 7, Epoch: 3, Permits: 20, ExpiresInNanos: 1000, ShareMilliPermitsPerSec: 5, CreditedPermits: 4},
		},
		{
			name: "renew fenced", code: 409,
			resp: `{"status":"fenced","lease_id":7,"epoch":3,"error":"epoch 2 is stale"}`,
			call: func() (fsm.LeaseResult, error) {
				return reg.Renew(ctx, "lim", fsm.Renew{Report: fsm.Report{LeaseID: 7, Epoch: 2}, TTLNanos: int64(time.Second), RequestID: "r4"})
			},
			wantPath: "/v1/limits/lim/leases/7/renew",
			want:     fsm.LeaseResult{Status: fsm.LeaseFenced, LeaseID: 7, Epoch: 3, Detail: "epoch 2 is stale"},
		},
		{
			name: "return", code: 200,
			resp: `{"status":"returned","lease_id":7,"epoch":3,"credited_permits":9}`,
			call: func() (fsm.LeaseResult, error) {
				return reg.Return(ctx, "lim", fsm.Return{Report: fsm.Report{LeaseID: 7, Epoch: 3, SpentPermits: 11}, RequestID: "r5"})
			},
			wantPath: "/v1/limits/lim/leases/7/return",
			wantBody: map[string]any{"epoch": 3.0, "spent": 11.0, "request_id": "r5"},
			want:     fsm.LeaseResult{Status: fsm.LeaseReturned, LeaseID: 7, Epoch: 3, CreditedPermits: 9},
		},
		{
			name: "unknown limit", code: 404, resp: `{"error":"limit \"lim\" not found"}`,
			call: func() (fsm.LeaseResult, error) {
				return reg.Lease(ctx, "lim", fsm.Lease{Holder: "h1", Group: "g1", TTLNanos: int64(time.Second), RequestID: "r6"})
			},
			wantPath: "/v1/limits/lim/lease",
			want:     fsm.LeaseResult{Status: fsm.LeaseUnknownLimit, Detail: `limit "lim" not found`},
		},
		{
			name: "invalid", code: 400, resp: `{"error":"limit is not leased"}`,
			call: func() (fsm.LeaseResult, error) {
				return reg.Lease(ctx, "lim", fsm.Lease{Holder: "h1", Group: "g1", TTLNanos: int64(time.Second), RequestID: "r7"})
			},
			wantPath: "/v1/limits/lim/lease",
			want:     fsm.LeaseResult{Status: fsm.LeaseInvalid, Detail: "limit is not leased"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.mu.Lock()
			rec.code, rec.resp = tt.code, tt.resp
			rec.mu.Unlock()
			got, err := tt.call()
			if err != nil {
				t.Fatalf("err %v", err)
			}
			if got != tt.want {
				t.Errorf("result %+v, want %+v", got, tt.want)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.path != tt.wantPath {
				t.Errorf("path %q, want %q", rec.path, tt.wantPath)
			}
			for k, v := range tt.wantBody {
				if rec.body[k] != v {
					t.Errorf("body field %q = %v, want %v (body %v)", k, rec.body[k], v, rec.body)
				}
			}
		})
	}
}

// TestClientRegisterErrors: a refused connection is not delivered; a 503
// or a connection dropped after the request may have been applied.
func TestClientRegisterErrors(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := dead.Listener.Addr().String()
	dead.Close()
	busy := httptest.NewServer(&recordingRegister{code: 503, resp: `{"error":"no leader"}`})
	defer busy.Close()
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	defer drop.Close()
	tests := []struct {
		name         string
		servers      []string
		notDelivered bool
	}{
		{"refused", []string{deadAddr}, true},
		{"503", []string{deadAddr, busy.Listener.Addr().String()}, false},
		{"dropped", []string{drop.Listener.Addr().String()}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := newAdapter(t, tt.servers...)
			_, err := reg.Renew(context.Background(), "lim", fsm.Renew{Report: fsm.Report{LeaseID: 1, Epoch: 1}, TTLNanos: int64(time.Second), RequestID: "r"})
			if err == nil {
				t.Fatal("renew succeeded, want an error")
			}
			if got := errors.Is(err, worker.ErrNotDelivered); got != tt.notDelivered {
				t.Errorf("errors.Is(%v, worker.ErrNotDelivered) = %v, want %v", err, got, tt.notDelivered)
			}
		})
	}
}
