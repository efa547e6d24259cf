package fakeapi

import (
	"errors"
	"fmt"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
)

// ErrInvalid is wrapped by every configuration and request error.
var ErrInvalid = errors.New("fakeapi: invalid")

// Mode is the kind of limit the fake API enforces.
type Mode string

// The modes.
const (
	// Spacing is "1 call every IntervalNanos".
	Spacing Mode = "spacing"
	// Window is "at most Bound.Max(WindowNanos) calls in any window of
	// length WindowNanos".
	Window Mode = "window"
	// Multi judges three dimensions at once (Config.Multi): strict
	// spacing of call starts, tokens per window, calls in progress.
	Multi Mode = "multi"
	// Keyed judges every key (CallRequest.Key) alone by KeyMode's rule
	// (Spacing or Window, with the same parameters for every key): the
	// limits of many templated keys, one fake API per key.
	Keyed Mode = "keyed"
)

// DefaultMaxCalls is the number of calls kept when Config.MaxCalls is 0.
const DefaultMaxCalls = 1 << 20

// Config configures a Server.
type Config struct {
	// Mode selects the limit the live monitor counts.
	Mode Mode
	// IntervalNanos is the spacing of Spacing mode (> 0).
	IntervalNanos int64
	// WindowNanos is the window length of Window mode (> 0).
	WindowNanos int64
	// Bound is the stated bound of Window mode.
	Bound bound.Bound
	// ToleranceNanos (>= 0) relaxes the live monitor by the delivery
	// jitter: spacing I - T, windows of length W - T.
	ToleranceNanos int64
	// Start is the origin of the time base; zero means when New is called.
	// A Start with a monotonic reading (from time.Now) keeps stamps
	// monotonic.
	Start time.Time
	// MaxCalls bounds the calls kept (0 = DefaultMaxCalls).
	MaxCalls int
	// Multi is the judge of Multi mode.
	Multi MultiSpec
	// KeyMode is Keyed mode's rule for each key: Spacing or Window.
	KeyMode Mode
}

// validate checks c and fills defaults.
func (c *Config) validate() error {
	mode := c.Mode
	if mode == Keyed {
		mode = c.KeyMode
		if mode != Spacing && mode != Window {
			return fmt.Errorf("%w: key mode %q; allowed: %q, %q", ErrInvalid, c.KeyMode, Spacing, Window)
		}
	}
	switch mode {
	case Spacing:
		if c.IntervalNanos <= 0 {
			return fmt.Errorf("%w: spacing interval %d ns; allowed: > 0", ErrInvalid, c.IntervalNanos)
		}
	case Window:
		if c.WindowNanos <= 0 {
			return fmt.Errorf("%w: window %d ns; allowed: > 0", ErrInvalid, c.WindowNanos)
		}
		if err := c.Bound.Validate(); err != nil {
			return fmt.Errorf("%w: window bound: %w", ErrInvalid, err)
		}
	case Multi:
		if err := c.Multi.validate(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: mode %q; allowed: %q, %q, %q, %q", ErrInvalid, c.Mode, Spacing, Window, Multi, Keyed)
	}
	if c.ToleranceNanos < 0 {
		return fmt.Errorf("%w: tolerance %d ns; allowed: >= 0", ErrInvalid, c.ToleranceNanos)
	}
	if c.MaxCalls < 0 {
		return fmt.Errorf("%w: max calls %d; allowed: >= 0 (0 = %d)", ErrInvalid, c.MaxCalls, DefaultMaxCalls)
	}
	if c.MaxCalls == 0 {
		c.MaxCalls = DefaultMaxCalls
	}
	if c.Start.IsZero() {
		c.Start = time.Now()
	}
	return nil
}
