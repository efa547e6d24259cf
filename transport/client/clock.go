package client

import (
	"context"
	"time"
)

// Clock is the client's view of time: where it reads "now" to measure
// grants, and how it sleeps. Tests inject a fake; the default is the real
// monotonic clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep pauses for d, or until ctx is done, in which case it returns
	// ctx.Err(). A d <= 0 returns at once (with ctx.Err() if ctx is done).
	Sleep(ctx context.Context, d time.Duration) error
}

// realClock is the system clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
