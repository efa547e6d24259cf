package relay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/wire"
)

// authTimeout bounds the wait for a connection's preface and first call.
const authTimeout = 10 * time.Second

// notBinary is the answer to a connection that does not start with the
// binary protocol's preface (an HTTP request, say).
const notBinary = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" +
	"permitd relay: this port serves the binary protocol's lease commands only (a worker's --relay); send HTTP requests to a register node\n"

// serveConn serves one worker connection: the preface, the optional
// authentication, then lease commands until the connection fails.
func (r *Relay) serveConn(c net.Conn) {
	defer r.untrack(c)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(authTimeout))
	br := bufio.NewReaderSize(c, 64<<10)
	if b, err := br.ReadByte(); err != nil || b != wire.ClientPreface {
		if err == nil {
			_, _ = io.WriteString(c, notBinary)
		}
		return
	}
	w := wire.NewWriter(c)
	defer w.Close()
	var token *auth.Token
	var secret string
	if r.cfg.Tokens != nil {
		t, s, ok := r.authenticate(br, w)
		if !ok {
			return
		}
		token, secret = &t, s
	}
	_ = c.SetDeadline(time.Time{})
	var authorized atomic.Pointer[auth.Tokens]
	if token != nil {
		authorized.Store(r.cfg.Tokens.Current())
	}
	for {
		f, err := wire.ReadFrameLimit(br, wire.MaxClientFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.log.Debug("worker connection ended", "remote", c.RemoteAddr(), "error", err)
			}
			return
		}
		reply := func(a wire.LeaseAnswer) { w.SendNow(wire.Frame{ID: f.ID, Kind: a.Code, Payload: a.Payload}) }
		refuse := func(code byte, format string, args ...any) {
			r.refused.Add(1)
			reply(wire.LeaseAnswer{Code: code, Payload: []byte(fmt.Sprintf(format, args...))})
		}
		if token != nil {
			if code, why := r.recheck(token, secret, &authorized); code != wire.CodeOK {
				refuse(code, "%s", why)
				continue
			}
		}
		switch f.Kind {
		case wire.OpAuth:
			// Without tokens an auth call is a no-op, so that workers can
			// be given tokens before the relay requires them; with them,
			// only the first call authenticates.
			if token != nil {
				refuse(wire.CodeInvalid, "relay: the connection is already authenticated (auth, op %d, is its first call only)", wire.OpAuth)
				continue
			}
			reply(wire.LeaseAnswer{Code: wire.CodeOK})
		case wire.OpLease, wire.OpRenew, wire.OpReturn:
			if why := checkCommand(f.Kind, f.Payload); why != "" {
				refuse(wire.CodeInvalid, "%s", why)
				continue
			}
			if !r.enqueue(queued{call: wire.LeaseCall{Op: f.Kind, Payload: f.Payload}, reply: reply}) {
				refuse(wire.CodeOverloaded, "relay: %d commands are waiting for the register; retry at another server", r.cfg.MaxQueue)
			}
		default:
			refuse(wire.CodeInvalid, "relay: operation %d: a relay serves lease commands only: %d (lease), %d (renew), %d (return), and %d (auth); send reserves to a register node",
				f.Kind, wire.OpLease, wire.OpRenew, wire.OpReturn, wire.OpAuth)
		}
	}
}

// authenticate reads the connection's first call, which must be OpAuth
// with a worker (or admin) token of the store, and answers it; false (the
// connection is to be closed) after a refusal. It returns the token and
// its secret, kept to look the token up again after a reload.
func (r *Relay) authenticate(br *bufio.Reader, w *wire.Writer) (auth.Token, string, bool) {
	f, err := wire.ReadFrameLimit(br, wire.MaxClientFrame)
	if err != nil {
		return auth.Token{}, "", false
	}
	refuse := func(format string, args ...any) (auth.Token, string, bool) {
		r.refused.Add(1)
		w.SendNow(wire.Frame{ID: f.ID, Kind: wire.CodeUnauthenticated, Payload: []byte(fmt.Sprintf(format, args...))})
		return auth.Token{}, "", false
	}
	switch {
	case f.Kind != wire.OpAuth:
		return refuse("relay: this relay requires API tokens: the first call on a connection must be auth (op %d) with a worker token's secret, not op %d", wire.OpAuth, f.Kind)
	case len(f.Payload) == 0 || len(f.Payload) > wire.MaxAuthSecret:
		return refuse("relay: a token of %d bytes; allowed: 1 to %d", len(f.Payload), wire.MaxAuthSecret)
	}
	t, ok := r.cfg.Tokens.Lookup(string(f.Payload))
	if !ok {
		return refuse("relay: unknown or revoked token")
	}
	if ok, why := auth.Allows(t, auth.NeedWorker, ""); !ok {
		if why == "" {
			why = fmt.Sprintf("token %q has role %s; the relay needs role %s", t.Name, t.Role, auth.NeedWorker)
		}
		r.refused.Add(1)
		w.SendNow(wire.Frame{ID: f.ID, Kind: wire.CodeForbidden, Payload: []byte("relay: " + why)})
		return auth.Token{}, "", false
	}
	w.SendNow(wire.Frame{ID: f.ID, Kind: wire.CodeOK})
	return t, string(f.Payload), true
}

// recheck looks the connection's token up again when the store's tokens
// were replaced (a reload), so that a revoked token stops working on open
// connections too: CodeOK, or the code and reason of the refusal.
func (r *Relay) recheck(token *auth.Token, secret string, seen *atomic.Pointer[auth.Tokens]) (byte, string) {
	cur := r.cfg.Tokens.Current()
	if seen.Load() == cur {
		return wire.CodeOK, ""
	}
	t, ok := cur.Lookup(secret)
	if !ok {
		return wire.CodeUnauthenticated, fmt.Sprintf("relay: token %q was revoked", token.Name)
	}
	if ok, why := auth.Allows(t, auth.NeedWorker, ""); !ok {
		return wire.CodeForbidden, "relay: " + why
	}
	*token = t
	seen.Store(cur)
	return wire.CodeOK, ""
}

// checkCommand decodes a lease command's payload as the register will and
// returns why the relay refuses it ("" if it does not): it must decode,
// and carry a request ID, so that a batch retried elsewhere is decided
// once.
func checkCommand(op byte, p []byte) string {
	var requestID string
	var err error
	var what string
	switch op {
	case wire.OpLease:
		what = "lease"
		var q wire.LeaseOpen
		q, err = wire.DecodeLeaseOpen(p)
		requestID = q.RequestID
	case wire.OpRenew:
		what = "renew"
		var q wire.LeaseRenew
		q, err = wire.DecodeLeaseRenew(p)
		requestID = q.RequestID
	default:
		what = "return"
		var q wire.LeaseReport
		q, err = wire.DecodeLeaseReturn(p)
		requestID = q.RequestID
	}
	switch {
	case err != nil:
		return fmt.Sprintf("relay: %s: %v", what, err)
	case requestID == "":
		return fmt.Sprintf("relay: %s without a request ID: a relayed command needs one (the Go client's lease calls set one), so that a batch retried at another node is decided once", what)
	}
	return ""
}
