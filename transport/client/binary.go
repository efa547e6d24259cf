package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/wire"
)

// binary.go: reserves over permitd's binary, pipelined protocol (package
// wire) instead of HTTP, on the same port. Every concurrent Reserve
// shares a few connections per server; each request is still one decision
// with its own answer, but a burst of them shares write and read system
// calls on both sides, which is most of the cost of a decision over
// HTTP/1.1. Admin calls stay on HTTP. Failover, request IDs and error
// meanings are those of HTTP: a connection failure or a node without a
// leader moves to the next server with the same request ID.

// WithBinaryReserves makes Reserve (and Acquire, TryAcquire, Throttle) use
// the binary protocol over connsPerServer pipelined connections to each
// server (1 is usually enough; more spread the server's reading across
// cores). HTTPS servers are refused by New: the binary protocol has no TLS.
func WithBinaryReserves(connsPerServer int) Option {
	return func(c *Client) {
		if c.bin == nil {
			c.bin = &binaryPool{}
		}
		c.bin.connsPerServer, c.bin.reserves = connsPerServer, true
	}
}

// WithBinaryLeases makes Lease, Renew and Return use the binary protocol
// (the answers and their timing are those of HTTP): a lease command costs
// the register's leader less than over HTTP (0.10-0.14 core per thousand
// renewals a second against 0.14-0.17 with a connection per worker; two
// thirds of HTTP's cost when many holders share a client's connection).
// It shares the connections of WithBinaryReserves (one per server without
// it). HTTPS servers are refused by New.
func WithBinaryLeases() Option {
	return func(c *Client) {
		if c.bin == nil {
			c.bin = &binaryPool{connsPerServer: 1}
		}
		c.bin.leases = true
	}
}

// binaryPool keeps the pipelined connections, per server, and says which
// calls use them.
type binaryPool struct {
	connsPerServer   int
	reserves, leases bool
	dialTimeout      time.Duration
	tls              *tls.Config // nil: plain TCP
	token            string      // API token: an auth call opens each connection

	mu    sync.Mutex
	conns map[string][]*wire.Conn // by "host:port"
	next  atomic.Uint64
}

// init checks the option's value and the servers (all https with conf,
// all http without).
func (p *binaryPool) init(servers []string, dialTimeout time.Duration, conf *tls.Config, token string) error {
	if p.connsPerServer < 1 || p.connsPerServer > 64 {
		return fmt.Errorf("%w: %d binary connections per server; allowed: 1..64", ErrInvalid, p.connsPerServer)
	}
	for _, s := range servers {
		if conf == nil && !strings.HasPrefix(s, "http://") {
			return fmt.Errorf("%w: server %s with binary calls but no TLS configuration; allowed: plain \"host:port\", or WithTLS", ErrInvalid, s)
		}
	}
	p.dialTimeout, p.tls, p.token = dialTimeout, conf, token
	p.conns = make(map[string][]*wire.Conn)
	return nil
}

// get returns a live connection to addr, dialling one if needed. The
// dial, TLS handshake and auth call run without the pool's lock, so that
// a server that accepts but stalls holds up only the calls to it; if two
// calls dial the same slot at once, the second connection is closed and
// the first kept.
func (p *binaryPool) get(ctx context.Context, addr string) (*wire.Conn, error) {
	i := int(p.next.Add(1) % uint64(p.connsPerServer))
	if c := p.live(addr, i); c != nil {
		return c, nil
	}
	nc, err := p.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	c := wire.NewConn(nc)
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.slots(addr)
	if old := cs[i]; old != nil && !old.Broken() {
		c.Close()
		return old, nil
	}
	cs[i] = c
	return c, nil
}

// live returns the connection in addr's slot i if it is usable.
func (p *binaryPool) live(addr string, i int) *wire.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.slots(addr)[i]; c != nil && !c.Broken() {
		return c
	}
	return nil
}

// slots returns addr's connection slots (p.mu held).
func (p *binaryPool) slots(addr string) []*wire.Conn {
	cs := p.conns[addr]
	if cs == nil {
		cs = make([]*wire.Conn, p.connsPerServer)
		p.conns[addr] = cs
	}
	return cs
}

// dial opens a binary connection to addr: TCP, TLS if configured, the
// preface byte, and the auth call if the client has a token.
func (p *binaryPool) dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: p.dialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if p.tls != nil {
		if nc, err = tlsHandshake(ctx, nc, addr, p.tls); err != nil {
			return nil, err
		}
	}
	if _, err := nc.Write([]byte{wire.ClientPreface}); err != nil {
		nc.Close()
		return nil, err
	}
	if p.token != "" {
		if err := binaryAuth(ctx, nc, p.token); err != nil {
			nc.Close()
			return nil, err
		}
	}
	return nc, nil
}

// close closes every connection.
func (p *binaryPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cs := range p.conns {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	}
	p.conns = make(map[string][]*wire.Conn)
}

// Close releases the client's binary connections (a client without binary
// reserves holds none; HTTP connections are pooled by its http.Client).
func (c *Client) Close() {
	if c.bin != nil {
		c.bin.close()
	}
}

// reserveBinary is reserve over the binary protocol, with the failover of
// HTTP requests: a dial error, a broken connection, a timeout or a node
// without a leader moves to the next server with the same idempotency key
// (k.requestID, or k.session at its current acknowledgement).
func (c *Client) reserveBinary(ctx context.Context, limit string, n int64, maxWait time.Duration, k reserveKey) (Grant, error) {
	var g Grant
	err := c.failover(ctx, "reserve on "+strconv.Quote(limit), func(server string) (attemptOutcome, error) {
		r := wire.Reserve{Limit: limit, Permits: n, MaxWaitNanos: int64(maxWait), RequestID: k.requestID}
		if k.session != nil {
			r.Session = c.sess.wireRef(*k.session)
		}
		ans, err := c.callBinary(ctx, server, wire.OpReserve, wire.EncodeReserve(r))
		if err != nil {
			return binaryOutcome(err), err
		}
		res, err := wire.DecodeReserveResult(ans.payload)
		if err != nil {
			return attemptDone, fmt.Errorf("client: cannot decode the reserve answer of %s: %w", server, err)
		}
		g, err = grantOf(server, limit, n, maxWait, res, ans.sentAt, ans.receivedAt)
		if err != nil {
			return binaryOutcome(err), err
		}
		return attemptDone, nil
	})
	if err != nil {
		return Grant{}, err
	}
	g.RequestID, g.clock = k.String(), c.clock
	return g, nil
}

// grantOf maps a decided reserve of n permits of limit, waiting at most
// maxWait, as the HTTP API would: a grant or a refusal is a Grant (a
// refusal explained as the HTTP API words it); the other outcomes are
// *APIError with the status the HTTP API answers them with
// (SessionExpired wraps errSessionExpired).
func grantOf(server, limit string, n int64, maxWait time.Duration, res wire.ReserveResult, sentAt, receivedAt time.Time) (Grant, error) {
	g := Grant{Permits: n, Duplicate: res.Duplicate, SentAt: sentAt, ReceivedAt: receivedAt}
	switch res.Status {
	case wire.Granted:
		g.Granted, g.Delay, g.ExpiresIn = true, time.Duration(res.WaitNanos), time.Duration(res.ExpiresInNanos)
		g.Spacing = time.Duration(res.SpacingNanos)
	case wire.Refused:
		g.RetryAfter = time.Duration(res.RetryAfterNanos)
		why := res.Detail
		switch {
		case why != "":
		case res.Duplicate:
			why = "this request was refused when it was first decided (a retry gets that decision)"
		default:
			why = "no permit within max_wait " + maxWait.String()
		}
		g.Refusal = fmt.Sprintf("limit %q: %s; retry after %s", limit, why, api.DurationText(g.RetryAfter))
	case wire.KeysFull:
		// As the HTTP API answers it: a 429 naming the cap.
		g.RetryAfter, g.KeysFull = time.Duration(res.RetryAfterNanos), true
		g.Refusal = fmt.Sprintf("limit %q: no key created: %s; retry after %s", limit, res.Detail, api.DurationText(g.RetryAfter))
	case wire.UnknownLimit:
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusNotFound, Message: "limit not found"}
	case wire.Invalid:
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusBadRequest, Message: res.Detail}
	case wire.SessionExpired:
		return Grant{}, fmt.Errorf("%w: %w", errSessionExpired, &APIError{Server: server, StatusCode: http.StatusGone, Message: res.Detail})
	case wire.Busy:
		msg := fmt.Sprintf("the register's table of request ids is full; retry after %s or use a session", api.DurationText(time.Duration(res.RetryAfterNanos)))
		if res.Detail != "" { // a session's answer could not be recorded
			msg = fmt.Sprintf("%s; retry after %s", res.Detail, api.DurationText(time.Duration(res.RetryAfterNanos)))
		}
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusServiceUnavailable, Message: msg}
	default:
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusServiceUnavailable, Message: fmt.Sprintf("unexpected result status %d", res.Status)}
	}
	return g, nil
}

// binaryDialError is a failure to open a connection: nothing was sent.
type binaryDialError struct{ err error }

func (e *binaryDialError) Error() string { return "client: dial: " + e.err.Error() }
func (e *binaryDialError) Unwrap() error { return e.err }

// binaryAnswer is a CodeOK answer of a binary call: its payload, when the
// call was sent and when its answer was read off the connection.
type binaryAnswer struct {
	payload            []byte
	sentAt, receivedAt time.Time
}

// callBinary sends one call to one server and maps an answer code other
// than CodeOK as the HTTP API would: NotFound, Invalid, NoLeader and other
// failures are *APIError with the HTTP status they stand for.
func (c *Client) callBinary(ctx context.Context, server string, op byte, payload []byte) (binaryAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
	defer cancel()
	addr := strings.TrimPrefix(strings.TrimPrefix(server, "http://"), "https://")
	conn, err := c.bin.get(ctx, addr)
	if err != nil {
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			return binaryAnswer{}, apiErr // the auth call's answer (401): final
		}
		return binaryAnswer{}, &binaryDialError{err: err}
	}
	sentAt := c.clock.Now()
	code, resp, received, err := conn.CallTimed(ctx, op, payload)
	if err != nil {
		// A broken connection is redialled by the next get; a timed-out
		// call leaves it usable. Either way the outcome is unknown and the
		// next attempt goes to the next server with the same key.
		return binaryAnswer{}, err
	}
	if _, real := c.clock.(realClock); !real {
		received = c.clock.Now() // a test clock: the connection's instant is on another clock
	}
	switch code {
	case wire.CodeOK:
		return binaryAnswer{payload: resp, sentAt: sentAt, receivedAt: received}, nil
	case wire.CodeNotFound:
		return binaryAnswer{}, &APIError{Server: server, StatusCode: http.StatusNotFound, Message: string(resp)}
	case wire.CodeInvalid:
		return binaryAnswer{}, &APIError{Server: server, StatusCode: http.StatusBadRequest, Message: string(resp)}
	case wire.CodeForbidden:
		return binaryAnswer{}, &APIError{Server: server, StatusCode: http.StatusForbidden, Message: string(resp)}
	case wire.CodeUnauthenticated:
		return binaryAnswer{}, &APIError{Server: server, StatusCode: http.StatusUnauthorized, Message: string(resp)}
	}
	return binaryAnswer{}, &APIError{Server: server, StatusCode: http.StatusServiceUnavailable, Message: string(resp)}
}

// binaryOutcome tells failover what to do after a failed binary attempt:
// nothing was sent (a dial error), the answer is final (4xx, an expired
// session), or try the next server.
func binaryOutcome(err error) attemptOutcome {
	var dialErr *binaryDialError
	var apiErr *APIError
	switch {
	case errors.As(err, &dialErr):
		return attemptUndelivered
	case errors.As(err, &apiErr) && apiErr.StatusCode != http.StatusServiceUnavailable:
		return attemptDone // the same answer everywhere
	}
	return attemptRetry
}
