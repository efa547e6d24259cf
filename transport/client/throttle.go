package client

import (
	"context"
	"fmt"
	"time"
)

// Mode selects what a throttled function does when no permit is available
// at once.
type Mode uint8

const (
	// Block waits for a permit (optimistic reservation, Acquire) until the
	// context ends.
	Block Mode = iota
	// Fail returns an error matching ErrThrottled at once when no permit
	// can be used within the throttle's max wait (pessimistic,
	// TryAcquire).
	Fail
)

// String returns "block" or "fail".
func (m Mode) String() string {
	switch m {
	case Block:
		return "block"
	case Fail:
		return "fail"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ThrottleOption configures Throttle and Wrap.
type ThrottleOption func(*throttleConfig)

type throttleConfig struct {
	permits int64
	maxWait time.Duration
}

// ThrottlePermits sets the permits each call consumes (default 1).
func ThrottlePermits(n int64) ThrottleOption { return func(t *throttleConfig) { t.permits = n } }

// ThrottleMaxWait sets, in Fail mode, the longest wait for a permit that is
// still accepted (default 0: only a permit usable now). Block mode ignores
// it.
func ThrottleMaxWait(d time.Duration) ThrottleOption {
	return func(t *throttleConfig) { t.maxWait = d }
}

// Throttle returns the throttle decorator for limit:
// the returned function runs fn only after a permit of limit may be used.
// In Block mode it waits for one (Acquire); in Fail mode it returns an
// error matching ErrThrottled, without running fn, when none is usable
// within the max wait. fn's error is returned as is.
func (c *Client) Throttle(limit string, mode Mode, opts ...ThrottleOption) func(ctx context.Context, fn func(context.Context) error) error {
	cfg := throttleConfig{permits: 1}
	for _, o := range opts {
		o(&cfg)
	}
	return func(ctx context.Context, fn func(context.Context) error) error {
		if err := c.permit(ctx, limit, mode, cfg); err != nil {
			return err
		}
		return fn(ctx)
	}
}

// Wrap is Throttle for a function with a result: it returns fn throttled
// by limit in mode. When throttled it returns T's zero value and the error.
func Wrap[T any](c *Client, limit string, mode Mode, fn func(context.Context) (T, error), opts ...ThrottleOption) func(context.Context) (T, error) {
	cfg := throttleConfig{permits: 1}
	for _, o := range opts {
		o(&cfg)
	}
	return func(ctx context.Context) (T, error) {
		if err := c.permit(ctx, limit, mode, cfg); err != nil {
			var zero T
			return zero, err
		}
		return fn(ctx)
	}
}

// permit obtains cfg.permits permits of limit in mode and waits until they
// may be used.
func (c *Client) permit(ctx context.Context, limit string, mode Mode, cfg throttleConfig) error {
	switch mode {
	case Block:
		return c.Acquire(ctx, limit, cfg.permits)
	case Fail:
		g, err := c.TryAcquire(ctx, limit, cfg.permits, cfg.maxWait)
		if err != nil {
			return err
		}
		return g.Wait(ctx)
	}
	return fmt.Errorf("%w: throttle mode %v; allowed: Block, Fail", ErrInvalid, mode)
}
