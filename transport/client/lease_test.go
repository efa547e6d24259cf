package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLeaseAgainstHandler drives the lease methods against the real
// handler on the fake store.
func TestLeaseAgainstHandler(t *testing.T) {
	srv, st := apiServer(t)
	c := newClient(t, []string{host(srv)})
	ctx := context.Background()
	if _, err := c.PutLimit(ctx, "api", LimitSpec{Algorithm: "strict", Rate: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leases(ctx, "api"); !errors.Is(err, ErrInvalid) {
		t.Errorf("leases of a linearized limit: %v", err)
	}
	pol, err := c.PutLeasePolicy(ctx, "api", LeasePolicy{Leased: true, BurstPermits: 100})
	if err != nil || pol != (LeasePolicyResult{Name: "api", Leased: true, BurstPermits: 100, MaxOutstandingPermits: 1000}) {
		t.Fatalf("policy: %+v %v", pol, err)
	}
	if _, err := c.PutLeasePolicy(ctx, "nope", LeasePolicy{Leased: true}); !errors.Is(err, ErrNotFound) {
		t.Errorf("policy of an unknown limit: %v", err)
	}
	if _, err := c.PutLeasePolicy(ctx, "api", LeasePolicy{BurstPermits: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("policy off with a burst: %v", err)
	}
	if _, err := c.Reserve(ctx, "api", 1, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("reserve on a leased limit: %v", err)
	}

	// The pool mints from the policy on: 100 ms fill its burst of 100.
	st.Advance(100e6)
	g, err := c.Lease(ctx, "api", LeaseRequest{Holder: "h1", Group: "g1", Weight: 2, DemandMilliPerSec: 10_000, TTL: 2 * time.Second})
	if err != nil || !g.Granted() || g.LeaseID != 1 || g.Epoch != 1 || g.Permits != 10 || g.ExpiresIn != 2*time.Second ||
		g.ShareMilliPerSec != 10_000 || g.Duplicate || len(g.RequestID) != 32 || g.SentAt.IsZero() || g.ReceivedAt.Before(g.SentAt) {
		t.Fatalf("lease: %+v %v", g, err)
	}
	if !g.ExpiresAt().Equal(g.SentAt.Add(2*time.Second)) || !g.UsableUntil(20*time.Millisecond).Equal(g.SentAt.Add(1980*time.Millisecond)) {
		t.Errorf("expiry %v, usable until %v, sent %v", g.ExpiresAt(), g.UsableUntil(20*time.Millisecond), g.SentAt)
	}
	// The same request id replays the decision.
	again, err := c.Lease(ctx, "api", LeaseRequest{Holder: "h1", Group: "g1", DemandMilliPerSec: 10_000, TTL: 2 * time.Second, RequestID: g.RequestID})
	if err != nil || !again.Duplicate || again.LeaseID != 1 || again.RequestID != g.RequestID {
		t.Errorf("replayed lease: %+v %v", again, err)
	}
	// A second lease of the holder is refused: an answer, not an error.
	ref, err := c.Lease(ctx, "api", LeaseRequest{Holder: "h1", Group: "g1", DemandMilliPerSec: 1000, TTL: time.Second})
	if err != nil || ref.Status != LeaseRefused || ref.LeaseID != 1 || ref.RetryAfter != 2*time.Second || !strings.Contains(ref.Detail, "already holds") ||
		!ref.ExpiresAt().IsZero() || !ref.UsableUntil(0).IsZero() {
		t.Errorf("second lease: %+v %v", ref, err)
	}

	r, err := c.Renew(ctx, "api", g.LeaseID, g.Epoch, LeaseReport{Spent: 5, StolenOut: 1, StolenIn: 2, DemandMilliPerSec: 1500, TTL: 4 * time.Second})
	if err != nil || r.Status != LeaseGranted || r.Epoch != 2 || r.CreditedPermits != 4 || r.Permits != 1 || r.ShareMilliPerSec != 1500 {
		t.Fatalf("renew: %+v %v", r, err)
	}
	f, err := c.Renew(ctx, "api", g.LeaseID, g.Epoch, LeaseReport{DemandMilliPerSec: 1000, TTL: time.Second})
	if err != nil || f.Status != LeaseFenced || f.Granted() || !strings.Contains(f.Detail, "not 1") {
		t.Errorf("stale renew: %+v %v", f, err)
	}
	if _, err := c.Return(ctx, "api", g.LeaseID, r.Epoch, LeaseReport{Spent: 7}); !errors.Is(err, ErrInvalid) {
		t.Errorf("over-report: %v", err)
	}
	pool, err := c.Leases(ctx, "api")
	if err != nil || pool.Name != "api" || pool.MintedPermits != 100 || pool.OutstandingPermits != 2 || pool.BurstPermits != 100 ||
		pool.BurstSpec != 100 || pool.Fenced != 1 || len(pool.Leases) != 1 {
		t.Fatalf("pool: %+v %v", pool, err)
	}
	if ls := pool.Leases[0]; ls.LeaseID != 1 || ls.Epoch != 2 || !ls.Active || ls.Holder != "h1" || ls.Weight != 2 || ls.DemandMilliPerSec != 1500 ||
		ls.Permits != 1 || ls.StolenInPermits != 2 {
		t.Errorf("lease state: %+v", ls)
	}
	ret, err := c.Return(ctx, "api", g.LeaseID, r.Epoch, LeaseReport{Spent: 1})
	if err != nil || ret.Status != LeaseReturned || ret.CreditedPermits != 0 || ret.LeaseID != 1 {
		t.Errorf("return: %+v %v", ret, err)
	}
	if _, err := c.Lease(ctx, "nope", LeaseRequest{Holder: "h", Group: "g", TTL: time.Second}); !errors.Is(err, ErrNotFound) {
		t.Errorf("lease on an unknown limit: %v", err)
	}
	if _, err := c.Lease(ctx, "api", LeaseRequest{Holder: "h h", Group: "g", TTL: time.Second}); !errors.Is(err, ErrInvalid) {
		t.Errorf("lease with a bad holder: %v", err)
	}
	if _, err := c.Lease(ctx, "api", LeaseRequest{Holder: "h", Group: "g", TTL: time.Hour}); !errors.Is(err, ErrInvalid) {
		t.Errorf("lease with a TTL of an hour: %v", err)
	}
	// The superseded epoch's permits linger until its grant expires.
	st.Advance(5e9)
	if pol, err := c.PutLeasePolicy(ctx, "api", LeasePolicy{}); err != nil || pol.Leased {
		t.Errorf("policy off: %+v %v", pol, err)
	}
	if n := len(st.LeaseCommands()); n != 8 {
		t.Errorf("%d lease commands reached the store, want 8", n)
	}
}

// leaseScript is a server that answers lease commands from a script and
// records their bodies.
type leaseScript struct {
	mu     sync.Mutex
	bodies []map[string]any
	paths  []string
	reply  func(hit int, w http.ResponseWriter)
}

func (s *leaseScript) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	s.mu.Lock()
	s.bodies = append(s.bodies, m)
	s.paths = append(s.paths, r.Method+" "+r.URL.EscapedPath())
	hit := len(s.bodies)
	s.mu.Unlock()
	s.reply(hit, w)
}

func (s *leaseScript) Bodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// TestLeaseSentAtAndRequestID: SentAt is read before the answered request
// was sent (the decision may come any time before the answer arrives), and
// the request id stays the same across failover.
func TestLeaseSentAtAndRequestID(t *testing.T) {
	clk := newFakeClock()
	busy := &leaseScript{reply: func(_ int, w http.ResponseWriter) {
		clk.Advance(7 * time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"node: no leader reachable"}`)
	}}
	var sentAt time.Time
	good := &leaseScript{reply: func(_ int, w http.ResponseWriter) {
		sentAt = clk.Now()
		clk.Advance(40 * time.Millisecond) // the answer takes 40ms
		fmt.Fprint(w, `{"status":"granted","lease_id":9,"epoch":3,"permits":12,"expires_in_ns":1000000000,"share_milli_per_sec":1,"credited_permits":4,"duplicate":true}`)
	}}
	c := newClient(t, []string{host(serve(t, busy)), host(serve(t, good))}, WithClock(clk))
	g, err := c.Renew(context.Background(), "a:b", 9, 2, LeaseReport{Spent: 3, DemandMilliPerSec: 300, TTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := LeaseGrant{Status: LeaseGranted, LeaseID: 9, Epoch: 3, Permits: 12, ExpiresIn: time.Second, ShareMilliPerSec: 1,
		CreditedPermits: 4, Duplicate: true, RequestID: g.RequestID, SentAt: sentAt, ReceivedAt: sentAt.Add(40 * time.Millisecond)}
	if g != want {
		t.Errorf("grant\n got %+v\nwant %+v", g, want)
	}
	if !g.ExpiresAt().Equal(sentAt.Add(time.Second)) {
		t.Errorf("expires at %v, want SentAt + 1s", g.ExpiresAt())
	}
	b1, b2 := busy.Bodies()[0], good.Bodies()[0]
	if fmt.Sprint(b1) != fmt.Sprint(b2) || b2["request_id"] != g.RequestID {
		t.Errorf("bodies differ across failover: %v / %v", b1, b2)
	}
	if b2["epoch"] != 2.0 || b2["spent"] != 3.0 || b2["ttl"] != "1.5s" || b2["demand_milli_per_sec"] != 300.0 {
		t.Errorf("renew body %v", b2)
	}
	if _, ok := b2["stolen_out"]; ok {
		t.Errorf("zero report fields are sent: %v", b2)
	}
	if p := good.paths[0]; p != "POST /v1/limits/a:b/leases/9/renew" {
		t.Errorf("path %q", p)
	}
}

func TestLeaseAnswers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		code   int
		body   string
		status LeaseStatus
		err    error
	}{
		{"refused", 429, `{"status":"refused","lease_id":1,"epoch":1,"retry_after_ns":5,"error":"already holds"}`, LeaseRefused, nil},
		{"fenced", 409, `{"status":"fenced","error":"stop"}`, LeaseFenced, nil},
		{"returned", 200, `{"status":"returned","credited_permits":2}`, LeaseReturned, nil},
		{"not found", 404, `{"error":"limit not found"}`, "", ErrNotFound},
		{"invalid", 400, `{"error":"bad"}`, "", ErrInvalid},
		{"status does not match the code", 200, `{"status":"fenced"}`, "", nil},
		{"garbage", 200, `{"status":`, "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &leaseScript{reply: func(_ int, w http.ResponseWriter) {
				w.WriteHeader(tt.code)
				fmt.Fprint(w, tt.body)
			}}
			c := newClient(t, []string{host(serve(t, s))}, WithClock(newFakeClock()))
			g, err := c.Return(context.Background(), "a", 1, 1, LeaseReport{})
			switch {
			case tt.status != "":
				if err != nil || g.Status != tt.status {
					t.Errorf("got %+v %v, want status %s", g, err, tt.status)
				}
			case tt.err != nil:
				if !errors.Is(err, tt.err) {
					t.Errorf("got %+v %v, want %v", g, err, tt.err)
				}
			default:
				if err == nil || !strings.HasPrefix(err.Error(), "client: ") {
					t.Errorf("got %+v %v, want an error", g, err)
				}
			}
		})
	}
}

// TestLeaseClientValidation: requests the server would reject are not sent.
func TestLeaseClientValidation(t *testing.T) {
	s := &leaseScript{reply: func(int, http.ResponseWriter) {}}
	c := newClient(t, []string{host(serve(t, s))}, WithClock(newFakeClock()))
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"lease neg demand": func() error {
			_, err := c.Lease(ctx, "a", LeaseRequest{DemandMilliPerSec: -1, TTL: time.Second})
			return err
		},
		"lease big demand": func() error {
			_, err := c.Lease(ctx, "a", LeaseRequest{DemandMilliPerSec: MaxDemandMilliPerSec + 1, TTL: time.Second})
			return err
		},
		"lease zero TTL":   func() error { _, err := c.Lease(ctx, "a", LeaseRequest{DemandMilliPerSec: 1}); return err },
		"renew zero TTL":   func() error { _, err := c.Renew(ctx, "a", 1, 1, LeaseReport{}); return err },
		"renew epoch 0":    func() error { _, err := c.Renew(ctx, "a", 1, 0, LeaseReport{TTL: time.Second}); return err },
		"return lease 0":   func() error { _, err := c.Return(ctx, "a", 0, 1, LeaseReport{}); return err },
		"return neg spent": func() error { _, err := c.Return(ctx, "a", 1, 1, LeaseReport{Spent: -1}); return err },
		"renew neg stolen": func() error {
			_, err := c.Renew(ctx, "a", 1, 1, LeaseReport{StolenIn: -1, TTL: time.Second})
			return err
		},
		"renew big demand": func() error {
			_, err := c.Renew(ctx, "a", 1, 1, LeaseReport{DemandMilliPerSec: MaxDemandMilliPerSec + 1, TTL: time.Second})
			return err
		},
		"return neg stolen": func() error { _, err := c.Return(ctx, "a", 1, 1, LeaseReport{StolenOut: -1}); return err },
	} {
		if err := call(); !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "client: ") {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n := len(s.Bodies()); n != 0 {
		t.Errorf("%d invalid requests were sent", n)
	}
}
