package worker

import "time"

// Clock is the worker's source of time: monotonic nanoseconds on an
// arbitrary origin, never going backwards. Every deadline of the worker (a
// grant's local expiry, a stolen lot's deadline, pacing) is measured on it;
// only differences between readings matter. Its rate error must stay below
// Margin/TTL (see the over-grant bound). node.MonotonicClock and
// node.SkewedClock satisfy it.
type Clock interface {
	// NowNanos returns the current monotonic reading in nanoseconds.
	NowNanos() int64
}

// monoClock reads the process's monotonic clock (time.Since never reads the
// wall clock, so wall-clock steps change nothing).
type monoClock struct{ origin time.Time }

func newMonoClock() monoClock { return monoClock{origin: time.Now()} }

// NowNanos implements Clock.
func (c monoClock) NowNanos() int64 { return int64(time.Since(c.origin)) }
