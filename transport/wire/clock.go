package wire

import "time"

// clock.go: the monotonic clock both sides measure durations on: a node
// stamps the cluster's timeline from it, a worker its grants' local
// deadlines. Only differences between readings matter, and they are the
// int64 nanoseconds of nanos.go.

// Clock is a source of monotonic time: nanoseconds on an arbitrary
// origin, never going backwards. Its rate error is what the bounds that
// use it budget for (a node's cap on each step of the timeline, a worker's
// margin over its TTL).
type Clock interface {
	// NowNanos returns the current monotonic reading in nanoseconds.
	NowNanos() int64
}

// MonotonicClock reads the process's monotonic clock (time.Since never
// reads the wall clock, so wall-clock steps change nothing).
type MonotonicClock struct {
	origin time.Time
}

// NewMonotonicClock returns a Clock whose origin is the moment of the call.
func NewMonotonicClock() *MonotonicClock { return &MonotonicClock{origin: time.Now()} }

// NowNanos implements Clock.
func (c *MonotonicClock) NowNanos() int64 { return int64(time.Since(c.origin)) }

// NanosAt returns the reading NowNanos would have returned at t, an
// instant read from time.Now (its monotonic reading counts): a caller
// that needs both an instant and this clock's reading takes one reading.
func (c *MonotonicClock) NanosAt(t time.Time) int64 { return int64(t.Sub(c.origin)) }
