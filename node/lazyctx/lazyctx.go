package lazyctx

import (
	"context"
	"sync/atomic"
	"time"
)

// Context is a context.Context that ends at its deadline, with its parent,
// or at Release, like context.WithDeadline's, but makes its channel and
// timer only when Done is first called (or once it has ended and Value is
// asked). Before, Err reads the parent and the clock: the parent's error,
// else context.DeadlineExceeded from the deadline on, as WithDeadline's
// would report once its timer fired. Its zero value is not usable: see New
// and Init. Safe for concurrent use.
type Context struct {
	parent   context.Context
	deadline time.Time

	released atomic.Bool
	made     atomic.Pointer[made] // nil until made
}

// made is a Context made real: a context.WithDeadline of its parent.
type made struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Context of parent ending at the earlier of deadline and
// parent's own. Call Release when done with it, as context.WithDeadline's
// cancel.
func New(parent context.Context, deadline time.Time) *Context {
	c := &Context{}
	c.Init(parent, deadline)
	return c
}

// Init sets up c, a Context inside a larger value (which may answer Value
// for keys of its own first), as New does. Call it once, before any other
// method.
func (c *Context) Init(parent context.Context, deadline time.Time) {
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.parent, c.deadline = parent, deadline
}

// make makes the context a real context.WithDeadline of the parent from
// now on (ended at once if released), and returns it. Two first calls at
// once both make one; the one that loses the swap cancels its own.
func (c *Context) make() context.Context {
	if m := c.made.Load(); m != nil {
		return m.ctx
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if c.released.Load() {
		// Released before anything was made: Err has said Canceled, and
		// must keep saying it (a WithDeadline made now could say
		// DeadlineExceeded, or the parent's error).
		ctx, cancel = context.WithCancel(context.WithoutCancel(c.parent))
		cancel()
	} else {
		ctx, cancel = context.WithDeadline(c.parent, c.deadline)
	}
	if !c.made.CompareAndSwap(nil, &made{ctx: ctx, cancel: cancel}) {
		cancel()
		return c.made.Load().ctx
	}
	// Release sets released, then loads made: one of the two sees the
	// other's store.
	if c.released.Load() {
		cancel()
	}
	return ctx
}

// Release ends the context (Err reports context.Canceled from then on,
// unless Err or Done had already seen it end) and stops its timer, if
// Done made one. It may be called
// more than once, from any goroutine.
func (c *Context) Release() {
	c.released.Store(true)
	if m := c.made.Load(); m != nil {
		m.cancel()
	}
}

// Deadline implements context.Context.
func (c *Context) Deadline() (time.Time, bool) { return c.deadline, true }

// Done implements context.Context; the first call makes the timer.
func (c *Context) Done() <-chan struct{} { return c.make().Done() }

// Err implements context.Context.
func (c *Context) Err() error {
	if c.made.Load() == nil {
		if c.released.Load() {
			return context.Canceled
		}
		if err := c.parent.Err(); err != nil {
			return err
		}
		if time.Now().Before(c.deadline) {
			return nil
		}
	}
	return c.make().Err()
}

// Value implements context.Context. Once the context is made (Done was
// called), or has ended (released, or past its deadline), the made context
// answers, so that the context package finds the cancelCtx whose channel
// Done returns (a context derived from this one then needs no goroutine to
// follow it) and context.Cause gives this context's cause; before, the
// parent answers.
func (c *Context) Value(key any) any {
	if c.made.Load() == nil && !c.released.Load() && time.Now().Before(c.deadline) {
		return c.parent.Value(key)
	}
	return c.make().Value(key)
}
