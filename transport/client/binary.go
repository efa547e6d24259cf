package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node/binproto"
)

// binary.go: reserves over permitd's binary, pipelined protocol (package
// binproto) instead of HTTP, on the same port. Every concurrent Reserve
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
	return func(c *Client) { c.bin = &binaryPool{connsPerServer: connsPerServer} }
}

// binaryPool keeps the pipelined connections, per server.
type binaryPool struct {
	connsPerServer int
	dialTimeout    time.Duration

	mu    sync.Mutex
	conns map[string][]*binproto.Conn // by "host:port"
	next  atomic.Uint64
}

// init checks the option's value and the servers.
func (p *binaryPool) init(servers []string, dialTimeout time.Duration) error {
	if p.connsPerServer < 1 || p.connsPerServer > 64 {
		return fmt.Errorf("%w: %d binary connections per server; allowed: 1..64", ErrInvalid, p.connsPerServer)
	}
	for _, s := range servers {
		if !strings.HasPrefix(s, "http://") {
			return fmt.Errorf("%w: server %s with binary reserves; allowed: plain \"host:port\" (the binary protocol has no TLS)", ErrInvalid, s)
		}
	}
	p.dialTimeout = dialTimeout
	p.conns = make(map[string][]*binproto.Conn)
	return nil
}

// get returns a live connection to addr, dialling one if needed.
func (p *binaryPool) get(ctx context.Context, addr string) (*binproto.Conn, error) {
	i := int(p.next.Add(1) % uint64(p.connsPerServer))
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.conns[addr]
	if cs == nil {
		cs = make([]*binproto.Conn, p.connsPerServer)
		p.conns[addr] = cs
	}
	if c := cs[i]; c != nil && !c.Broken() {
		return c, nil
	}
	d := net.Dialer{Timeout: p.dialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := nc.Write([]byte{binproto.ClientPreface}); err != nil {
		nc.Close()
		return nil, err
	}
	cs[i] = binproto.NewConn(nc)
	return cs[i], nil
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
	p.conns = make(map[string][]*binproto.Conn)
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
// without a leader moves to the next server with the same request ID.
func (c *Client) reserveBinary(ctx context.Context, limit string, n int64, maxWait time.Duration, id string) (Grant, error) {
	payload := binproto.EncodeReserve(fsm.Reserve{Limit: limit, Permits: n, MaxWaitNanos: int64(maxWait), RequestID: id})
	var g Grant
	err := c.failover(ctx, "reserve on "+strconv.Quote(limit), func(server string) (attemptOutcome, error) {
		got, err := c.attemptBinary(ctx, server, payload)
		var dialErr *binaryDialError
		var apiErr *APIError
		switch {
		case err == nil:
			g = got
			return attemptDone, nil
		case errors.As(err, &dialErr):
			return attemptUndelivered, err
		case errors.As(err, &apiErr) && apiErr.StatusCode != http.StatusServiceUnavailable:
			return attemptDone, err // 4xx: the same answer everywhere
		}
		return attemptRetry, err
	})
	if err != nil {
		return Grant{}, err
	}
	g.RequestID, g.clock = id, c.clock
	return g, nil
}

// binaryDialError is a failure to open a connection: nothing was sent.
type binaryDialError struct{ err error }

func (e *binaryDialError) Error() string { return "client: dial: " + e.err.Error() }
func (e *binaryDialError) Unwrap() error { return e.err }

// attemptBinary sends one reserve to one server and maps its answer as the
// HTTP API would: a decision is a Grant; NotFound, Invalid, NoLeader and
// other failures are *APIError with the HTTP status they stand for.
func (c *Client) attemptBinary(ctx context.Context, server string, payload []byte) (Grant, error) {
	ctx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
	defer cancel()
	addr := strings.TrimPrefix(server, "http://")
	conn, err := c.bin.get(ctx, addr)
	if err != nil {
		return Grant{}, &binaryDialError{err: err}
	}
	sentAt := c.clock.Now()
	code, resp, err := conn.Call(ctx, binproto.OpReserve, payload)
	receivedAt := c.clock.Now()
	if err != nil {
		// A broken connection is redialled by the next get; a timed-out
		// call leaves it usable. Either way the outcome is unknown and the
		// next attempt goes to the next server with the same request ID.
		return Grant{}, err
	}
	switch code {
	case binproto.CodeOK:
	case binproto.CodeNotFound:
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusNotFound, Message: string(resp)}
	case binproto.CodeInvalid:
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusBadRequest, Message: string(resp)}
	default:
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusServiceUnavailable, Message: string(resp)}
	}
	res, err := binproto.DecodeReserveResult(resp)
	if err != nil {
		return Grant{}, fmt.Errorf("client: cannot decode the reserve answer of %s: %w", server, err)
	}
	g := Grant{Duplicate: res.Duplicate, SentAt: sentAt, ReceivedAt: receivedAt}
	switch res.Status {
	case fsm.Granted:
		g.Granted, g.Delay, g.ExpiresIn = true, time.Duration(res.WaitNanos), time.Duration(res.ExpiresInNanos)
	case fsm.Refused:
		g.RetryAfter = time.Duration(res.RetryAfterNanos)
	case fsm.UnknownLimit:
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusNotFound, Message: "limit not found"}
	case fsm.Invalid:
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusBadRequest, Message: res.Detail}
	default:
		return Grant{}, &APIError{Server: server, StatusCode: http.StatusServiceUnavailable, Message: fmt.Sprintf("unexpected result status %d", res.Status)}
	}
	return g, nil
}
