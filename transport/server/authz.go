package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/wire"
)

// authz.go: API tokens on the HTTP API and the binary protocol. Which role
// a request needs is decided from its method and path alone (access),
// before anything is read or decoded, so that a refused request costs no
// work and changes nothing.

// access returns what a request with method on escaped path p needs, and
// the limit it acts on ("" for none). Paths the API does not serve need
// admin: debug and profiling hooks mounted beside the API are covered, and
// probing for paths tells a stranger nothing.
func access(method, p string) (auth.Need, string) {
	read := method == http.MethodGet || method == http.MethodHead
	switch {
	case p == "/healthz" || p == "/readyz" || p == "/v1/openapi.json" || p == "/ui" || isUIAsset(p):
		// The status page's files hold no data: the page asks for a
		// token and sends it with every API call it makes.
		return auth.NeedNothing, ""
	case p == "/v1/status" || (p == "/v1/cluster" && read):
		return auth.NeedAnyToken, ""
	case p == "/metrics":
		// The per-limit series name every limit and its traffic: what
		// listing every limit needs (a client token restricted to some
		// limits may not).
		return auth.NeedRead, ""
	case p == "/v1/readable-limits":
		// Any token: the handler answers only the limits the token may
		// read (the middleware passes it on).
		return auth.NeedAnyToken, ""
	case p == "/v1/limits" && read:
		return auth.NeedRead, ""
	case (p == "/v1/templates" || strings.HasPrefix(p, "/v1/templates/")) && read:
		// A template's prefix is no limit's name: reading one needs what
		// listing every limit needs.
		return auth.NeedRead, ""
	case p == "/v1/sessions":
		return auth.NeedClientAnyLimit, ""
	case p == "/v1/reserve" || strings.HasPrefix(p, "/v1/reservations/"):
		// The limits are in the body (reserve) or the reservation
		// (settle, release, which only its owner may do).
		return auth.NeedClientEachLimit, ""
	case strings.HasPrefix(p, "/v1/limits/"):
		name, sub, hasSub := strings.Cut(p[len("/v1/limits/"):], "/")
		// The name the handler acts on (dispatch unescapes it too): a
		// token is checked against the limit it would reach, however the
		// path spells it.
		name = pathName(name)
		switch {
		case !hasSub && read:
			return auth.NeedRead, name
		case !hasSub:
			return auth.NeedAdmin, name // put, delete
		case sub == "reserve":
			return auth.NeedClient, name
		case sub == "leases" && read:
			return auth.NeedRead, name
		case sub == "lease" || (strings.HasPrefix(sub, "leases/") && (strings.HasSuffix(sub, "/renew") || strings.HasSuffix(sub, "/return"))):
			return auth.NeedWorker, name
		}
	}
	return auth.NeedAdmin, ""
}

// RequireTokens wraps next so that every request but the health checks,
// the API description (/v1/openapi.json) and the status page's files
// (/ui, /ui/{asset}) carries a token of store whose role allows it (auth.Require with the
// API's routes, access).
func RequireTokens(next http.Handler, store *auth.TokenStore) http.Handler {
	return auth.Require(next, store, access)
}

// lookup is a binary connection's token as found in one set of tokens.
type lookup struct {
	tokens *auth.Tokens
	token  auth.Token
	ok     bool
}

// AuthenticatedBinary returns a BinaryServer that requires a binary
// connection to authenticate before anything else: its first call must be
// wire.OpAuth with a token of store (read within sniffTimeout; answered
// CodeOK, or CodeUnauthenticated and the connection closed). serve then
// serves the connection, checking every call against the token's role,
// looked up again after every reload (auth.TokenStore.Replace) so that a token
// revoked by a reload stops working on open connections too, and opening
// its sessions for the token, at most sessionsPerToken of them (0: no
// quota; see HandlerOptions.SessionsPerToken).
func AuthenticatedBinary(store *auth.TokenStore, sessionsPerToken int, serve func(net.Conn, Authorizer, fsm.OpenSession)) BinaryServer {
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
		// One token set for the lookup and for what the connection
		// remembers having checked: a reload in between is then seen at
		// the next call.
		cur := store.Current()
		t, ok := cur.Lookup(secret)
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
		owner := sessionOwner(t, true, sessionsPerToken)
		// The connection's token, looked up again only when a reload
		// replaced the store's tokens: a lookup hashes the secret and
		// compares it with every token in the file.
		var last atomic.Pointer[lookup]
		last.Store(&lookup{tokens: cur, token: t, ok: true})
		serve(c, func(op byte, limit string) error { // called concurrently
			l := last.Load()
			if cur := store.Current(); l.tokens != cur {
				t, ok := cur.Lookup(secret)
				l = &lookup{tokens: cur, token: t, ok: ok}
				last.Store(l)
			}
			t, ok := l.token, l.ok
			if !ok {
				return fmt.Errorf("%w: auth: token %q was revoked", node.ErrUnauthenticated, name)
			}
			n := auth.NeedClient
			switch op {
			case wire.OpLease, wire.OpRenew, wire.OpReturn, wire.OpLeaseBatch:
				n = auth.NeedWorker
			case wire.OpOpenSession:
				n = auth.NeedClientAnyLimit
			}
			if ok, why := auth.Allows(t, n, limit); !ok {
				if why == "" {
					why = fmt.Sprintf("token %q has role %s; binary op %d needs role %s", t.Name, t.Role, op, n)
				}
				return fmt.Errorf("auth: %s", why)
			}
			return nil
		}, owner)
	}
}
