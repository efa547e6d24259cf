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

// maxConnCommands bounds the commands of one connection waiting for their
// answers: beyond it a command is refused (CodeOverloaded), so that one
// worker cannot fill the relay's queue, and the batches' answers find room
// in its connection's writer queue (wire.WriterQueue) without waiting
// unless the worker stops reading (the relay's own refusals, sent from
// the read loop, wait for room).
const maxConnCommands = wire.WriterQueue / 2

// maxCommandBytes bounds one command's payload: it must fit a batch alone.
const maxCommandBytes = batchBytesBudget - 8

// serveConn serves one worker connection: the preface, the optional
// authentication, then lease commands until the connection fails.
//
// Answers are queued to the connection's writer without waiting
// (wire.Writer.TrySend), never written by the goroutine that answers a
// batch: a worker that stops reading its answers cannot hold up the
// others'; its connection is closed instead.
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
	var checked *auth.Tokens // the token set the token was last looked up in
	if r.cfg.Tokens != nil {
		t, s, ts, ok := r.authenticate(br, w)
		if !ok {
			return
		}
		token, secret, checked = &t, s, ts
	}
	_ = c.SetDeadline(time.Time{})
	var waiting atomic.Int64 // commands of this connection not yet answered
	for {
		f, err := wire.ReadFrameLimit(br, wire.MaxClientFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.log.Debug("worker connection ended", "remote", c.RemoteAddr(), "error", err)
			}
			return
		}
		// A batch's answer never waits for the writer (a worker that
		// stops reading is closed: the read loop ends); the read loop's
		// own answers do, which holds up only this worker's reading.
		send := func(a wire.LeaseAnswer) {
			if !w.TrySend(wire.Frame{ID: f.ID, Kind: a.Code, Payload: a.Payload}) {
				go c.Close() // (a TLS close may wait to write its alert)
			}
		}
		answer := func(a wire.LeaseAnswer) { w.Send(wire.Frame{ID: f.ID, Kind: a.Code, Payload: a.Payload}) }
		refuse := func(code byte, format string, args ...any) {
			r.refused.Add(1)
			answer(wire.LeaseAnswer{Code: code, Payload: []byte(fmt.Sprintf(format, args...))})
		}
		if token != nil {
			ts := r.cfg.Tokens.Current()
			if ts != checked {
				code, why := recheck(token, secret, ts)
				if code != wire.CodeOK {
					refuse(code, "%s", why)
					if code == wire.CodeUnauthenticated {
						return // revoked: the connection is closed after the answer
					}
					continue
				}
				checked = ts
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
			answer(wire.LeaseAnswer{Code: wire.CodeOK})
		case wire.OpLease, wire.OpRenew, wire.OpReturn:
			if len(f.Payload) > maxCommandBytes {
				refuse(wire.CodeInvalid, "relay: a lease command of %d bytes; allowed: at most %d", len(f.Payload), maxCommandBytes)
				continue
			}
			if why := checkCommand(f.Kind, f.Payload); why != "" {
				refuse(wire.CodeInvalid, "%s", why)
				continue
			}
			if waiting.Load() >= maxConnCommands {
				refuse(wire.CodeOverloaded, "relay: %d commands of this connection are waiting for the register; allowed: at most %d", maxConnCommands, maxConnCommands)
				continue
			}
			waiting.Add(1)
			reply := func(a wire.LeaseAnswer) {
				waiting.Add(-1)
				send(a)
			}
			if !r.enqueue(queued{call: wire.LeaseCall{Op: f.Kind, Payload: f.Payload}, reply: reply}) {
				waiting.Add(-1)
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
// connection is to be closed) after a refusal. It returns the token, its
// secret (kept to look the token up again after a reload) and the token
// set it was found in.
func (r *Relay) authenticate(br *bufio.Reader, w *wire.Writer) (auth.Token, string, *auth.Tokens, bool) {
	f, err := wire.ReadFrameLimit(br, wire.MaxClientFrame)
	if err != nil {
		return auth.Token{}, "", nil, false
	}
	refuse := func(format string, args ...any) (auth.Token, string, *auth.Tokens, bool) {
		r.refused.Add(1)
		w.SendNow(wire.Frame{ID: f.ID, Kind: wire.CodeUnauthenticated, Payload: []byte(fmt.Sprintf(format, args...))})
		return auth.Token{}, "", nil, false
	}
	switch {
	case f.Kind != wire.OpAuth:
		return refuse("relay: this relay requires API tokens: the first call on a connection must be auth (op %d) with a worker token's secret, not op %d", wire.OpAuth, f.Kind)
	case len(f.Payload) == 0 || len(f.Payload) > wire.MaxAuthSecret:
		return refuse("relay: a token of %d bytes; allowed: 1 to %d", len(f.Payload), wire.MaxAuthSecret)
	}
	// One token set for the lookup and for what the connection remembers
	// having checked: a reload in between is then seen at the next call.
	ts := r.cfg.Tokens.Current()
	t, ok := ts.Lookup(string(f.Payload))
	if !ok {
		return refuse("relay: unknown or revoked token")
	}
	if ok, why := auth.Allows(t, auth.NeedWorker, ""); !ok {
		if why == "" {
			why = fmt.Sprintf("token %q has role %s; the relay needs role %s", t.Name, t.Role, auth.NeedWorker)
		}
		r.refused.Add(1)
		w.SendNow(wire.Frame{ID: f.ID, Kind: wire.CodeForbidden, Payload: []byte("relay: " + why)})
		return auth.Token{}, "", nil, false
	}
	w.SendNow(wire.Frame{ID: f.ID, Kind: wire.CodeOK})
	return t, string(f.Payload), ts, true
}

// recheck looks the connection's token up again in ts, the store's
// tokens after a reload, so that a revoked token stops working on open
// connections too: CodeOK (token updated), or the code and reason of the
// refusal.
func recheck(token *auth.Token, secret string, ts *auth.Tokens) (byte, string) {
	t, ok := ts.Lookup(secret)
	if !ok {
		return wire.CodeUnauthenticated, fmt.Sprintf("relay: token %q was revoked", token.Name)
	}
	if ok, why := auth.Allows(t, auth.NeedWorker, ""); !ok {
		return wire.CodeForbidden, "relay: " + why
	}
	*token = t
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
