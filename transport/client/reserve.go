package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/wire"
)

// Grant is the answer to a reserve.
type Grant struct {
	// Granted reports whether the permits were reserved.
	Granted bool
	// Permits is how many permits the reserve asked for.
	Permits int64
	// Delay (granted) is how long after ReceivedAt the first permit may be
	// used.
	Delay time.Duration
	// Spacing (granted) is how far apart the permits of this grant must
	// be used: permit j (0-based) may be used Delay + j*Spacing after
	// ReceivedAt and expires ExpiresIn + j*Spacing after SentAt. A strict
	// limit spaces the permits of a grant by its interval; the other
	// algorithms grant them together (Spacing 0).
	Spacing time.Duration
	// ExpiresIn (granted, when the limit has expiry) is how long after the
	// answer left the server the first permit stops being usable; 0 means
	// no expiry. The client counts it from SentAt + Held, which is never
	// later than the answer's departure.
	ExpiresIn time.Duration
	// Held (granted, reservation form) is how long the server held the
	// request before it answered, as it measured it (a reserve that waited
	// in an in-flight cap's queue; about 0 otherwise), at most ReceivedAt
	// - SentAt.
	Held time.Duration
	// RetryAfter (refused) is when, as known by the server, the same
	// request could be granted, counted from ReceivedAt.
	RetryAfter time.Duration
	// Refusal (refused) is the server's explanation: no permit within the
	// max wait, or another reason, such as a strict limit that may not
	// reserve ahead (its max_reserved); empty if it gave none.
	Refusal string
	// KeysFull (refused) reports that the limit is a key a template
	// would create on this reserve, and that the template's max keys or
	// the register's cap on templated keys is reached (Refusal names
	// it): nothing was created; RetryAfter is when a key may go.
	KeysFull bool
	// Duplicate reports that the server had already decided this request
	// (a retry after a lost answer) and replayed that decision.
	Duplicate bool
	// RequestID is the idempotency key the reserve carried: its request
	// ID, or "session:ID:SEQ" for a reserve made in a client session.
	RequestID string
	// SentAt is when the attempt that was answered was sent; ReceivedAt is
	// when its answer had been received, before it was parsed.
	SentAt, ReceivedAt time.Time

	clock Clock
}

// ReadyAt is when the first permit may be used: ReceivedAt + Delay.
func (g Grant) ReadyAt() time.Time { return g.ReceivedAt.Add(g.Delay) }

// ReadyAtPermit is when permit j (0-based) may be used: ReadyAt +
// j*Spacing.
func (g Grant) ReadyAtPermit(j int64) time.Time {
	return g.ReadyAt().Add(wire.MulNanos(time.Duration(j), g.Spacing))
}

// ExpiresAt is the conservative end of the first permit's validity (SentAt
// + Held + ExpiresIn), or the zero time when the permits do not expire. A
// negative ExpiresIn (a replayed grant that had already expired) is
// expired at SentAt.
func (g Grant) ExpiresAt() time.Time {
	switch {
	case g.ExpiresIn == 0:
		return time.Time{}
	case g.ExpiresIn < 0:
		return g.SentAt
	}
	return g.SentAt.Add(g.Held).Add(g.ExpiresIn)
}

// ExpiresAtPermit is the end of permit j's validity: ExpiresAt +
// j*Spacing, or the zero time when the permits do not expire.
func (g Grant) ExpiresAtPermit(j int64) time.Time {
	exp := g.ExpiresAt()
	if exp.IsZero() || g.ExpiresIn < 0 {
		return exp
	}
	return exp.Add(wire.MulNanos(time.Duration(j), g.Spacing))
}

// Spaced reports whether the grant's permits must be used one by one, at
// their own times (Spacing > 0 and more than one permit).
func (g Grant) Spaced() bool { return g.Spacing > 0 && g.Permits > 1 }

// Wait sleeps until the grant's permits may be used together, or until ctx
// is done (returning its error). It returns ErrExpired if they expired
// before Wait returned, ErrThrottled for a refused grant, and
// ErrSpacedGrant for a grant whose permits must be used one by one (see
// WaitPermit): using them together would break the limit.
func (g Grant) Wait(ctx context.Context) error {
	if g.Spaced() {
		return fmt.Errorf("%w: %d permits %v apart", ErrSpacedGrant, g.Permits, g.Spacing)
	}
	return g.WaitPermit(ctx, 0)
}

// WaitPermit sleeps until permit j (0-based) of the grant may be used, or
// until ctx is done (returning its error). It returns ErrExpired if that
// permit expired before WaitPermit returned, and ErrThrottled for a
// refused grant. Use permit j right after it returns, and each permit once.
func (g Grant) WaitPermit(ctx context.Context, j int64) error {
	if !g.Granted {
		return fmt.Errorf("%w (%w)", errNoGrant, ErrThrottled)
	}
	if j < 0 || (g.Permits > 0 && j >= g.Permits) {
		return fmt.Errorf("%w: permit %d of a grant of %d (allowed: 0 to %d)", ErrInvalid, j, g.Permits, g.Permits-1)
	}
	clk := g.clock
	if clk == nil {
		clk = realClock{}
	}
	if d := g.ReadyAtPermit(j).Sub(clk.Now()); d > 0 {
		if err := clk.Sleep(ctx, d); err != nil {
			return fmt.Errorf("client: waiting %v for a granted permit: %w", d, err)
		}
	}
	if exp, now := g.ExpiresAtPermit(j), clk.Now(); !exp.IsZero() && now.After(exp) {
		return fmt.Errorf("%w: permit %d expired %v ago (at %s); reserve again", ErrExpired, j,
			now.Sub(exp).Round(time.Microsecond), exp.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// reserveKey is what makes a reserve idempotent: a request ID, or a place
// in the client's session.
type reserveKey struct {
	requestID string
	session   *sessionRef
}

// String is the key as Grant.RequestID reports it.
func (k reserveKey) String() string {
	if k.session != nil {
		return k.session.requestKey()
	}
	return k.requestID
}

// Reserve asks for n permits of limit, accepting a wait of at most maxWait.
// A refusal (429) is not an error: it returns a Grant with Granted false
// and RetryAfter. Connection errors and 503s fail over to the next server
// with the same idempotency key, so that a retry is never decided twice:
// the reserve is numbered in the client's session (opened on first use,
// and again if it expires), or carries a request ID with WithoutSessions,
// or while the register refuses to open a session (SessionRefusedError).
// Reserve never sleeps for the permits; see Grant.Wait and
// Grant.WaitPermit.
func (c *Client) Reserve(ctx context.Context, limit string, n int64, maxWait time.Duration) (Grant, error) {
	if n < 1 {
		return Grant{}, fmt.Errorf("%w: reserve %d permits of %q; allowed: n >= 1", ErrInvalid, n, limit)
	}
	if maxWait < 0 {
		return Grant{}, fmt.Errorf("%w: reserve with max wait %v; allowed: >= 0", ErrInvalid, maxWait)
	}
	if c.noSessions {
		return c.reserveKeyed(ctx, limit, n, maxWait, reserveKey{requestID: newRequestID()})
	}
	// An expired session decided nothing; the request is sent again, as a
	// new one, in a new session (see session.go). Twice in a row means
	// sessions expire as fast as they open: give up.
	for range 2 {
		ref, err := c.sess.begin(ctx, c.OpenSession, c.clock.Now)
		if refused := (*SessionRefusedError)(nil); errors.As(err, &refused) || errors.Is(err, errNoSession) {
			// The register holds as many sessions as it may: a request ID
			// makes this reserve exactly-once as well.
			if refused != nil {
				c.log.Warn("the register refused a session; reserving with request ids until it may open one", "retry_after", refused.RetryAfter, "error", refused.Message)
			}
			return c.reserveKeyed(ctx, limit, n, maxWait, reserveKey{requestID: newRequestID()})
		}
		if err != nil {
			return Grant{}, fmt.Errorf("client: opening a session for a reserve on %q: %w", limit, err)
		}
		g, err := c.reserveKeyed(ctx, limit, n, maxWait, reserveKey{session: &ref})
		c.sess.finish(ref)
		if errors.Is(err, errSessionExpired) {
			c.log.Debug("session expired, opening a new one", "session", ref.id)
			c.sess.expired(ref.id)
			continue
		}
		return g, err
	}
	return Grant{}, fmt.Errorf("%w: reserve on %q: the register answered two sessions in a row as not open (expired, or opened with another API token: do the servers agree on the client's token?)", ErrUnavailable, limit)
}

// reserveKeyed sends one reserve with its key over the client's protocol.
func (c *Client) reserveKeyed(ctx context.Context, limit string, n int64, maxWait time.Duration, k reserveKey) (Grant, error) {
	if c.bin != nil && c.bin.reserves {
		return c.reserveBinary(ctx, limit, n, maxWait, k)
	}
	return c.reserve(ctx, limit, n, maxWait, k)
}

func (c *Client) reserve(ctx context.Context, limit string, n int64, maxWait time.Duration, k reserveKey) (Grant, error) {
	body := make([]byte, 0, 128)
	body = append(body, `{"permits":`...)
	body = strconv.AppendInt(body, n, 10)
	body = append(body, `,"max_wait":"`...)
	body = append(body, maxWait.String()...)
	if k.session != nil {
		ref := c.sess.wireRef(*k.session)
		body = append(body, `","session":`...)
		body = strconv.AppendUint(body, ref.ID, 10)
		body = append(body, `,"seq":`...)
		body = strconv.AppendUint(body, ref.Seq, 10)
		body = append(body, `,"acked_below":`...)
		body = strconv.AppendUint(body, ref.AckedBelow, 10)
		body = append(body, '}')
	} else {
		body = append(body, `","request_id":"`...)
		body = append(body, k.requestID...)
		body = append(body, `"}`...)
	}
	path := "/v1/limits/" + url.PathEscape(limit) + "/reserve"
	resp, err := c.send(ctx, http.MethodPost, path, body)
	if err != nil {
		return Grant{}, err
	}
	if resp.code == http.StatusGone {
		return Grant{}, fmt.Errorf("%w: %w", errSessionExpired, resp.apiError())
	}
	if resp.code != http.StatusOK && resp.code != http.StatusTooManyRequests {
		return Grant{}, resp.apiError()
	}
	var a api.ReserveAnswer
	if err := jsonUnmarshal(resp.body, &a); err != nil {
		return Grant{}, fmt.Errorf("client: cannot decode the reserve answer of %s: %w", resp.server, err)
	}
	g := Grant{
		Granted:    resp.code == http.StatusOK && a.Granted,
		Permits:    n,
		Duplicate:  a.Duplicate,
		RequestID:  k.String(),
		SentAt:     resp.sentAt,
		ReceivedAt: resp.receivedAt,
		clock:      c.clock,
	}
	if g.Granted {
		g.Delay = time.Duration(a.WaitNanos)
		g.ExpiresIn = time.Duration(a.ExpiresInNanos)
		g.Spacing = time.Duration(a.SpacingNanos)
	} else {
		g.RetryAfter, g.Refusal, g.KeysFull = time.Duration(a.RetryAfterNanos), a.Error, a.KeysFull
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
		return g, &RefusedError{Limit: limit, RetryAfter: g.RetryAfter, Message: g.Refusal, KeysFull: g.KeysFull}
	}
	return g, nil
}

// Acquire blocks until n permits of limit may be used together, or ctx is
// done. It reserves with max_wait = the time left until ctx's deadline (or
// the default max wait without one), then sleeps the granted wait. When
// refused it sleeps until the server's retry_after (when the same request
// could be granted; an earlier one would be refused again), plus a small
// jitter, and reserves again (a new request); when the retry_after ends
// after ctx's deadline it fails at once (context.DeadlineExceeded, with
// the *RefusedError). Errors other than refusals (unknown limit, invalid
// request, no server available after the bounded failover) end it.
//
// A strict limit never lets two permits be used closer than its interval,
// so n > 1 permits of a strict limit cannot be used together: Acquire then
// fails with ErrSpacedGrant (the permits it reserved are forfeited, never
// used). Use AcquireEach to use them one by one.
func (c *Client) Acquire(ctx context.Context, limit string, n int64) error {
	g, err := c.acquireGrant(ctx, limit, n)
	if err != nil {
		return err
	}
	return g.Wait(ctx)
}

// acquireGrant reserves n permits of limit, retrying refusals as Acquire
// does, and returns the grant without waiting for it.
func (c *Client) acquireGrant(ctx context.Context, limit string, n int64) (Grant, error) {
	for k := 0; ; k++ {
		maxWait := c.defaultMaxWait
		if dl, ok := ctx.Deadline(); ok {
			maxWait = dl.Sub(c.clock.Now())
			if maxWait <= 0 {
				return Grant{}, fmt.Errorf("client: acquire %d permits of %q: %w", n, limit, context.DeadlineExceeded)
			}
		}
		g, err := c.Reserve(ctx, limit, n, maxWait)
		if err != nil {
			return Grant{}, err
		}
		if g.Granted {
			return g, nil
		}
		d, ok := c.refusalWait(ctx, k, g)
		if !ok {
			return Grant{}, fmt.Errorf("client: acquire %d permits of %q: %w: the same request could be granted only after the context's deadline (%w)",
				n, limit, &RefusedError{Limit: limit, RetryAfter: g.RetryAfter, Message: g.Refusal, KeysFull: g.KeysFull}, context.DeadlineExceeded)
		}
		c.log.Trace("reserve refused, waiting for its retry_after", "limit", limit, "retry_after", g.RetryAfter, "sleep", d)
		if err := c.clock.Sleep(ctx, d); err != nil {
			return Grant{}, fmt.Errorf("client: acquire %d permits of %q: %w", n, limit, err)
		}
	}
}

// refusalWait is how long Acquire sleeps after the refusal g before it
// reserves again: until g's RetryAfter (counted from its receipt), when
// the same request could be granted (a reserve before then is refused
// again: on a strict limit without max_reserved, one that polled got five
// refusals per grant), plus a jitter of at most min(backoff base,
// RetryAfter/4) that spreads callers refused together, never waking one
// early. Without a RetryAfter it is the full-jitter backoff of attempt k.
// ok is false when the RetryAfter ends at or after ctx's deadline: no
// reserve could be granted in time.
func (c *Client) refusalWait(ctx context.Context, k int, g Grant) (d time.Duration, ok bool) {
	if g.RetryAfter <= 0 {
		return c.backoff(k, -1), true
	}
	at := g.ReceivedAt.Add(g.RetryAfter)
	dl, bounded := ctx.Deadline()
	if bounded && !at.Before(dl) {
		return 0, false
	}
	wake := at.Add(c.jitter(min(c.backoffBase, g.RetryAfter/4)))
	if bounded && !wake.Before(dl) {
		wake = at
	}
	return max(wake.Sub(c.clock.Now()), 0), true
}

// maxExpiredRounds bounds how often AcquireEach reserves again after
// permits expired before use.
const maxExpiredRounds = 4

// AcquireEach acquires n permits of limit and calls use once per permit,
// with j = 0, 1, ..., n-1, each at the moment that permit may be used:
// together for the algorithms that grant n permits together, one interval
// apart for a strict limit. If a permit expires before its turn (the
// caller's use of the previous one took too long), the rest are reserved
// again, at most maxExpiredRounds times; then it fails with ErrExpired. It
// stops at the first error of use and returns it; a permit is never used
// twice, nor after its expiry.
func (c *Client) AcquireEach(ctx context.Context, limit string, n int64, use func(ctx context.Context, j int64) error) error {
	done := int64(0)
	for round := 0; done < n; round++ {
		g, err := c.acquireGrant(ctx, limit, n-done)
		if err != nil {
			return err
		}
		for j := int64(0); j < g.Permits; j++ {
			err := g.WaitPermit(ctx, j)
			if errors.Is(err, ErrExpired) && round+1 < maxExpiredRounds {
				break // reserve the rest again
			}
			if err != nil {
				return err
			}
			if err := use(ctx, done); err != nil {
				return err
			}
			done++
		}
	}
	return nil
}
