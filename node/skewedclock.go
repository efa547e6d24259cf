package node

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// skewedclock.go: a skewed clock, for the tests and jepsen-lite's clock faults:
// the node's monotonic clock itself is wire.Clock.

// SkewedClock is a test clock: it reads a base wire.Clock and reports
// offset + rate × elapsed, where elapsed counts from the clock's creation.
// It models a node whose clock is off by a constant (OffsetNanos) and runs
// fast or slow (Rate ≠ 1). The offset and rate may be changed at run time
// (jepsen-lite does so through the agent's control endpoint); a change never
// makes the reading go backwards. Every offset given to it, at creation or
// as a change, is within ±MaxClockOffset (ValidateClockSkew), and its
// arithmetic saturates: no setting makes the reading wrap around.
type SkewedClock struct {
	base wire.Clock

	mu        sync.Mutex
	rate      float64 // reading speed relative to base
	anchorRaw int64   // base reading when the rate last changed
	anchorOut int64   // output reading at anchorRaw
	last      int64   // largest reading returned
}

// MaxClockOffset bounds the offset of a SkewedClock, and each change of
// it: a day either way, far beyond the hour of skew the tests and
// jepsen-lite's clock nemesis apply, and far from the end of the int64
// timeline.
const MaxClockOffset = 24 * time.Hour

// ValidateClockSkew checks an offset (or a change of offset) and a rate
// for a SkewedClock: |offset| <= MaxClockOffset, rate finite and > 0. The
// agent's --clock-offset and --clock-rate and its POST /v1/debug/clock hook
// accept exactly these.
func ValidateClockSkew(offset time.Duration, rate float64) error {
	if offset < -MaxClockOffset || offset > MaxClockOffset {
		return fmt.Errorf("node: clock offset %v: allowed: from %v to %v", offset, -MaxClockOffset, MaxClockOffset)
	}
	return validateRate(rate)
}

// NewSkewedClock returns a SkewedClock over base with the given offset and
// rate (see ValidateClockSkew).
func NewSkewedClock(base wire.Clock, offset time.Duration, rate float64) (*SkewedClock, error) {
	if err := ValidateClockSkew(offset, rate); err != nil {
		return nil, err
	}
	raw := base.NowNanos()
	c := &SkewedClock{base: base, rate: rate, anchorRaw: raw, anchorOut: wire.AddNanos(raw, int64(offset))}
	c.last = c.anchorOut
	return c, nil
}

func validateRate(rate float64) error {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0 {
		return fmt.Errorf("node: clock rate %v: must be finite and > 0", rate)
	}
	return nil
}

// NowNanos implements wire.Clock.
func (c *SkewedClock) NowNanos() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readLocked()
}

func (c *SkewedClock) readLocked() int64 {
	elapsed := c.base.NowNanos() - c.anchorRaw
	out := wire.AddNanos(c.anchorOut, wire.FloatNanos(float64(elapsed)*c.rate))
	if out < c.last {
		out = c.last
	}
	c.last = out
	return out
}

// Set changes the clock's skew: the reading jumps by offsetDelta (negative
// jumps are absorbed: the clock stalls until it catches up) and runs at rate
// from now on. Both are checked as ValidateClockSkew does.
func (c *SkewedClock) Set(offsetDelta time.Duration, rate float64) error {
	if err := ValidateClockSkew(offsetDelta, rate); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.readLocked()
	c.anchorRaw = c.base.NowNanos()
	c.anchorOut = wire.AddNanos(now, int64(offsetDelta))
	c.rate = rate
	return nil
}
