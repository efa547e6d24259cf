package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/server/fakestore"
	"github.com/permitd/permitd/transport/wire"
)

// TestSessionRefusedFallsBackToRequestIDs: against the real handler with
// one session per token, a client whose token's quota is taken has its
// open refused (503 with retry_after_ns): the refusal is the register's
// decision, sent once and not failed over to the next server; Reserve
// carries a request ID instead and is granted, and asks for a session
// again only once the refusal's retry time has passed; OpenSession returns
// a *SessionRefusedError that matches ErrUnavailable.
func TestSessionRefusedFallsBackToRequestIDs(t *testing.T) {
	st := fakestore.New()
	tokens, secrets, err := auth.NewTokenStoreOf(auth.Spec{Name: "root", Role: auth.RoleAdmin}, auth.Spec{Name: "app", Role: auth.RoleClient})
	if err != nil {
		t.Fatal(err)
	}
	h := server.RequireTokens(server.NewHandler(st, server.HandlerOptions{SessionsPerToken: 1}), tokens)
	var opens atomic.Int64
	counting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			opens.Add(1)
		}
		h.ServeHTTP(w, r)
	})
	a, b := httptest.NewServer(counting), httptest.NewServer(counting)
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	servers := []string{host(a), host(b)}
	ctx := context.Background()
	admin := newClient(t, servers, WithToken(secrets["root"]))
	if _, err := admin.PutLimit(ctx, "api", LimitSpec{Algorithm: "bursty", Rate: 1000}); err != nil {
		t.Fatal(err)
	}

	first := newClient(t, servers, WithToken(secrets["app"]))
	if g, err := first.Reserve(ctx, "api", 1, time.Second); err != nil || !g.Granted || !strings.HasPrefix(g.RequestID, "session:") {
		t.Fatalf("the first client's reserve = %+v, %v; want granted in a session", g, err)
	}
	clk := newFakeClock()
	c := newClient(t, servers, WithToken(secrets["app"]), WithClock(clk))
	opens.Store(0)
	for i := range 3 {
		g, err := c.Reserve(ctx, "api", 1, time.Second)
		if err != nil || !g.Granted || strings.HasPrefix(g.RequestID, "session:") || g.RequestID == "" {
			t.Fatalf("reserve %d while the token's session quota is taken = %+v, %v; want granted with a request id", i, g, err)
		}
	}
	if n := opens.Load(); n != 1 {
		t.Fatalf("%d opens sent for three reserves, want 1 (a refusal is not failed over, and not asked again before its retry time)", n)
	}
	clk.Advance(time.Duration(fsm.SessionIdleNanos))
	if g, err := c.Reserve(ctx, "api", 1, time.Second); err != nil || !g.Granted {
		t.Fatalf("reserve after the retry time = %+v, %v", g, err)
	}
	if n := opens.Load(); n != 2 {
		t.Fatalf("%d opens sent, want 2 (asked again once the retry time passed)", n)
	}

	_, err = c.OpenSession(ctx)
	var refused *SessionRefusedError
	if !errors.As(err, &refused) || !errors.Is(err, ErrUnavailable) || refused.RetryAfter <= 0 || refused.RetryAfter > time.Duration(fsm.SessionIdleNanos) ||
		!strings.Contains(refused.Message, "sessions per token") {
		t.Fatalf("OpenSession with the quota taken = %v, want a *SessionRefusedError naming the quota, matching ErrUnavailable", err)
	}
}

// TestBinarySessionRefused: over the binary protocol a refused open
// (session 0) is a *SessionRefusedError with the register's retry time,
// and Reserve carries a request ID instead.
func TestBinarySessionRefused(t *testing.T) {
	s := serveBinaryWith(t, &binServer{answer: grantAfter, session: func() wire.SessionResult {
		return wire.SessionResult{RetryAfterNanos: 7e9, Detail: "the register holds 65536 open sessions"}
	}})
	c, err := New([]string{s.addr}, WithBinaryReserves(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.OpenSession(context.Background())
	var refused *SessionRefusedError
	if !errors.As(err, &refused) || refused.RetryAfter != 7*time.Second || !strings.Contains(err.Error(), "65536 open sessions") {
		t.Fatalf("OpenSession = %v, want a *SessionRefusedError retrying after 7s", err)
	}
	g, err := c.Reserve(context.Background(), "api", 1, time.Second)
	if err != nil || !g.Granted || strings.HasPrefix(g.RequestID, "session:") {
		t.Fatalf("Reserve with sessions refused = %+v, %v; want granted with a request id", g, err)
	}
	if ids := s.requestIDs(); len(ids) != 1 || ids[0] != g.RequestID {
		t.Fatalf("reserves sent %v, want one with %q", ids, g.RequestID)
	}
}
