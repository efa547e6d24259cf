package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Grant is the answer to a reserve.
type Grant struct {
	// Granted reports whether the permits were reserved.
	Granted bool
	// Delay (granted) is how long after ReceivedAt the permits may be used.
	Delay time.Duration
	// ExpiresIn (granted, when the limit has expiry) is how long after the
	// decision the permits stop being usable; 0 means no expiry. The client
	// counts it from SentAt, which is never later than the decision.
	ExpiresIn time.Duration
	// RetryAfter (refused) is when, as known by the server, the same
	// request could be granted, counted from ReceivedAt.
	RetryAfter time.Duration
	// Duplicate reports that the server had already decided this request
	// id (a retry after a lost answer) and replayed that decision.
	Duplicate bool
	// RequestID is the idempotency key the reserve carried.
	RequestID string
	// SentAt is when the attempt that was answered was sent; ReceivedAt is
	// when its answer had been received, before it was parsed.
	SentAt, ReceivedAt time.Time

	clock Clock
}

// ReadyAt is when the permits may be used: ReceivedAt + Delay.
func (g Grant) ReadyAt() time.Time { return g.ReceivedAt.Add(g.Delay) }

// ExpiresAt is the conservative end of the permits' validity (SentAt +
// ExpiresIn), or the zero time when they do not expire. A negative
// ExpiresIn (a replayed grant that had already expired) is expired at
// SentAt.
func (g Grant) ExpiresAt() time.Time {
	switch {
	case g.ExpiresIn == 0:
		return time.Time{}
	case g.ExpiresIn < 0:
		return g.SentAt
	}
	return g.SentAt.Add(g.ExpiresIn)
}

// Wait sleeps until ReadyAt, or until ctx is done (returning its error). It
// returns ErrExpired if the permits expired before Wait returned, and
// ErrThrottled for a refused grant.
func (g Grant) Wait(ctx context.Context) error {
	if !g.Granted {
		return fmt.Errorf("%w (%w)", errNoGrant, ErrThrottled)
	}
	clk := g.clock
	if clk == nil {
		clk = realClock{}
	}
	if d := g.ReadyAt().Sub(clk.Now()); d > 0 {
		if err := clk.Sleep(ctx, d); err != nil {
			return fmt.Errorf("client: waiting %v for a granted permit: %w", d, err)
		}
	}
	if exp := g.ExpiresAt(); !exp.IsZero() && clk.Now().After(exp) {
		return fmt.Errorf("%w: expired at %v, now %v", ErrExpired, exp, clk.Now())
	}
	return nil
}

// reserveAnswer is the JSON of a reserve answer (200 or 429).
type reserveAnswer struct {
	Granted      bool   `json:"granted"`
	WaitNanos    int64  `json:"wait_ns"`
	ExpiresNanos int64  `json:"expires_in_ns"`
	RetryNanos   int64  `json:"retry_after_ns"`
	Duplicate    bool   `json:"duplicate"`
	Error        string `json:"error"`
}

// Reserve asks for n permits of limit, accepting a wait of at most maxWait.
// A refusal (429) is not an error: it returns a Grant with Granted false
// and RetryAfter. Connection errors and 503s fail over to the next server
// with the same request id. Reserve never sleeps for the permit; see
// Grant.Wait.
func (c *Client) Reserve(ctx context.Context, limit string, n int64, maxWait time.Duration) (Grant, error) {
	if n < 1 {
		return Grant{}, fmt.Errorf("%w: reserve %d permits of %q; allowed: n >= 1", ErrInvalid, n, limit)
	}
	if maxWait < 0 {
		return Grant{}, fmt.Errorf("%w: reserve with max wait %v; allowed: >= 0", ErrInvalid, maxWait)
	}
	if c.bin != nil {
		return c.reserveBinary(ctx, limit, n, maxWait, newRequestID())
	}
	return c.reserve(ctx, limit, n, maxWait, newRequestID())
}

func (c *Client) reserve(ctx context.Context, limit string, n int64, maxWait time.Duration, id string) (Grant, error) {
	body := make([]byte, 0, 96)
	body = append(body, `{"permits":`...)
	body = strconv.AppendInt(body, n, 10)
	body = append(body, `,"max_wait":"`...)
	body = append(body, maxWait.String()...)
	body = append(body, `","request_id":"`...)
	body = append(body, id...)
	body = append(body, `"}`...)
	path := "/v1/limits/" + url.PathEscape(limit) + "/reserve"
	resp, err := c.send(ctx, http.MethodPost, path, body)
	if err != nil {
		return Grant{}, err
	}
	if resp.code != http.StatusOK && resp.code != http.StatusTooManyRequests {
		return Grant{}, resp.apiError()
	}
	var a reserveAnswer
	if err := jsonUnmarshal(resp.body, &a); err != nil {
		return Grant{}, fmt.Errorf("client: cannot decode the reserve answer of %s: %w", resp.server, err)
	}
	g := Grant{
		Granted:    resp.code == http.StatusOK && a.Granted,
		Duplicate:  a.Duplicate,
		RequestID:  id,
		SentAt:     resp.sentAt,
		ReceivedAt: resp.receivedAt,
		clock:      c.clock,
	}
	if g.Granted {
		g.Delay = time.Duration(a.WaitNanos)
		g.ExpiresIn = time.Duration(a.ExpiresNanos)
	} else {
		g.RetryAfter = time.Duration(a.RetryNanos)
	}
	return g, nil
}

// TryAcquire reserves n permits of limit if they can be used within
// maxWait. On refusal it returns at once a *RefusedError (errors.Is
// ErrThrottled) with RetryAfter; it never sleeps. On grant it does not
// sleep either: call Grant.Wait before using the permits.
func (c *Client) TryAcquire(ctx context.Context, limit string, n int64, maxWait time.Duration) (Grant, error) {
	g, err := c.Reserve(ctx, limit, n, maxWait)
	if err != nil {
		return Grant{}, err
	}
	if !g.Granted {
		return g, &RefusedError{Limit: limit, RetryAfter: g.RetryAfter}
	}
	return g, nil
}

// Acquire blocks until n permits of limit may be used, or ctx is done. It
// reserves with max_wait = the time left until ctx's deadline (or the
// default max wait without one), then sleeps the granted wait. When refused
// it backs off with full jitter, never longer than the server's
// retry_after, and retries with a new request id until ctx is done.
// Errors other than refusals (unknown limit, invalid request, no server
// available after the bounded failover) end it.
func (c *Client) Acquire(ctx context.Context, limit string, n int64) error {
	for k := 0; ; k++ {
		maxWait := c.defaultMaxWait
		if dl, ok := ctx.Deadline(); ok {
			maxWait = dl.Sub(c.clock.Now())
			if maxWait <= 0 {
				return fmt.Errorf("client: acquire %d permits of %q: %w", n, limit, context.DeadlineExceeded)
			}
		}
		g, err := c.Reserve(ctx, limit, n, maxWait)
		if err != nil {
			return err
		}
		if g.Granted {
			return g.Wait(ctx)
		}
		d := c.backoff(k, g.RetryAfter)
		c.log.Trace("reserve refused, backing off", "limit", limit, "retry_after", g.RetryAfter, "backoff", d)
		if err := c.clock.Sleep(ctx, d); err != nil {
			return fmt.Errorf("client: acquire %d permits of %q: %w", n, limit, err)
		}
	}
}
