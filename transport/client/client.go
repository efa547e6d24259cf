package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/wire"
)

// maxResponseBytes bounds a response body read by the client.
const maxResponseBytes = 32 << 20

// Client talks to a permitd cluster. It is safe for concurrent use.
type Client struct {
	servers        []string // base URLs: "http://host:port"
	hc             *http.Client
	log            hclog.Logger
	clock          Clock
	backoffBase    time.Duration
	backoffMax     time.Duration
	defaultMaxWait time.Duration
	attemptTimeout time.Duration
	rounds         int
	bin            *binaryPool // nil: everything over HTTP
	tls            *tls.Config // nil: plain HTTP unless a server says https
	token          string      // API token ("": none)
	noSessions     bool        // reserves carry request IDs instead
	sess           sessionState

	rngMu sync.Mutex
	rng   *mrand.Rand

	// last is the index of the last server that answered.
	last atomic.Int64
	// homeAfter (WithReturnToFirst), if positive, makes a call start at
	// the first server again once that long has passed since the calls
	// moved away from it (leftHomeAt, nanoseconds since born on the
	// client's clock, monotonic with the real one).
	homeAfter  time.Duration
	born       time.Time
	leftHomeAt atomic.Int64
}

// New returns a client for the given servers ("host:port", or a base URL
// "http://host:port" / "https://host:port").
func New(servers []string, opts ...Option) (*Client, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: no servers given; allowed: one or more \"host:port\"", ErrInvalid)
	}
	c := &Client{
		backoffBase:    DefaultBackoffBase,
		backoffMax:     DefaultBackoffMax,
		defaultMaxWait: DefaultMaxWait,
		attemptTimeout: DefaultAttemptTimeout,
		rounds:         DefaultRounds,
	}
	for _, o := range opts {
		o(c)
	}
	for _, s := range servers {
		base, err := baseURL(s, c.tls != nil)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, base)
	}
	switch {
	case c.backoffBase <= 0 || c.backoffMax < c.backoffBase:
		return nil, fmt.Errorf("%w: backoff base %v, max %v; allowed: 0 < base <= max", ErrInvalid, c.backoffBase, c.backoffMax)
	case c.defaultMaxWait < 0:
		return nil, fmt.Errorf("%w: default max wait %v; allowed: >= 0", ErrInvalid, c.defaultMaxWait)
	case c.attemptTimeout <= 0:
		return nil, fmt.Errorf("%w: attempt timeout %v; allowed: > 0", ErrInvalid, c.attemptTimeout)
	case c.rounds < 1:
		return nil, fmt.Errorf("%w: rounds %d; allowed: >= 1", ErrInvalid, c.rounds)
	}
	if c.bin != nil {
		if err := c.bin.init(c.servers, c.attemptTimeout, c.tls, c.token); err != nil {
			return nil, err
		}
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			TLSClientConfig:     c.tls,
			ForceAttemptHTTP2:   c.tls != nil,
		}}
	}
	if c.log == nil {
		c.log = hclog.NewNullLogger()
	}
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.rng == nil {
		c.rng = mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	}
	c.born = c.clock.Now()
	return c, nil
}

// baseURL turns "host:port" or "http(s)://host:port" into a base URL
// ("host:port" is https with TLS, else http; "http://" is refused with
// TLS).
func baseURL(s string, withTLS bool) (string, error) {
	raw := s
	if !strings.Contains(s, "://") {
		raw = "http://" + s
		if withTLS {
			raw = "https://" + s
		}
	} else if withTLS && strings.HasPrefix(s, "http://") {
		return "", fmt.Errorf("%w: server %q is plain http but the client is configured for TLS; allowed: \"host:port\" or \"https://host:port\"", ErrInvalid, s)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("%w: server %q; allowed: \"host:port\" or \"http://host:port\"", ErrInvalid, s)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Servers returns the base URLs of the servers, in failover order.
func (c *Client) Servers() []string { return append([]string(nil), c.servers...) }

// newRequestID returns 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// backoff returns a full-jitter backoff for attempt k (0-based): uniform in
// [0, min(ceiling, backoffMax, backoffBase·2^k)]. A ceiling < 0 means none.
func (c *Client) backoff(k int, ceiling time.Duration) time.Duration {
	d := c.backoffMax
	if k < 62 {
		if b := c.backoffBase << k; b > 0 && b < d && b>>k == c.backoffBase {
			d = b
		}
	}
	if ceiling >= 0 && ceiling < d {
		d = ceiling
	}
	return c.jitter(d)
}

// jitter returns a duration uniform in [0, d] (0 for d <= 0).
func (c *Client) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	return time.Duration(c.rng.Int64N(int64(min(d, math.MaxInt64-1)) + 1))
}

// response is one answer from one server.
type response struct {
	server     string
	code       int
	header     http.Header
	body       []byte
	sentAt     time.Time // when the attempt that answered was sent
	receivedAt time.Time // when its body had been read, before parsing
}

// apiError builds the error for a non-2xx answer.
func (r *response) apiError() *APIError {
	var e api.ErrorAnswer
	msg := strings.TrimSpace(string(r.body))
	if err := jsonUnmarshal(r.body, &e); err == nil && e.Error != "" {
		msg = e.Error
	}
	if len(msg) > 1024 {
		msg = msg[:1024] + "..."
	}
	if r.code == http.StatusBadRequest {
		msg = httpsAnswerHint(msg)
	}
	return &APIError{Server: r.server, StatusCode: r.code, Message: msg}
}

// attemptOutcome is what one attempt against one server came to.
type attemptOutcome int

const (
	// attemptDone: the server answered (an error, if any, is final).
	attemptDone attemptOutcome = iota
	// attemptRetry: no usable answer (a timeout, a broken connection, a
	// 503); the request may have been applied. Try the next server.
	attemptRetry
	// attemptUndelivered: the connection could not be opened; nothing was
	// sent. Try the next server.
	attemptUndelivered
)

// failover runs try against the servers: it starts at the last server that
// answered and, while try asks for a retry, moves to the next, for at most
// rounds×len(servers) attempts, backing off with jitter after each full
// round. It returns try's final error, or ErrUnavailable (wrapped with
// ErrNotDelivered when no attempt got as far as an open connection).
func (c *Client) failover(ctx context.Context, what string, try func(server string) (attemptOutcome, error)) error {
	n := len(c.servers)
	start := c.startServer()
	attempts := c.rounds * n
	var lastErr error
	var lastServer string
	// undelivered stays true while every attempt failed before a
	// connection was open (see ErrNotDelivered).
	undelivered := true
	notDelivered := func(err error) error {
		if undelivered {
			return fmt.Errorf("%w: %w", ErrNotDelivered, err)
		}
		return err
	}
	// last503 is the last 503 a server answered: when the context ends
	// during a later attempt, its cause (no leader, say) is the error's,
	// not the attempt's "context deadline exceeded".
	var last503 *APIError
	ended := func(ctxErr, failure error) error {
		if last503 != nil {
			return notDelivered(fmt.Errorf("client: %s: %s (503 from %s); then %w", what, last503.Message, last503.Server, ctxErr))
		}
		return notDelivered(fmt.Errorf("client: %s: %w (last failure: %v)", what, ctxErr, failure))
	}
	for a := 0; a < attempts; a++ {
		if a > 0 && a%n == 0 {
			if err := c.clock.Sleep(ctx, c.backoff(a/n-1, -1)); err != nil {
				return ended(err, lastErr)
			}
		}
		if err := ctx.Err(); err != nil {
			return ended(err, lastErr)
		}
		idx := (start + a) % n
		out, err := try(c.servers[idx])
		if out == attemptDone {
			c.answeredBy(start, idx)
			return err
		}
		undelivered = undelivered && out == attemptUndelivered
		if api := (*APIError)(nil); errors.As(err, &api) && api.StatusCode == http.StatusServiceUnavailable {
			last503 = api
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ended(ctxErr, err)
		}
		c.log.Debug("attempt failed, trying the next server", "server", c.servers[idx], "request", what, "error", err)
		lastErr, lastServer = err, c.servers[idx]
	}
	if hint := wrongPortHint(ctx, lastServer, lastErr); hint != "" {
		return notDelivered(&hintedError{
			msg: fmt.Sprintf("%v: %s failed on %s over %s: %s; last failure: %v",
				ErrUnavailable, what, plural(attempts, "attempt"), plural(n, "server"), hint, lastErr),
			hint: hint,
			err:  fmt.Errorf("%w: %w", ErrUnavailable, lastErr),
		})
	}
	var lastAPI *APIError
	if last503 != nil && !errors.As(lastErr, &lastAPI) {
		// A server down after one that answered 503 (no leader, say):
		// the answer names the cause, the refused connection does not.
		return fmt.Errorf("%w: %s failed on %s over %s; last answer: %w; last failure: %v",
			ErrUnavailable, what, plural(attempts, "attempt"), plural(n, "server"), last503, lastErr)
	}
	return notDelivered(fmt.Errorf("%w: %s failed on %s over %s; last failure: %w",
		ErrUnavailable, what, plural(attempts, "attempt"), plural(n, "server"), lastErr))
}

// startServer is the index of the server a call tries first: the last
// that answered, or the first once homeAfter has passed since the calls
// left it. One call at a time tries the first again (the others keep to
// the last that answered until it does), and it tries again homeAfter
// later if the first still fails.
func (c *Client) startServer() int {
	start := int(c.last.Load())
	if start == 0 || c.homeAfter <= 0 {
		return start
	}
	now, left := c.sinceBorn(), c.leftHomeAt.Load()
	if now-left >= int64(c.homeAfter) && c.leftHomeAt.CompareAndSwap(left, now) {
		return 0
	}
	return start
}

// sinceBorn is the client clock's time since New, in nanoseconds.
func (c *Client) sinceBorn() int64 { return int64(c.clock.Now().Sub(c.born)) }

// answeredBy records that server idx answered a call that started at
// server start. With homeAfter, an answer from the first brings every
// call back to it, a call that started at the first and was answered by
// another marks when the calls left it, and a late answer to a call that
// started elsewhere does not move the calls away from the server they
// are at now.
func (c *Client) answeredBy(start, idx int) {
	if c.homeAfter <= 0 {
		c.last.Store(int64(idx))
		return
	}
	switch {
	case idx == 0:
		c.last.Store(0) // the first answered: every call starts there again
	case start == 0:
		c.leftHomeAt.Store(c.sinceBorn())
		c.last.CompareAndSwap(0, int64(idx))
	default:
		c.last.CompareAndSwap(int64(start), int64(idx))
	}
}

// send performs one request with failover (see failover): a connection
// error, a timeout or a 503 moves to the next server; any other answer
// (2xx, 4xx) is returned as is. The same body is sent on every attempt.
func (c *Client) send(ctx context.Context, method, path string, body []byte) (*response, error) {
	return c.sendDecided(ctx, method, path, body, nil, 0)
}

// sendDecided is send, except that a 503 for which decided (if not nil)
// reports true is returned as an answer: the register decided it, and
// another server would answer the same; and that the server may hold the
// answer for up to held before it answers (a reserve that waits in an
// in-flight cap's queue): each attempt may take that much longer than the
// attempt timeout.
func (c *Client) sendDecided(ctx context.Context, method, path string, body []byte, decided func(*response) bool, held time.Duration) (*response, error) {
	var resp *response
	err := c.failover(ctx, method+" "+path, func(server string) (attemptOutcome, error) {
		r, err := c.attempt(ctx, server, method, path, body, held)
		switch {
		case err != nil && isDialError(err):
			return attemptUndelivered, err
		case err != nil:
			return attemptRetry, err
		case r.code == http.StatusServiceUnavailable && (decided == nil || !decided(r)):
			return attemptRetry, r.apiError()
		}
		resp = r
		return attemptDone, nil
	})
	return resp, err
}

// isDialError reports whether err is a failure to open a connection
// (refused, unreachable, dial timeout): nothing of the request was written.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// attempt sends one request to one server, within the attempt timeout
// plus held (see sendHeld).
func (c *Client) attempt(ctx context.Context, server, method, path string, body []byte, held time.Duration) (*response, error) {
	timeout := c.attemptTimeout
	if held > 0 {
		timeout = wire.AddNanos(timeout, held)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, server+path, rd)
	if err != nil {
		return nil, fmt.Errorf("client: building request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	c.authorize(req)
	sentAt := c.clock.Now()
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("client: reading the answer of %s: %w", server, err)
	}
	receivedAt := c.clock.Now()
	if len(b) > maxResponseBytes {
		return nil, fmt.Errorf("client: answer of %s is larger than %d bytes", server, maxResponseBytes)
	}
	return &response{server: server, code: res.StatusCode, header: res.Header, body: b, sentAt: sentAt, receivedAt: receivedAt}, nil
}

// call sends a JSON request (in may be nil) and decodes a 2xx answer into
// out (may be nil). Non-2xx answers become *APIError.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = jsonMarshal(in); err != nil {
			return fmt.Errorf("%w: encoding the request: %v", ErrInvalid, err)
		}
	}
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	if resp.code < 200 || resp.code > 299 {
		return resp.apiError()
	}
	if out != nil {
		if err := jsonUnmarshal(resp.body, out); err != nil {
			return fmt.Errorf("client: cannot decode the answer of %s to %s %s: %w", resp.server, method, path, err)
		}
	}
	return nil
}

var errNoGrant = errors.New("client: wait on a refused grant")
