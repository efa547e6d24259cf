package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/server/fakestore"
)

// TestSessionOfARenamedToken: a session is answered only for the token
// that opened it (410, as a session not open, to any other). A client
// never sends another token's session, except when a reload renames its
// token (the same secret, another name): its next reserve in the old
// session is answered 410, and Reserve opens a session for the new name
// and sends the request again there, decided once, not a replay.
func TestSessionOfARenamedToken(t *testing.T) {
	secret, line, err := auth.NewSecret("app", auth.RoleClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokensOf := func(line string) *auth.Tokens {
		ts, err := auth.ParseTokenFile(strings.NewReader(line + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	tokens := auth.NewTokenStore(tokensOf(line))
	st := fakestore.New()
	h := server.RequireTokens(server.NewHandler(st, server.HandlerOptions{SessionsPerToken: 2}), tokens)
	var opens, gone atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			opens.Add(1)
		}
		h.ServeHTTP(statusTap{w, func(code int) {
			if code == http.StatusGone {
				gone.Add(1)
			}
		}}, r)
	}))
	t.Cleanup(srv.Close)
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Bursty, Rate: 1000, Per: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutLimit(context.Background(), fsm.PutLimit{Name: "api", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, []string{host(srv)}, WithToken(secret))
	ctx := context.Background()
	first, err := c.Reserve(ctx, "api", 1, time.Second)
	if err != nil || !first.Granted {
		t.Fatalf("the first reserve = %+v, %v", first, err)
	}
	tokens.Replace(tokensOf(strings.Replace(line, "app ", "app-renamed ", 1)))
	g, err := c.Reserve(ctx, "api", 1, time.Second)
	if err != nil || !g.Granted || g.Duplicate || g.RequestID == first.RequestID || !strings.HasPrefix(g.RequestID, "session:") {
		t.Fatalf("the reserve after the rename = %+v, %v; want granted afresh in a new session", g, err)
	}
	if o, n := opens.Load(), gone.Load(); o != 2 || n != 1 {
		t.Fatalf("%d opens and %d answers 410, want 2 and 1 (the old session refused once, a new one opened)", o, n)
	}
	if info, _ := st.Limit(ctx, "api"); info.GrantedRequests != 2 {
		t.Fatalf("%d grants, want 2: each request decided once", info.GrantedRequests)
	}
}

// statusTap passes a handler's answer on, telling seen its status.
type statusTap struct {
	http.ResponseWriter
	seen func(code int)
}

func (s statusTap) WriteHeader(code int) {
	s.seen(code)
	s.ResponseWriter.WriteHeader(code)
}
