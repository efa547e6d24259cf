package transport

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/internal/httpapi"
	"github.com/permitd/permitd/transport/wire"
)

// authz.go: API tokens on the HTTP API and the binary protocol. Which role
// a request needs is decided from its method and path alone (access),
// before anything is read or decoded, so that a refused request costs no
// work and changes nothing.

// TokenStore holds the agent's current tokens; Replace swaps them at once
// for every later request (a SIGHUP re-reads the token file).
type TokenStore struct{ p atomic.Pointer[auth.Tokens] }

// NewTokenStore returns a store holding ts.
func NewTokenStore(ts *auth.Tokens) *TokenStore {
	s := &TokenStore{}
	s.p.Store(ts)
	return s
}

// Replace makes ts the current tokens.
func (s *TokenStore) Replace(ts *auth.Tokens) { s.p.Store(ts) }

// Len returns how many tokens are current.
func (s *TokenStore) Len() int { return s.p.Load().Len() }

// need is what a request needs.
type need uint8

const (
	needNothing need = iota // health checks
	needAnyToken
	needRead           // client, worker or admin; a restricted client token only for its limits
	needClient         // client or admin; a restricted client token only for its limits
	needClientAnyLimit // client or admin, whatever the token's limits (sessions: they belong to no limit)
	needWorker         // worker or admin
	needAdmin
)

// String names the roles that satisfy n, for error messages.
func (n need) String() string {
	switch n {
	case needAnyToken:
		return "any role"
	case needRead:
		return "client, worker or admin"
	case needClient, needClientAnyLimit:
		return "client (or admin)"
	case needWorker:
		return "worker (or admin)"
	case needAdmin:
		return "admin"
	}
	return "none"
}

// requiredRole is the role named in error bodies.
func (n need) requiredRole() string {
	switch n {
	case needRead, needClient, needClientAnyLimit:
		return string(auth.RoleClient)
	case needWorker:
		return string(auth.RoleWorker)
	case needAdmin:
		return string(auth.RoleAdmin)
	case needAnyToken:
		return "any"
	}
	return ""
}

// access returns what a request with method on escaped path p needs, and
// the limit it acts on ("" for none). Paths the API does not serve need
// admin: debug and profiling hooks mounted beside the API are covered, and
// probing for paths tells a stranger nothing.
func access(method, p string) (need, string) {
	read := method == http.MethodGet || method == http.MethodHead
	switch {
	case p == "/healthz" || p == "/readyz":
		return needNothing, ""
	case p == "/v1/status" || p == "/metrics" || (p == "/v1/cluster" && read):
		return needAnyToken, ""
	case p == "/v1/limits" && read:
		return needRead, ""
	case p == "/v1/sessions":
		return needClientAnyLimit, ""
	case strings.HasPrefix(p, "/v1/limits/"):
		name, sub, hasSub := strings.Cut(p[len("/v1/limits/"):], "/")
		switch {
		case !hasSub && read:
			return needRead, name
		case !hasSub:
			return needAdmin, name // put, delete
		case sub == "reserve":
			return needClient, name
		case sub == "leases" && read:
			return needRead, name
		case sub == "lease" || (strings.HasPrefix(sub, "leases/") && (strings.HasSuffix(sub, "/renew") || strings.HasSuffix(sub, "/return"))):
			return needWorker, name
		}
	}
	return needAdmin, ""
}

// allows reports whether token t satisfies n for limit ("" when the
// request names none), with the reason when it does not.
func allows(t auth.Token, n need, limit string) (bool, string) {
	switch t.Role {
	case auth.RoleAdmin:
		return true, ""
	case auth.RoleClient:
		if n == needAnyToken || n == needClientAnyLimit {
			return true, ""
		}
		if n != needRead && n != needClient {
			return false, ""
		}
	case auth.RoleWorker:
		if n != needAnyToken && n != needRead && n != needWorker {
			return false, ""
		}
		return true, ""
	default:
		return false, ""
	}
	if len(t.Limits) > 0 {
		if limit == "" {
			return false, fmt.Sprintf("token %q may use only the limits matching %s, not all of them", t.Name, strings.Join(t.Limits, ","))
		}
		if !t.MayUse(limit) {
			return false, fmt.Sprintf("token %q may use only the limits matching %s, not %s", t.Name, strings.Join(t.Limits, ","), httpapi.Quote(limit))
		}
	}
	return true, ""
}

// RequireTokens wraps next so that every request but the health checks
// carries "Authorization: Bearer TOKEN" with a token of store whose role
// allows it: 401 (with WWW-Authenticate) without a valid token, 403 for a
// token without the role or the limit; the JSON error names the role
// needed and never repeats the secret.
func RequireTokens(next http.Handler, store *TokenStore) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, limit := access(r.Method, r.URL.EscapedPath())
		if n == needNothing {
			next.ServeHTTP(w, r)
			return
		}
		what := r.Method + " " + r.URL.EscapedPath()
		h := r.Header.Values("Authorization")
		if len(h) == 0 {
			writeAuthError(w, http.StatusUnauthorized, `Bearer realm="permitd"`,
				fmt.Sprintf("missing token: send \"Authorization: Bearer TOKEN\"; %s needs role %s", what, n), n)
			return
		}
		if len(h) > 1 {
			writeAuthError(w, http.StatusUnauthorized, `Bearer realm="permitd", error="invalid_request"`, "more than one Authorization header; send one", n)
			return
		}
		secret, err := auth.ParseAuthorization(h[0])
		if err != nil {
			writeAuthError(w, http.StatusUnauthorized, `Bearer realm="permitd", error="invalid_request"`, err.Error(), n)
			return
		}
		t, ok := store.p.Load().Lookup(secret)
		if !ok {
			writeAuthError(w, http.StatusUnauthorized, `Bearer realm="permitd", error="invalid_token"`,
				fmt.Sprintf("unknown or revoked token; %s needs a token with role %s", what, n), n)
			return
		}
		if ok, why := allows(t, n, limit); !ok {
			if why == "" {
				why = fmt.Sprintf("token %q has role %s; %s needs role %s", t.Name, t.Role, what, n)
			}
			writeAuthError(w, http.StatusForbidden, "", why, n)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeAuthError answers {"error": msg, "required_role": role}.
func writeAuthError(w http.ResponseWriter, code int, challenge, msg string, n need) {
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	b := append([]byte(`{"error":`), httpapi.AppendJSONString(nil, "auth: "+msg)...)
	b = append(b, `,"required_role":`...)
	b = httpapi.AppendJSONString(b, n.requiredRole())
	b = append(b, "}\n"...)
	httpapi.WriteRaw(w, code, b)
}

// AuthenticatedBinary returns a BinaryServer that requires a binary
// connection to authenticate before anything else: its first call must be
// wire.OpAuth with a token of store (read within sniffTimeout; answered
// CodeOK, or CodeUnauthenticated and the connection closed). serve then
// serves the connection, checking every call against the token's role,
// looked up again per call so that a token revoked by a reload stops
// working on open connections too.
func AuthenticatedBinary(store *TokenStore, serve func(net.Conn, node.Authorizer)) BinaryServer {
	return func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(sniffTimeout))
		// Unbuffered: the client sends nothing after OpAuth before the
		// answer, and nothing read here may be lost to serve.
		f, err := wire.ReadFrameLimit(c, wire.MaxClientFrame)
		if err != nil {
			c.Close()
			return
		}
		answer := func(code byte, msg string) error {
			bw := bufio.NewWriterSize(c, 64+len(msg))
			if err := wire.WriteFrame(bw, wire.Frame{ID: f.ID, Kind: code, Payload: []byte(msg)}); err != nil {
				return err
			}
			return bw.Flush()
		}
		if f.Kind != wire.OpAuth {
			_ = answer(wire.CodeUnauthenticated, fmt.Sprintf("auth: this server requires API tokens: the first call on a binary connection must be auth (op %d) with the token's secret, not op %d", wire.OpAuth, f.Kind))
			c.Close()
			return
		}
		if len(f.Payload) == 0 || len(f.Payload) > wire.MaxAuthSecret {
			_ = answer(wire.CodeUnauthenticated, fmt.Sprintf("auth: a token of %d bytes; allowed: 1 to %d", len(f.Payload), wire.MaxAuthSecret))
			c.Close()
			return
		}
		secret := string(f.Payload)
		t, ok := store.p.Load().Lookup(secret)
		if !ok {
			_ = answer(wire.CodeUnauthenticated, "auth: unknown or revoked token")
			c.Close()
			return
		}
		if err := answer(wire.CodeOK, ""); err != nil {
			c.Close()
			return
		}
		_ = c.SetDeadline(time.Time{})
		name := t.Name
		serve(c, func(op byte, limit string) error { // called concurrently: locals only
			t, ok := store.p.Load().Lookup(secret)
			if !ok {
				return fmt.Errorf("%w: auth: token %q was revoked", node.ErrUnauthenticated, name)
			}
			n := needClient
			switch op {
			case wire.OpLease, wire.OpRenew, wire.OpReturn:
				n = needWorker
			case wire.OpOpenSession:
				n = needClientAnyLimit
			}
			if ok, why := allows(t, n, limit); !ok {
				if why == "" {
					why = fmt.Sprintf("token %q has role %s; binary op %d needs role %s", t.Name, t.Role, op, n)
				}
				return fmt.Errorf("auth: %s", why)
			}
			return nil
		})
	}
}
