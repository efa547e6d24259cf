package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callctx.go: the deadline of a call ServeCalls serves (Config.ApplyTimeout),
// without a timer unless something waits on it.
//
// context.WithTimeout arms a runtime timer for every call and stops it when
// the call returns: at 70 k binary reserves a second that was a tenth of a
// leader's CPU (the timer heap's locks, time.AfterFunc, the cancel), for a
// deadline that a reserve decided on the leader never consults (it waits
// for its entry's outcome whatever its context says, batcher.go). A
// callContext reports the same deadline, and Err reads the clock against
// it; only Done (anything that selects on the context, or derives a
// context from it) arms a real context.WithDeadline, from then on the
// context's whole behaviour, so a call that waits is bounded exactly as
// before.

// callContext is a context.Context that ends at deadline and carries, as
// its only value, the call's place in its connection's window (an
// admission whose leave receives from the window's semaphore). Its zero
// value is not usable: see newCallContext.
type callContext struct {
	deadline time.Time
	window   admission

	once   sync.Once
	armed  atomic.Bool     // inner is set (by arm or stop)
	inner  context.Context // a context.WithDeadline, or endedCallContext after stop
	cancel context.CancelFunc
}

// endedCallContext is the context a callContext stopped before anything
// waited on it becomes: ended (Canceled), as context.WithTimeout's would
// be after its cancel.
var endedCallContext = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// newCallContext returns the context of a call that ends at deadline and
// holds a place in window (a token it sent on it, given back by a
// receive: by the call's waiting, or by leaveWindow).
func newCallContext(deadline time.Time, window chan struct{}) *callContext {
	c := &callContext{deadline: deadline}
	c.window.sem = window
	return c
}

// leaveWindow gives the call's place in its connection's window back,
// unless its waiting already did.
func (c *callContext) leaveWindow() { c.window.leave() }

// arm makes the context a real context.WithDeadline from now on (once).
func (c *callContext) arm() context.Context {
	if !c.armed.Load() {
		c.once.Do(func() {
			c.inner, c.cancel = context.WithDeadline(context.Background(), c.deadline)
			c.armed.Store(true)
		})
	}
	return c.inner
}

// stop ends the context (and releases its timer, if it armed one), to
// call when the call returns, as context.WithDeadline's cancel.
func (c *callContext) stop() {
	c.once.Do(func() {
		c.inner = endedCallContext
		c.armed.Store(true)
	})
	if c.cancel != nil {
		c.cancel()
	}
}

// Deadline returns the call's deadline.
func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Done arms the context (a timer from now on) and returns its channel.
func (c *callContext) Done() <-chan struct{} { return c.arm().Done() }

// Err returns nil before the deadline, unless the context was armed and
// has ended (stopped); context.DeadlineExceeded from the deadline on.
func (c *callContext) Err() error {
	if !c.armed.Load() && time.Now().Before(c.deadline) {
		return nil
	}
	return c.arm().Err()
}

// Value returns the call's window for admissionKey, else what the armed
// context holds for key (a context of the context package asks it for its
// own bookkeeping, after Done); nil before.
func (c *callContext) Value(key any) any {
	if _, ok := key.(admissionKey); ok {
		return &c.window
	}
	if !c.armed.Load() {
		return nil
	}
	return c.inner.Value(key)
}
