package server

import (
	"context"
	"sync"
	"time"
)

// lazydeadline.go: a request's time limit that costs nothing unless
// something waits on it.

// lazyDeadline is a context that ends at its deadline or with its parent,
// like context.WithDeadline, but makes its channel and timer only when
// Done is first called. A reserve decided on the leader's fast path never
// waits on its context (the batcher's queue has room, and the answer is
// awaited past it anyway), so most requests never pay for the timer, the
// timer's heap entry, nor the parent's done channel and children map that
// context.WithDeadline registers itself in (about a twentieth of the
// leader's CPU at 30 000 HTTP reserves/s).
//
// Before Done is called, Err reads the clock: it reports
// context.DeadlineExceeded from the deadline on, as WithDeadline's would
// once its timer fired. After, it is the made context's.
type lazyDeadline struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	ctx      context.Context // made by Done, or nil
	cancel   context.CancelFunc
	released bool
}

// withLazyDeadline returns a lazyDeadline of parent ending at the earlier
// of deadline and parent's own, and its release, which the caller must
// call when done with it, as with context.WithDeadline's cancel: it ends
// the context (Err reports context.Canceled) and stops the timer, if one
// was made.
func withLazyDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c := &lazyDeadline{parent: parent, deadline: deadline}
	return c, c.release
}

// Deadline implements context.Context.
func (c *lazyDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

// Done implements context.Context; the first call makes the timer.
func (c *lazyDeadline) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.makeLocked().Done()
}

// makeLocked makes the context a real context.WithDeadline of the parent
// (ended if released), once; c.mu is held.
func (c *lazyDeadline) makeLocked() context.Context {
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithDeadline(c.parent, c.deadline)
		if c.released {
			c.cancel()
		}
	}
	return c.ctx
}

// Err implements context.Context.
func (c *lazyDeadline) Err() error {
	c.mu.Lock()
	ctx, released := c.ctx, c.released
	c.mu.Unlock()
	switch {
	case ctx != nil:
		return ctx.Err()
	case released:
		return context.Canceled
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value implements context.Context. Once the context is made (Done was
// called, or it has ended: released or past its deadline) the made
// context answers, so that the context package finds the cancelCtx whose
// channel Done returns (a context derived from this one then needs no
// goroutine to follow it) and context.Cause gives this context's cause;
// before, the parent answers.
func (c *lazyDeadline) Value(key any) any {
	c.mu.Lock()
	ctx := c.ctx
	if ctx == nil && (c.released || !time.Now().Before(c.deadline)) {
		ctx = c.makeLocked()
	}
	c.mu.Unlock()
	if ctx != nil {
		return ctx.Value(key)
	}
	return c.parent.Value(key)
}

// release ends the context and stops the made context's timer, if Done
// made one.
func (c *lazyDeadline) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	if c.cancel != nil {
		c.cancel()
	}
}
