package client

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/server/fakestore"
)

// fakeClock advances only when slept on; it records every sleep.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	sleeps  []time.Duration
	onSleep func(n int) // called (unlocked) after the n-th sleep, 1-based
}

// newFakeClock starts at the real now, so that real context deadlines
// computed from it lie in the future.
func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	if d > 0 {
		f.now = f.now.Add(d)
	}
	n, hook := len(f.sleeps), f.onSleep
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return ctx.Err()
}

func (f *fakeClock) Sleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// drive makes the register's clock follow the client's: every sleep of
// clk advances st by as long.
func drive(clk *fakeClock, st *fakestore.Store) {
	clk.onSleep = func(n int) {
		if d := clk.Sleeps()[n-1]; d > 0 {
			st.Advance(int64(d))
		}
	}
}

// apiServer is an httptest server running the real handler on a fake store.
func apiServer(t *testing.T) (*httptest.Server, *fakestore.Store) {
	t.Helper()
	st := fakestore.New()
	srv := httptest.NewServer(server.NewHandler(st, server.HandlerOptions{}))
	t.Cleanup(srv.Close)
	return srv, st
}

// deadServer returns the address of a server that is not listening.
func deadServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	return addr
}

// scripted is a server that answers reserves from a script and records
// the request ids it saw.
type scripted struct {
	mu    sync.Mutex
	ids   []string
	hits  int
	reply func(hit int, w http.ResponseWriter, r *http.Request)
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		RequestID string `json:"request_id"`
		Session   uint64 `json:"session"`
		Seq       uint64 `json:"seq"`
	}
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &body)
	key := body.RequestID
	if body.Session != 0 {
		key = fmt.Sprintf("session:%d:%d", body.Session, body.Seq)
	}
	s.mu.Lock()
	s.hits++
	hit := s.hits
	s.ids = append(s.ids, key)
	s.mu.Unlock()
	s.reply(hit, w, r)
}

func (s *scripted) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

func (s *scripted) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// serve runs h on an httptest server that also opens client sessions
// (POST /v1/sessions answers session 1), as every node does.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"session":1,"idle_ttl_ns":600000000000}`))
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func granted(waitNanos int64) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"granted":true,"wait_ns":%d,"expires_in_ns":0,"duplicate":false}`, waitNanos)
	}
}

func unavailable(_ int, w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, `{"error":"node: no leader reachable"}`)
}

func refused(retryNanos int64) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"granted":false,"retry_after_ns":%d,"error":"no permit"}`, retryNanos)
	}
}

func newClient(t *testing.T, servers []string, opts ...Option) *Client {
	t.Helper()
	c, err := New(servers, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func host(srv *httptest.Server) string { return srv.Listener.Addr().String() }

// listenFunc serves every connection of a fresh loopback port with handle.
func listenFunc(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

func TestNewValidation(t *testing.T) {
	for _, tt := range []struct {
		servers []string
		opts    []Option
	}{
		{nil, nil},
		{[]string{"nohost"}, nil},
		{[]string{"h:1/path"}, nil},
		{[]string{"ftp://h:1"}, nil},
		{[]string{"http://h"}, nil},
		{[]string{"h:1"}, []Option{WithBackoff(0, time.Second)}},
		{[]string{"h:1"}, []Option{WithBackoff(time.Second, time.Millisecond)}},
		{[]string{"h:1"}, []Option{WithRounds(0)}},
		{[]string{"h:1"}, []Option{WithAttemptTimeout(0)}},
		{[]string{"h:1"}, []Option{WithDefaultMaxWait(-1)}},
	} {
		if _, err := New(tt.servers, tt.opts...); !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "client: ") {
			t.Errorf("New(%v): %v, want ErrInvalid", tt.servers, err)
		}
	}
	c := newClient(t, []string{"h:1", "https://[::1]:443/"})
	if got := strings.Join(c.Servers(), " "); got != "http://h:1 https://[::1]:443" {
		t.Errorf("servers %q", got)
	}
}

func TestAdminAgainstHandler(t *testing.T) {
	srv, st := apiServer(t)
	c := newClient(t, []string{host(srv)})
	ctx := context.Background()
	maxRes, exp := int64(3), 500*time.Millisecond
	l, err := c.PutLimit(ctx, "api", LimitSpec{Algorithm: "strict", Rate: 1, Per: 6 * time.Second, MaxReserved: &maxRes, Expiry: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Created || l.Name != "api" || l.Rate != 1 || l.Per != 6*time.Second || *l.MaxReserved != 3 || *l.Expiry != exp ||
		l.IntervalNanos != 6e9 || l.Version != 1 || l.Warmup != nil {
		t.Errorf("put answer %+v", l)
	}
	warm := 10 * time.Second
	if _, err := c.PutLimit(ctx, "w", LimitSpec{Algorithm: "warmup", Rate: 5, Warmup: &warm}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reserve(ctx, "api", 1, 0); err != nil {
		t.Fatal(err)
	}
	l, err = c.GetLimit(ctx, "api")
	if err != nil || l.GrantedRequests != 1 || l.GrantedPermits != 1 || l.Created {
		t.Errorf("get: %+v %v", l, err)
	}
	all, err := c.ListLimits(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "api" || all[1].Name != "w" || *all[1].Warmup != warm || all[1].Per != time.Second {
		t.Errorf("list: %+v %v", all, err)
	}
	// Page by page: one limit a page, then the next page after it.
	page, next, err := c.ListLimitsPage(ctx, LimitsQuery{Size: 1})
	if err != nil || len(page) != 1 || page[0].Name != "api" || next != "api" {
		t.Errorf("first page: %+v next %q %v", page, next, err)
	}
	page, next, err = c.ListLimitsPage(ctx, LimitsQuery{After: next, Size: 1})
	if err != nil || len(page) != 1 || page[0].Name != "w" || next != "" || *page[0].Warmup != warm {
		t.Errorf("last page: %+v next %q %v", page, next, err)
	}
	if page, next, err = c.ListLimitsPage(ctx, LimitsQuery{Prefix: "a"}); err != nil || len(page) != 1 || next != "" {
		t.Errorf("prefix a: %+v next %q %v", page, next, err)
	}
	if _, _, err := c.ListLimitsPage(ctx, LimitsQuery{Size: 10_001}); !errors.Is(err, ErrInvalid) {
		t.Errorf("page of 10 001: %v, want ErrInvalid", err)
	}
	if existed, err := c.DeleteLimit(ctx, "w"); err != nil || !existed {
		t.Errorf("delete: %v %v", existed, err)
	}
	if _, err := c.GetLimit(ctx, "w"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get deleted: %v", err)
	}
	var apiErr *APIError
	_, err = c.PutLimit(ctx, "bad", LimitSpec{Algorithm: "strict", Rate: 1, Warmup: &warm})
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "belongs to algorithm") {
		t.Errorf("put with a foreign option: %v", err)
	}
	if _, err := c.Reserve(ctx, "a b", 1, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("reserve with a bad name: %v", err)
	}
	if _, err := c.Reserve(ctx, "nope", 1, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("reserve on an unknown limit: %v", err)
	}
	if _, err := c.Reserve(ctx, "api", 0, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("reserve 0 permits: %v", err)
	}

	s, err := c.Status(ctx)
	if err != nil || s.ID != "n1" || s.State != "leader" || !s.Ready {
		t.Errorf("status: %+v %v", s, err)
	}
	if s2, err := c.StatusOf(ctx, host(srv)); err != nil || s2.ID != "n1" {
		t.Errorf("status of: %+v %v", s2, err)
	}
	if j, err := c.Join(ctx, "n2", "10.0.0.2:7000"); err != nil || j.Voter || j.ID != "n2" || j.RaftAddr != "10.0.0.2:7000" {
		t.Fatalf("join: %+v %v, want n2 as a non-voter", j, err)
	}
	cl, err := c.Cluster(ctx)
	if err != nil || len(cl.Servers) != 2 || cl.LeaderID != "n1" {
		t.Errorf("cluster: %+v %v", cl, err)
	}
	if err := c.RemoveServer(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	if n := len(st.Status().Servers); n != 1 {
		t.Errorf("servers after remove: %d", n)
	}
	if _, err := c.Join(ctx, "n3", "nohost"); !errors.Is(err, ErrInvalid) {
		t.Errorf("join with a bad address: %v", err)
	}
}

// TestStatusMirrorsNode: client.Status decodes every field of api.Status
// that GET /v1/status serves (StateHash only debug endpoints fill).
func TestStatusMirrorsNode(t *testing.T) {
	want := api.Status{ID: "a", State: "leader", LeaderID: "a", Term: 2, AppliedIndex: 3, CommitIndex: 4, LastLogIndex: 5,
		ClusterNanos: 6, Servers: []api.Server{{ID: "a", RaftAddr: "x:1", Voter: true, Leader: true},
			{ID: "b", RaftAddr: "x:2", Promotion: &api.Promotion{State: api.PromotionBehind, Reason: "r", AppliedIndex: 1, LeaderCommitIndex: 4, WatchedNs: 8, CaughtUpNs: 9}}},
		Ready: true, LastContactNs: 7}
	b, _ := json.Marshal(want)
	var got Status
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	back, _ := json.Marshal(got)
	if string(back) != string(b) {
		t.Errorf("client.Status does not mirror api.Status:\n%s\n%s", back, b)
	}
}

func TestFailoverRemembersGoodServer(t *testing.T) {
	bad := &scripted{reply: unavailable}
	good := &scripted{reply: granted(0)}
	badSrv, goodSrv := serve(t, bad), serve(t, good)
	clk := newFakeClock()
	c := newClient(t, []string{deadServer(t), host(badSrv), host(goodSrv)}, WithClock(clk))
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		g, err := c.Reserve(ctx, "a", 1, 0)
		if err != nil || !g.Granted {
			t.Fatalf("reserve %d: %+v %v", i, g, err)
		}
	}
	if bad.Hits() != 1 || good.Hits() != 3 {
		t.Errorf("hits: 503 server %d (want 1), good server %d (want 3)", bad.Hits(), good.Hits())
	}
	if s := clk.Sleeps(); len(s) != 0 {
		t.Errorf("slept %v within one round", s)
	}
}

func TestAllServersDownIsBounded(t *testing.T) {
	a, b := &scripted{reply: unavailable}, &scripted{reply: unavailable}
	clk := newFakeClock()
	c := newClient(t, []string{host(serve(t, a)), host(serve(t, b)), deadServer(t)}, WithClock(clk), WithRounds(3),
		WithBackoff(10*time.Millisecond, 15*time.Millisecond))
	_, err := c.Reserve(context.Background(), "a", 1, 0)
	if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "client: ") {
		t.Fatalf("err %v, want ErrUnavailable", err)
	}
	if a.Hits() != 3 || b.Hits() != 3 {
		t.Errorf("hits %d %d, want 3 rounds each", a.Hits(), b.Hits())
	}
	sleeps := clk.Sleeps()
	if len(sleeps) != 2 {
		t.Fatalf("sleeps between rounds: %v, want 2", sleeps)
	}
	for k, d := range sleeps {
		if ceil := min(15*time.Millisecond, 10*time.Millisecond<<k); d < 0 || d > ceil {
			t.Errorf("backoff %d = %v, outside [0, %v]", k, d, ceil)
		}
	}
	// One id for every attempt of the one reserve.
	ids := append(a.IDs(), b.IDs()...)
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("request ids differ across retries: %v", ids)
		}
	}
}

// TestRequestIDReusedOnAmbiguousFailure: a server that read the reserve
// and then dropped the connection, and one that answered 503, are retried
// with the same request id.
func TestRequestIDReusedOnAmbiguousFailure(t *testing.T) {
	drop := &scripted{reply: func(_ int, w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // reset after the request was sent
		}
	}}
	busy := &scripted{reply: unavailable}
	good := &scripted{reply: granted(5)}
	c := newClient(t, []string{host(serve(t, drop)), host(serve(t, busy)), host(serve(t, good))}, WithClock(newFakeClock()), WithoutSessions())
	g, err := c.Reserve(context.Background(), "a", 1, time.Second)
	if err != nil || !g.Granted || g.Delay != 5 {
		t.Fatalf("reserve: %+v %v", g, err)
	}
	ids := []string{drop.IDs()[0], busy.IDs()[0], good.IDs()[0]}
	if ids[0] != ids[1] || ids[1] != ids[2] || g.RequestID != ids[0] {
		t.Fatalf("request ids %v, grant %q: want one id", ids, g.RequestID)
	}
	if b, err := hex.DecodeString(ids[0]); err != nil || len(b) != 16 {
		t.Errorf("request id %q is not 16 bytes of hex", ids[0])
	}
	// A new reserve gets a new id.
	if _, err := c.Reserve(context.Background(), "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	if ids := good.IDs(); ids[1] == ids[0] {
		t.Errorf("two reserves share request id %q", ids[0])
	}
}

// TestSessionSeqReusedOnAmbiguousFailure: in a session, a retry after an
// ambiguous failure carries the same session and seq; the next reserve
// the next seq.
func TestSessionSeqReusedOnAmbiguousFailure(t *testing.T) {
	drop := &scripted{reply: func(_ int, w http.ResponseWriter, _ *http.Request) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}}
	good := &scripted{reply: granted(5)}
	c := newClient(t, []string{host(serve(t, drop)), host(serve(t, good))}, WithClock(newFakeClock()))
	g, err := c.Reserve(context.Background(), "a", 1, time.Second)
	if err != nil || !g.Granted {
		t.Fatalf("reserve: %+v %v", g, err)
	}
	if a, b := drop.IDs(), good.IDs(); len(a) != 1 || len(b) != 1 || a[0] != "session:1:1" || b[0] != a[0] || g.RequestID != a[0] {
		t.Fatalf("keys %v then %v, grant %q: want session:1:1 on both", a, b, g.RequestID)
	}
	if _, err := c.Reserve(context.Background(), "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	if ids := good.IDs(); len(ids) != 2 || ids[1] != "session:1:2" {
		t.Fatalf("second reserve keys %v, want session:1:2", ids)
	}
}

// TestSessionExpiredIsSentAgainInANewSession: a 410 (session expired)
// decided nothing; the client opens a new session and sends the request
// as a new one.
func TestSessionExpiredIsSentAgainInANewSession(t *testing.T) {
	var opened atomic.Int64
	var keys []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			n := opened.Add(1)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"session":%d}`, 10*n)
			return
		}
		var body struct{ Session, Seq, AckedBelow uint64 }
		_ = json.NewDecoder(r.Body).Decode(&struct {
			Session    *uint64 `json:"session"`
			Seq        *uint64 `json:"seq"`
			AckedBelow *uint64 `json:"acked_below"`
		}{&body.Session, &body.Seq, &body.AckedBelow})
		mu.Lock()
		keys = append(keys, fmt.Sprintf("%d/%d/%d", body.Session, body.Seq, body.AckedBelow))
		mu.Unlock()
		if body.Session == 10 {
			w.WriteHeader(http.StatusGone)
			_, _ = w.Write([]byte(`{"granted":false,"session_expired":true,"error":"session 10 is not open"}`))
			return
		}
		granted(0)(0, w, r)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, []string{host(srv)})
	g, err := c.Reserve(context.Background(), "a", 1, 0)
	if err != nil || !g.Granted || g.RequestID != "session:20:1" {
		t.Fatalf("reserve after an expired session = %+v, %v; want granted in session 20", g, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != "10/1/1" || keys[1] != "20/1/1" {
		t.Fatalf("reserves sent %v, want 10/1/1 then 20/1/1", keys)
	}
}

// TestRequestIDReusedAfterTimeout: an attempt that times out is retried on
// the next server with the same id.
func TestRequestIDReusedAfterTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := &scripted{reply: func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}}
	good := &scripted{reply: granted(0)}
	slowSrv := serve(t, slow)
	defer close(release) // before slowSrv.Close, which waits for handlers
	c := newClient(t, []string{host(slowSrv), host(serve(t, good))}, WithClock(newFakeClock()), WithAttemptTimeout(50*time.Millisecond))
	g, err := c.Reserve(context.Background(), "a", 1, 0)
	if err != nil || !g.Granted {
		t.Fatalf("reserve: %+v %v", g, err)
	}
	if a, b := slow.IDs()[0], good.IDs()[0]; a != b {
		t.Errorf("ids %q, %q differ", a, b)
	}
}

// TestAcquireWaitsTheRetryAfter: refused, Acquire sleeps until the
// refusal's retry_after (a reserve before then would be refused again),
// plus a jitter of at most min(backoff base, retry_after/4) that is
// reproducible from the seed; a refusal without a retry_after backs off
// with full jitter; a retry_after past the context's deadline fails at
// once, without a sleep, with the refusal.
func TestAcquireWaitsTheRetryAfter(t *testing.T) {
	const retry = 30 * time.Millisecond
	for _, bc := range []struct {
		name      string
		retry     time.Duration
		base, max time.Duration
		lo, hi    func(k int) time.Duration
	}{
		{"until retry_after, jittered by up to a quarter of it", retry, time.Second, 10 * time.Second,
			func(int) time.Duration { return retry }, func(int) time.Duration { return retry + retry/4 }},
		{"jittered by up to the backoff base", retry, time.Millisecond, 8 * time.Millisecond,
			func(int) time.Duration { return retry }, func(int) time.Duration { return retry + time.Millisecond }},
		{"full jitter without a retry_after", 0, time.Millisecond, 8 * time.Millisecond,
			func(int) time.Duration { return 0 }, func(k int) time.Duration { return min(8*time.Millisecond, time.Millisecond<<k) }},
	} {
		t.Run(bc.name, func(t *testing.T) {
			run := func() []time.Duration {
				s := &scripted{}
				s.reply = func(hit int, w http.ResponseWriter, r *http.Request) {
					if hit <= 12 {
						refused(int64(bc.retry))(hit, w, r)
						return
					}
					granted(0)(hit, w, r)
				}
				clk := newFakeClock()
				c := newClient(t, []string{host(serve(t, s))}, WithClock(clk), WithSeed(42), WithBackoff(bc.base, bc.max))
				if err := c.Acquire(context.Background(), "a", 1); err != nil {
					t.Fatal(err)
				}
				if s.Hits() != 13 {
					t.Errorf("hits %d, want 13", s.Hits())
				}
				if ids := s.IDs(); ids[0] == ids[1] {
					t.Errorf("a refused reserve was retried with the same id")
				}
				return clk.Sleeps()
			}
			sleeps := run()
			if len(sleeps) != 12 {
				t.Fatalf("%d sleeps, want 12: %v", len(sleeps), sleeps)
			}
			distinct := map[time.Duration]bool{}
			for k, d := range sleeps {
				if d < bc.lo(k) || d > bc.hi(k) {
					t.Errorf("sleep %d = %v, outside [%v, %v]", k, d, bc.lo(k), bc.hi(k))
				}
				distinct[d] = true
			}
			if len(distinct) < 6 {
				t.Errorf("sleeps are not jittered: %v", sleeps)
			}
			if again := run(); fmt.Sprint(again) != fmt.Sprint(sleeps) {
				t.Errorf("same seed, different sleeps:\n%v\n%v", sleeps, again)
			}
		})
	}
	t.Run("a retry_after past the deadline fails at once", func(t *testing.T) {
		s := &scripted{reply: refused(int64(time.Minute))}
		clk := newFakeClock()
		c := newClient(t, []string{host(serve(t, s))}, WithClock(clk))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := c.Acquire(ctx, "a", 1)
		var refusal *RefusedError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &refusal) || refusal.RetryAfter != time.Minute {
			t.Errorf("err %v, want context.DeadlineExceeded with the refusal", err)
		}
		if s.Hits() != 1 || len(clk.Sleeps()) != 0 {
			t.Errorf("%d reserves and sleeps %v, want 1 reserve and no sleep", s.Hits(), clk.Sleeps())
		}
	})
}

// TestAcquireOnALimitWithoutMaxReservedIsRefusedOncePerGrant: a strict
// limit of 4 a second that may not reserve ahead (max_reserved 0) refuses
// every reserve made before its next slot, naming the setting; Acquire
// then waits for the slot, so five acquires in a row cost at most one
// refusal each. Backing off with full jitter within the retry_after, it
// polled: 25 refusals for 5 grants.
func TestAcquireOnALimitWithoutMaxReservedIsRefusedOncePerGrant(t *testing.T) {
	srv, st := apiServer(t)
	clk := newFakeClock()
	drive(clk, st)
	c := newClient(t, []string{host(srv)}, WithClock(clk))
	ctx := context.Background()
	if _, err := c.PutLimit(ctx, "api", LimitSpec{Algorithm: "strict", Rate: 4, Per: time.Second, MaxReserved: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	const grants = 5
	for i := range grants {
		if err := c.Acquire(ctx, "api", 1); err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
	}
	info, err := st.Limit(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	if info.GrantedRequests != grants || info.RefusedRequests > grants {
		t.Errorf("%d grants and %d refusals for %d acquires; want at most one refusal per grant", info.GrantedRequests, info.RefusedRequests, grants)
	}
	g, err := c.Reserve(ctx, "api", 1, 10*time.Second)
	if err != nil || g.Granted || !strings.Contains(g.Refusal, "max_reserved is 0") || !strings.Contains(g.Refusal, "--max-reserved") {
		t.Errorf("reserve with max wait 10s right after a grant: %+v, %v; want a refusal naming max_reserved and --max-reserved", g, err)
	}
}

// TestGrantWaitCountsFromReceipt: the wait starts when the answer arrives,
// not when the request was sent.
func TestGrantWaitCountsFromReceipt(t *testing.T) {
	clk := newFakeClock()
	start := clk.Now()
	s := &scripted{reply: func(hit int, w http.ResponseWriter, r *http.Request) {
		clk.Advance(40 * time.Millisecond) // the answer takes 40ms to arrive
		granted(int64(100*time.Millisecond))(hit, w, r)
	}}
	c := newClient(t, []string{host(serve(t, s))}, WithClock(clk))
	g, err := c.TryAcquire(context.Background(), "a", 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !g.SentAt.Equal(start) || !g.ReceivedAt.Equal(start.Add(40*time.Millisecond)) {
		t.Errorf("sent %v received %v, want +0 and +40ms", g.SentAt.Sub(start), g.ReceivedAt.Sub(start))
	}
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := clk.Sleeps(); len(s) != 1 || s[0] != 100*time.Millisecond {
		t.Errorf("slept %v, want [100ms]", s)
	}
	if err := c.Acquire(context.Background(), "a", 1); err != nil {
		t.Fatal(err)
	}
	if s := clk.Sleeps(); len(s) != 2 || s[1] != 100*time.Millisecond {
		t.Errorf("acquire slept %v, want 100ms", s)
	}
}

// TestGrantTimesOfFarPermitsSaturate: permit j of a grant is at its time
// plus j spacings; for the largest grants of the longest intervals the
// register accepts, that product passes the int64 range and must read as
// the far future (where time.Time.Add saturates), never wrap into the past
// where the permit would look usable at once.
func TestGrantTimesOfFarPermitsSaturate(t *testing.T) {
	now := time.Now()
	g := Grant{Granted: true, Permits: math.MaxInt64, SentAt: now, ReceivedAt: now, Spacing: time.Hour, ExpiresIn: time.Minute}
	for _, j := range []int64{1, 1 << 20, 1 << 40, math.MaxInt64 - 1} {
		if at := g.ReadyAtPermit(j); !at.After(now) {
			t.Errorf("ReadyAtPermit(%d) of a grant an hour apart = %v, not after the grant's time %v", j, at, now)
		}
		if exp := g.ExpiresAtPermit(j); !exp.After(now) {
			t.Errorf("ExpiresAtPermit(%d) of a grant an hour apart = %v, not after the grant's time %v", j, exp, now)
		}
	}
	lease := LeaseGrant{Status: LeaseGranted, SentAt: now, ExpiresIn: time.Second}
	if u := lease.UsableUntil(time.Duration(math.MaxInt64)); !u.Before(now) {
		t.Errorf("UsableUntil with a margin of math.MaxInt64 = %v, want before the grant was sent (%v)", u, now)
	}
}

func TestGrantExpiry(t *testing.T) {
	clk := newFakeClock()
	s := &scripted{reply: func(_ int, w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"granted":true,"wait_ns":100000000,"expires_in_ns":50000000,"duplicate":false}`)
	}}
	c := newClient(t, []string{host(serve(t, s))}, WithClock(clk))
	g, err := c.Reserve(context.Background(), "a", 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(context.Background()); !errors.Is(err, ErrExpired) {
		t.Errorf("wait past expiry: %v", err)
	}
	if err := (Grant{}).Wait(context.Background()); !errors.Is(err, ErrThrottled) {
		t.Errorf("wait on a refused grant: %v", err)
	}
}

func TestAcquireContext(t *testing.T) {
	s := &scripted{reply: refused(int64(time.Second))}
	srv := serve(t, s)

	t.Run("canceled while backing off", func(t *testing.T) {
		clk := newFakeClock()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		clk.onSleep = func(n int) {
			if n == 3 {
				cancel()
			}
		}
		c := newClient(t, []string{host(srv)}, WithClock(clk))
		before := s.Hits()
		err := c.Acquire(ctx, "a", 1)
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "client: ") {
			t.Errorf("err %v, want context.Canceled", err)
		}
		if n := s.Hits() - before; n != 3 {
			t.Errorf("%d reserves, want 3", n)
		}
	})
	t.Run("deadline already passed", func(t *testing.T) {
		c := newClient(t, []string{host(srv)})
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		before := s.Hits()
		if err := c.Acquire(ctx, "a", 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v", err)
		}
		if s.Hits() != before {
			t.Errorf("sent a reserve after the deadline")
		}
	})
	t.Run("max_wait is the time to the deadline", func(t *testing.T) {
		var got atomic.Value
		srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				MaxWait string `json:"max_wait"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			got.Store(body.MaxWait)
			granted(0)(0, w, r)
		}))
		clk := newFakeClock()
		c := newClient(t, []string{host(srv)}, WithClock(clk))
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(1500*time.Millisecond))
		defer cancel()
		if err := c.Acquire(ctx, "a", 1); err != nil {
			t.Fatal(err)
		}
		if got.Load() != "1.5s" {
			t.Errorf("max_wait %v, want 1.5s", got.Load())
		}
		c = newClient(t, []string{host(srv)}, WithClock(clk), WithDefaultMaxWait(3*time.Second))
		if err := c.Acquire(context.Background(), "a", 1); err != nil {
			t.Fatal(err)
		}
		if got.Load() != "3s" {
			t.Errorf("max_wait without deadline %v, want 3s", got.Load())
		}
	})
	t.Run("canceled during the request", func(t *testing.T) {
		arrived := make(chan struct{})
		srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The server notices a closed connection only once the body
			// is consumed.
			_, _ = io.Copy(io.Discard, r.Body)
			close(arrived)
			<-r.Context().Done()
		}))
		c := newClient(t, []string{host(srv)})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-arrived; cancel() }()
		if _, err := c.Reserve(ctx, "a", 1, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	})
}

// strictOnAFakeClock is a client, on a fake clock, of a register (the real
// fsm behind the HTTP API) holding limit "api": strict, 1 a second,
// maxReserved ahead.
func strictOnAFakeClock(t *testing.T, maxReserved int64) (*Client, *fakeClock) {
	t.Helper()
	srv, st := apiServer(t)
	clk := newFakeClock()
	drive(clk, st)
	c := newClient(t, []string{host(srv)}, WithClock(clk))
	if _, err := c.PutLimit(context.Background(), "api", LimitSpec{Algorithm: "strict", Rate: 1, Per: time.Second, MaxReserved: ptr(maxReserved)}); err != nil {
		t.Fatal(err)
	}
	return c, clk
}

func TestThrottleModes(t *testing.T) {
	c, clk := strictOnAFakeClock(t, 5)
	ctx := context.Background()
	calls := 0
	fn := func(context.Context) error { calls++; return nil }

	block := c.Throttle("api", Block)
	if err := block(ctx, fn); err != nil || calls != 1 {
		t.Fatalf("block 1: %v calls %d", err, calls)
	}
	// The next permit is 1s away and may be reserved ahead: Block is
	// granted it with a wait of 1s and sleeps that long.
	if err := block(ctx, fn); err != nil || calls != 2 {
		t.Fatalf("block 2: %v calls %d", err, calls)
	}
	if s := clk.Sleeps(); len(s) != 1 || s[0] != time.Second {
		t.Errorf("block slept %v, want [1s]", s)
	}

	fail := c.Throttle("api", Fail)
	err := fail(ctx, fn)
	var refusal *RefusedError
	if !errors.Is(err, ErrThrottled) || !errors.As(err, &refusal) || refusal.RetryAfter != time.Second || calls != 2 {
		t.Fatalf("fail: %v (refusal %+v), calls %d", err, refusal, calls)
	}
	if len(clk.Sleeps()) != 1 {
		t.Errorf("fail mode slept")
	}
	// With a max wait that covers the next permit, Fail mode waits.
	if err := c.Throttle("api", Fail, ThrottleMaxWait(5*time.Second))(ctx, fn); err != nil || calls != 3 {
		t.Fatalf("fail with max wait: %v calls %d", err, calls)
	}

	wrapped := Wrap(c, "api", Fail, func(context.Context) (string, error) { return "ran", nil })
	if v, err := wrapped(ctx); !errors.Is(err, ErrThrottled) || v != "" {
		t.Errorf("wrap fail: %q %v", v, err)
	}
	// Two permits of a strict limit can never be used together.
	wrapped = Wrap(c, "api", Block, func(context.Context) (string, error) { return "ran", nil }, ThrottlePermits(2))
	if v, err := wrapped(ctx); !errors.Is(err, ErrSpacedGrant) || v != "" {
		t.Errorf("wrap block of 2 strict permits: %q %v, want ErrSpacedGrant without running", v, err)
	}
	wrapped = Wrap(c, "api", Block, func(context.Context) (string, error) { return "ran", nil })
	if v, err := wrapped(ctx); err != nil || v != "ran" {
		t.Errorf("wrap block: %q %v", v, err)
	}
	want := errors.New("boom")
	if err := c.Throttle("api", Block)(ctx, func(context.Context) error { return want }); err != want {
		t.Errorf("fn error %v", err)
	}
	if err := c.Throttle("missing", Block)(ctx, fn); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown limit: %v", err)
	}
	if err := c.Throttle("api", Mode(9))(ctx, fn); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad mode: %v", err)
	}
}

// TestAcquireEachPacesSpacedPermits: a strict grant of 3 permits is used
// one interval apart, never together.
func TestAcquireEachPacesSpacedPermits(t *testing.T) {
	c, clk := strictOnAFakeClock(t, 2)
	ctx := context.Background()
	var used []time.Time
	start := clk.Now()
	err := c.AcquireEach(ctx, "api", 3, func(_ context.Context, j int64) error {
		if int(j) != len(used) {
			t.Errorf("use(%d) after %d uses", j, len(used))
		}
		used = append(used, clk.Now())
		return nil
	})
	if err != nil || len(used) != 3 {
		t.Fatalf("AcquireEach: %v, %d uses", err, len(used))
	}
	for j, at := range used {
		if want := start.Add(time.Duration(j) * time.Second); at.Before(want) {
			t.Errorf("permit %d used at +%v, before its slot +%v", j, at.Sub(start), want.Sub(start))
		}
	}
	g, err := c.Reserve(ctx, "api", 2, 10*time.Second)
	if err != nil || !g.Granted || g.Spacing != time.Second || !g.Spaced() {
		t.Fatalf("Reserve(2) = %+v, %v; want a grant spaced 1 s", g, err)
	}
	if err := g.Wait(ctx); !errors.Is(err, ErrSpacedGrant) {
		t.Fatalf("Wait on a spaced grant: %v, want ErrSpacedGrant", err)
	}
	if err := c.Acquire(ctx, "api", 2); !errors.Is(err, ErrSpacedGrant) {
		t.Fatalf("Acquire(2) on a strict limit: %v, want ErrSpacedGrant", err)
	}
}

func ptr[T any](v T) *T { return &v }

// grantedWhile grants while up is set and answers 503 otherwise.
func grantedWhile(up *atomic.Bool) func(int, http.ResponseWriter, *http.Request) {
	return func(hit int, w http.ResponseWriter, r *http.Request) {
		if up.Load() {
			granted(0)(hit, w, r)
			return
		}
		unavailable(hit, w, r)
	}
}

// TestReturnToFirstServer: with WithReturnToFirst, calls that moved away
// from a failing first server keep to the one that answered until the
// period has passed, then one call tries the first again: while it still
// fails the calls stay away for another period, and once it answers they
// stay with it. Without the option they never return.
func TestReturnToFirstServer(t *testing.T) {
	var firstUp atomic.Bool
	first := &scripted{reply: grantedWhile(&firstUp)}
	second := &scripted{reply: granted(0)}
	firstSrv, secondSrv := serve(t, first), serve(t, second)
	clk := newFakeClock()
	c := newClient(t, []string{host(firstSrv), host(secondSrv)}, WithClock(clk), WithReturnToFirst(time.Minute), WithoutSessions())
	sticky := newClient(t, []string{host(firstSrv), host(secondSrv)}, WithClock(clk), WithoutSessions())
	ctx := context.Background()
	reserve := func(cl *Client) {
		t.Helper()
		if g, err := cl.Reserve(ctx, "a", 1, 0); err != nil || !g.Granted {
			t.Fatalf("reserve: %+v %v", g, err)
		}
	}
	hits := func() (int, int) { return first.Hits(), second.Hits() }
	reserve(c) // first fails, second answers: the calls left the first
	reserve(c)
	if f, s := hits(); f != 1 || s != 2 {
		t.Fatalf("before the period: first %d hits (want 1), second %d (want 2)", f, s)
	}
	clk.Advance(time.Minute)
	reserve(c) // the first is tried again, still fails
	reserve(c)
	if f, s := hits(); f != 2 || s != 4 {
		t.Fatalf("one period later, the first still down: first %d hits (want 2), second %d (want 4)", f, s)
	}
	firstUp.Store(true)
	clk.Advance(59 * time.Second)
	reserve(c)
	if f, _ := hits(); f != 2 {
		t.Fatalf("the first was tried again before another period passed: %d hits", f)
	}
	clk.Advance(time.Second)
	reserve(c) // back with the first
	reserve(c)
	if f, s := hits(); f != 4 || s != 5 {
		t.Fatalf("after the first came back: first %d hits (want 4), second %d (want 5)", f, s)
	}
	firstUp.Store(false)
	reserve(sticky)
	firstUp.Store(true)
	clk.Advance(time.Hour)
	reserve(sticky)
	if f, s := hits(); f != 5 || s != 7 {
		t.Errorf("without the option: first %d hits (want 5), second %d (want 7): the client returned", f, s)
	}
}

// TestReturnToFirstIgnoresALateAnswer: with WithReturnToFirst, a call that
// started at the second server while the first was down and is answered
// after the calls went back to the first does not move them off it again.
func TestReturnToFirstIgnoresALateAnswer(t *testing.T) {
	var firstUp atomic.Bool
	first := &scripted{reply: grantedWhile(&firstUp)}
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	second := &scripted{reply: func(hit int, w http.ResponseWriter, r *http.Request) {
		if hit == 2 { // the late call: held until the calls are back home
			held <- struct{}{}
			<-release
		}
		granted(0)(hit, w, r)
	}}
	clk := newFakeClock()
	c := newClient(t, []string{host(serve(t, first)), host(serve(t, second))}, WithClock(clk), WithReturnToFirst(time.Minute), WithoutSessions())
	ctx := context.Background()
	reserve := func() error {
		g, err := c.Reserve(ctx, "a", 1, 0)
		if err == nil && !g.Granted {
			err = fmt.Errorf("not granted: %+v", g)
		}
		return err
	}
	if err := reserve(); err != nil { // first down: answered by the second
		t.Fatal(err)
	}
	late := make(chan error, 1)
	go func() { late <- reserve() }() // starts at the second, held there
	<-held
	firstUp.Store(true)
	clk.Advance(time.Minute)
	if err := reserve(); err != nil { // the probe: the first answers, the calls are home
		t.Fatal(err)
	}
	close(release)
	if err := <-late; err != nil {
		t.Fatal(err)
	}
	before := first.Hits()
	if err := reserve(); err != nil {
		t.Fatal(err)
	}
	if first.Hits() != before+1 {
		t.Errorf("after a late answer from the second server the next call went there (first %d hits, want %d): the late answer moved the calls off the first", first.Hits(), before+1)
	}
}

// ListLimits reads a register past one page (10 000 limits) page by page
// (the unpaged list is refused there), every limit once, in order; and
// stops after one answer from a server that does not page.
func TestListLimitsPagesBeyondOnePage(t *testing.T) {
	srv, st := apiServer(t)
	c := newClient(t, []string{host(srv)})
	ctx := context.Background()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_001
	for i := range n {
		if _, err := st.PutLimit(ctx, fsm.PutLimit{Name: fmt.Sprintf("k:%05d", i), Config: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.ListLimits(ctx)
	if err != nil || len(all) != n {
		t.Fatalf("ListLimits: %d limits, %v; want %d", len(all), err, n)
	}
	for i, l := range all {
		if want := fmt.Sprintf("k:%05d", i); l.Name != want {
			t.Fatalf("limit %d is %q, want %q", i, l.Name, want)
		}
	}

	unpaged := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"limits":[{"name":"a","algorithm":"strict","rate":1,"per":"1s"}]}`)
	}))
	t.Cleanup(unpaged.Close)
	old := newClient(t, []string{host(unpaged)})
	if got, err := old.ListLimits(ctx); err != nil || len(got) != 1 {
		t.Errorf("ListLimits from a server that does not page: %+v %v, want its one limit", got, err)
	}
}
