package server

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/server/fakestore"
	"github.com/permitd/permitd/transport/wire"
)

// tokenSet makes one token per role (the client one restricted to "api*")
// and returns the store with the secrets by name.
func tokenSet(t *testing.T) (*auth.TokenStore, map[string]string) {
	t.Helper()
	store, secrets, err := auth.NewTokenStoreOf(
		auth.Spec{Name: "root", Role: auth.RoleAdmin}, auth.Spec{Name: "app", Role: auth.RoleClient},
		auth.Spec{Name: "narrow", Role: auth.RoleClient, Limits: []string{"api*"}}, auth.Spec{Name: "w1", Role: auth.RoleWorker})
	if err != nil {
		t.Fatal(err)
	}
	return store, secrets
}

// TestAccessCoversEveryRoute: every route of the API has the role the
// README's table gives it, and paths the API does not serve need admin.
func TestAccessCoversEveryRoute(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         auth.Need
		limit        string
	}{
		{"GET", "/healthz", auth.NeedNothing, ""},
		{"GET", "/readyz", auth.NeedNothing, ""},
		{"GET", "/v1/status", auth.NeedAnyToken, ""},
		{"GET", "/metrics", auth.NeedRead, ""},
		{"GET", "/v1/cluster", auth.NeedAnyToken, ""},
		{"GET", "/v1/limits", auth.NeedRead, ""},
		{"GET", "/v1/readable-limits", auth.NeedAnyToken, ""},
		{"GET", "/ui", auth.NeedNothing, ""},
		{"HEAD", "/ui/app.js", auth.NeedNothing, ""},
		{"GET", "/ui/nope", auth.NeedNothing, ""}, // answered 404, with no data
		{"GET", "/ui/", auth.NeedAdmin, ""},
		{"GET", "/ui/a/b", auth.NeedAdmin, ""},
		{"GET", "/uix", auth.NeedAdmin, ""},
		{"GET", "/v1/limits/api", auth.NeedRead, "api"},
		{"HEAD", "/v1/limits/api", auth.NeedRead, "api"},
		{"PUT", "/v1/limits/api", auth.NeedAdmin, "api"},
		{"DELETE", "/v1/limits/api", auth.NeedAdmin, "api"},
		{"POST", "/v1/limits/api/reserve", auth.NeedClient, "api"},
		{"POST", "/v1/sessions", auth.NeedClientAnyLimit, ""},
		{"PUT", "/v1/limits/api/lease-policy", auth.NeedAdmin, ""},
		{"GET", "/v1/limits/api/leases", auth.NeedRead, "api"},
		{"POST", "/v1/limits/api/lease", auth.NeedWorker, "api"},
		{"POST", "/v1/limits/api/leases/7/renew", auth.NeedWorker, "api"},
		{"POST", "/v1/limits/api/leases/7/return", auth.NeedWorker, "api"},
		{"GET", "/v1/templates", auth.NeedRead, ""},
		{"GET", "/v1/templates/cust", auth.NeedRead, ""},
		{"HEAD", "/v1/templates/cust", auth.NeedRead, ""},
		{"PUT", "/v1/templates/cust", auth.NeedAdmin, ""},
		{"DELETE", "/v1/templates/cust", auth.NeedAdmin, ""},
		{"POST", "/v1/templates", auth.NeedAdmin, ""},
		{"GET", "/v1/snapshot", auth.NeedAdmin, ""},
		{"POST", "/v1/cluster/join", auth.NeedAdmin, ""},
		{"POST", "/v1/cluster/transfer-leadership", auth.NeedAdmin, ""},
		{"DELETE", "/v1/cluster/servers/n2", auth.NeedAdmin, ""},
		{"POST", "/v1/debug/faults", auth.NeedAdmin, ""},
		{"GET", "/debug/pprof/", auth.NeedAdmin, ""},
		{"GET", "/nowhere", auth.NeedAdmin, ""},
		{"POST", "/v1/limits/api/leases/7/steal", auth.NeedAdmin, ""},
	} {
		n, limit := access(tc.method, tc.path)
		if n != tc.want || limit != tc.limit {
			t.Errorf("%s %s: needs %v for limit %q, want %v for %q", tc.method, tc.path, n, limit, tc.want, tc.limit)
		}
	}
}

// TestRequireTokens: the answers of the API with tokens, by case.
func TestRequireTokens(t *testing.T) {
	store, secrets := tokenSet(t)
	h := RequireTokens(NewHandler(fakestore.New(), HandlerOptions{}), store)
	for _, tc := range []struct {
		name, method, path, token string
		auth                      string // a raw Authorization header instead
		wantCode                  int
		wantRole                  string
		wantInError               string
	}{
		{name: "health without a token", method: "GET", path: "/healthz", wantCode: 200},
		{name: "no token", method: "GET", path: "/v1/limits/api", wantCode: 401, wantRole: "client", wantInError: "missing token"},
		{name: "unknown token", method: "GET", path: "/v1/limits/api", auth: "Bearer pmt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", wantCode: 401, wantRole: "client", wantInError: "unknown or revoked"},
		{name: "not bearer", method: "GET", path: "/v1/status", auth: "Basic dXNlcjpwYXNz", wantCode: 401, wantRole: "any"},
		{name: "client may not put a limit", method: "PUT", path: "/v1/limits/api", token: "app", wantCode: 403, wantRole: "admin", wantInError: `token "app" has role client`},
		{name: "worker may not reserve", method: "POST", path: "/v1/limits/api/reserve", token: "w1", wantCode: 403, wantRole: "client"},
		{name: "client may not lease", method: "POST", path: "/v1/limits/api/lease", token: "app", wantCode: 403, wantRole: "worker"},
		{name: "restricted client, other limit", method: "POST", path: "/v1/limits/other/reserve", token: "narrow", wantCode: 403, wantRole: "client", wantInError: "api*"},
		{name: "restricted client, listing", method: "GET", path: "/v1/limits", token: "narrow", wantCode: 403, wantRole: "client"},
		{name: "restricted client, its limit", method: "GET", path: "/v1/limits/api1", token: "narrow", wantCode: 404},
		// A token is checked against the name the handler acts on, however
		// the path escapes it: %6F is 'o', %61 'a'.
		{name: "restricted client, other limit escaped", method: "POST", path: "/v1/limits/%6Fther/reserve", token: "narrow", wantCode: 403, wantRole: "client", wantInError: "api*"},
		{name: "restricted client, its limit escaped", method: "GET", path: "/v1/limits/%61pi1", token: "narrow", wantCode: 404},
		{name: "restricted client, status", method: "GET", path: "/v1/status", token: "narrow", wantCode: 200},
		{name: "restricted client, metrics (they name every limit)", method: "GET", path: "/metrics", token: "narrow", wantCode: 403, wantRole: "client"},
		{name: "worker reads metrics", method: "GET", path: "/metrics", token: "w1", wantCode: 404}, // past auth: this handler serves no metrics
		{name: "restricted client opens a session (sessions belong to no limit)", method: "POST", path: "/v1/sessions", token: "narrow", wantCode: 201},
		{name: "client reads", method: "GET", path: "/v1/limits", token: "app", wantCode: 200},
		{name: "admin puts", method: "PUT", path: "/v1/limits/api", token: "root", wantCode: 400}, // no body: past auth, the handler answers
		{name: "the status page without a token", method: "GET", path: "/ui", wantCode: 200},
		{name: "the status page's script without a token", method: "GET", path: "/ui/app.js", wantCode: 200},
		{name: "readable limits need a token", method: "GET", path: "/v1/readable-limits", wantCode: 401, wantRole: "any", wantInError: "missing token"},
		{name: "restricted client, readable limits", method: "GET", path: "/v1/readable-limits", token: "narrow", wantCode: 200},
		{name: "client may not put a template", method: "PUT", path: "/v1/templates/cust", token: "app", wantCode: 403, wantRole: "admin"},
		{name: "client may not delete a template", method: "DELETE", path: "/v1/templates/cust", token: "app", wantCode: 403, wantRole: "admin"},
		{name: "worker reads the templates", method: "GET", path: "/v1/templates", token: "w1", wantCode: 200},
		{name: "client reads a template", method: "GET", path: "/v1/templates/cust", token: "app", wantCode: 404},
		{name: "restricted client, templates", method: "GET", path: "/v1/templates", token: "narrow", wantCode: 403, wantRole: "client"},
		{name: "admin puts a template", method: "PUT", path: "/v1/templates/cust", token: "root", wantCode: 400}, // no body: past auth
		{name: "worker may not snapshot", method: "GET", path: "/v1/snapshot", token: "w1", wantCode: 403, wantRole: "admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			switch {
			case tc.auth != "":
				r.Header.Set("Authorization", tc.auth)
			case tc.token != "":
				r.Header.Set("Authorization", "Bearer "+secrets[tc.token])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.wantCode {
				t.Fatalf("%d %s, want %d", w.Code, w.Body.String(), tc.wantCode)
			}
			for _, s := range secrets {
				if strings.Contains(w.Body.String(), s) {
					t.Fatalf("the answer repeats a secret: %s", w.Body.String())
				}
			}
			if tc.wantCode != 401 && tc.wantCode != 403 {
				return
			}
			var body struct {
				Error        string `json:"error"`
				RequiredRole string `json:"required_role"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body.String(), err)
			}
			if body.RequiredRole != tc.wantRole || !strings.Contains(body.Error, tc.wantInError) {
				t.Errorf("body %+v, want required_role %q and an error containing %q", body, tc.wantRole, tc.wantInError)
			}
			if ch := w.Header().Get("WWW-Authenticate"); (tc.wantCode == 401) != strings.HasPrefix(ch, "Bearer ") {
				t.Errorf("WWW-Authenticate %q with %d", ch, tc.wantCode)
			}
		})
	}
	// A reload revokes at once.
	ts, err := auth.ParseTokenFile(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	store.Replace(ts)
	r := httptest.NewRequest("GET", "/v1/limits", nil)
	r.Header.Set("Authorization", "Bearer "+secrets["app"])
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("after the reload without it, the token got %d", w.Code)
	}
}

// TestBinaryCallsNeedTheirRole: on a binary connection authenticated with
// OpAuth, every later call is checked against the token's role (README:
// reserves and sessions need client, lease commands worker; admin may do
// all) and a client token's limit patterns.
func TestBinaryCallsNeedTheirRole(t *testing.T) {
	store, secrets := tokenSet(t)
	for _, tc := range []struct {
		token string
		op    byte
		limit string
		ok    bool
	}{
		{"app", wire.OpReserve, "api", true},
		{"app", wire.OpOpenSession, "", true},
		{"app", wire.OpLease, "api", false},
		{"app", wire.OpRenew, "api", false},
		{"app", wire.OpReturn, "api", false},
		{"app", wire.OpLeaseBatch, "", false},
		{"narrow", wire.OpReserve, "api-eu", true},
		{"narrow", wire.OpReserve, "billing", false},
		{"narrow", wire.OpOpenSession, "", true}, // sessions belong to no limit
		{"w1", wire.OpLease, "api", true},
		{"w1", wire.OpRenew, "api", true},
		{"w1", wire.OpReturn, "api", true},
		{"w1", wire.OpLeaseBatch, "", true},
		{"w1", wire.OpReserve, "api", false},
		{"w1", wire.OpOpenSession, "", false},
		{"root", wire.OpReserve, "api", true},
		{"root", wire.OpLease, "api", true},
	} {
		authorizer := make(chan Authorizer, 1)
		owners := make(chan fsm.OpenSession, 1)
		srv := AuthenticatedBinary(store, 7, func(c net.Conn, a Authorizer, o fsm.OpenSession) { authorizer <- a; owners <- o; c.Close() })
		server, conn := net.Pipe()
		go srv(server)
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		go func() {
			bw := bufio.NewWriter(conn)
			_ = wire.WriteFrame(bw, wire.Frame{ID: 1, Kind: wire.OpAuth, Payload: []byte(secrets[tc.token])})
			_ = bw.Flush()
		}()
		if f, err := wire.ReadFrame(conn); err != nil || f.Kind != wire.CodeOK {
			t.Fatalf("auth with %s's token: %+v, %v", tc.token, f, err)
		}
		var a Authorizer
		select {
		case a = <-authorizer:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s's token: the connection was never handed over after auth", tc.token)
		}
		// The connection's sessions belong to its token, within the quota.
		if o := <-owners; o != (fsm.OpenSession{Owner: tc.token, PerOwner: 7}) {
			t.Errorf("%s's connection opens sessions for %+v, want the token and its quota of 7", tc.token, o)
		}
		err := a(tc.op, tc.limit)
		if (err == nil) != tc.ok {
			t.Errorf("%s's token, binary op %d on %q: %v, want allowed=%v", tc.token, tc.op, tc.limit, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "auth:") || strings.Contains(err.Error(), secrets[tc.token])) {
			t.Errorf("refusal %q: want an auth: error that never echoes the secret", err)
		}
		conn.Close()
	}
}
