package client

import (
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults of the options.
const (
	// DefaultBackoffBase is the first backoff ceiling.
	DefaultBackoffBase = 25 * time.Millisecond
	// DefaultBackoffMax is the largest backoff ceiling.
	DefaultBackoffMax = 2 * time.Second
	// DefaultMaxWait is the max_wait of Acquire when its context has no
	// deadline.
	DefaultMaxWait = 10 * time.Second
	// DefaultAttemptTimeout bounds one HTTP attempt against one server.
	DefaultAttemptTimeout = 5 * time.Second
	// DefaultRounds is how many times a request goes round all servers.
	DefaultRounds = 3
)

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: a dedicated one with a
// pooled transport).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithLogger sets the logger (default: none).
func WithLogger(l hclog.Logger) Option { return func(c *Client) { c.log = l } }

// WithBackoff sets the backoff of retries: the k-th backoff is a uniform
// random duration in [0, min(max, base·2^k)] (full jitter), and after a 429
// never longer than the server's retry_after.
func WithBackoff(base, max time.Duration) Option {
	return func(c *Client) { c.backoffBase, c.backoffMax = base, max }
}

// WithRand sets the random source of the jitter. It is used under the
// client's lock.
func WithRand(r *rand.Rand) Option { return func(c *Client) { c.rng = r } }

// WithSeed seeds the jitter's random source, for reproducible runs.
func WithSeed(seed uint64) Option {
	return func(c *Client) { c.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
}

// WithClock sets the clock used to measure grants and to sleep (default:
// the system clock).
func WithClock(clk Clock) Option { return func(c *Client) { c.clock = clk } }

// WithDefaultMaxWait sets Acquire's max_wait when its context has no
// deadline (default DefaultMaxWait).
func WithDefaultMaxWait(d time.Duration) Option { return func(c *Client) { c.defaultMaxWait = d } }

// WithAttemptTimeout bounds one HTTP attempt against one server (default
// DefaultAttemptTimeout); a timed-out attempt moves to the next server.
func WithAttemptTimeout(d time.Duration) Option { return func(c *Client) { c.attemptTimeout = d } }

// WithReturnToFirst makes a client whose calls moved away from its first
// server (it could not be reached, or did not answer) start at the first
// again once after has passed since they did; without it a client keeps
// to the last server that answered. For a lease relay in front of the
// register (permitd worker --relay): the worker renews at the register's
// nodes while its relay is down, and through the relay again once it is
// back. A non-positive after is the default: no return.
func WithReturnToFirst(after time.Duration) Option { return func(c *Client) { c.homeAfter = after } }

// WithRounds sets how many times one request may go round all servers
// before failing with ErrUnavailable (default DefaultRounds).
func WithRounds(n int) Option { return func(c *Client) { c.rounds = n } }

// WithoutSessions makes reserves carry a random request ID each instead of
// a number in the client's session. The register remembers a request ID
// for ten minutes, but admits only about 1 750 new IDs per second over
// that window (beyond that it answers 503 rather than forget one), while
// a session has no such limit; a client that reserves rarely and wants no
// session round trip may prefer IDs.
func WithoutSessions() Option { return func(c *Client) { c.noSessions = true } }
