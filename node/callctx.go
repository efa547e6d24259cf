package node

import (
	"context"
	"time"

	"github.com/permitd/permitd/node/lazyctx"
)

// callctx.go: the deadline of a call ServeCalls serves (Config.ApplyTimeout),
// without a timer unless something waits on it (node/lazyctx).
//
// context.WithTimeout arms a runtime timer for every call and stops it when
// the call returns: at 70 k binary reserves a second that was a tenth of a
// leader's CPU (the timer heap's locks, time.AfterFunc, the cancel), for a
// deadline that a reserve decided on the leader never consults (it waits
// for its entry's outcome whatever its context says, batcher.go).

// callContext is a lazy deadline (no parent) that carries, as its only
// value, the call's place in its connection's window (an admission whose
// leave receives from the window's semaphore). Its zero value is not
// usable: see newCallContext.
type callContext struct {
	lazyctx.Context
	window admission
}

// newCallContext returns the context of a call that ends at deadline and
// holds a place in window (a token it sent on it, given back by a
// receive: by the call's waiting, or by leaveWindow).
func newCallContext(deadline time.Time, window chan struct{}) *callContext {
	c := &callContext{}
	c.Init(context.Background(), deadline)
	c.window.sem = window
	return c
}

// leaveWindow gives the call's place in its connection's window back,
// unless its waiting already did.
func (c *callContext) leaveWindow() { c.window.leave() }

// stop ends the context (and releases its timer, if it armed one), to
// call when the call returns, as context.WithDeadline's cancel.
func (c *callContext) stop() { c.Release() }

// Value returns the call's window for admissionKey, else what the lazy
// deadline answers.
func (c *callContext) Value(key any) any {
	if _, ok := key.(admissionKey); ok {
		return &c.window
	}
	return c.Context.Value(key)
}
