package limiter

import (
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// clock is the only place in the bucket packages that reads time, and only the
// in-process Limiter uses it; Pacers never do (time is their argument).
//
// Its timeline is int64 nanoseconds since the clock's base, so a new Limiter
// starts at about 0, like Guava's stopwatch started at creation.
type clock interface {
	// nowNanos returns the current time on the clock's timeline. It never
	// goes backwards.
	nowNanos() int64
	// nanosAt converts an absolute time (a context deadline) to the
	// clock's timeline.
	nanosAt(t time.Time) int64
	// sleep blocks for d, or until done is closed, whichever comes first.
	// It reports whether the full duration elapsed. done may be nil
	// (never closed). d <= 0 returns true at once.
	sleep(done <-chan struct{}, d time.Duration) bool
}

// monoClock reads the monotonic clock of the process: time.Since of a base
// taken with time.Now, which reads only the monotonic clock (no wall clock)
// and is therefore immune to wall-clock steps. Inside a testing/synctest
// bubble it reads the bubble's virtual clock, so tests need no fake.
type monoClock struct {
	base time.Time
}

// newMonoClock returns a monoClock whose timeline starts now.
func newMonoClock() monoClock { return monoClock{base: time.Now()} }

func (c monoClock) nowNanos() int64 { return int64(time.Since(c.base)) }

func (c monoClock) nanosAt(t time.Time) int64 { return int64(t.Sub(c.base)) }

func (c monoClock) sleep(done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	if done == nil {
		time.Sleep(d)
		return true
	}
	end := wire.AddNanos(c.nowNanos(), int64(d))
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-done:
		// done may win the race against a timer due at the same instant
		// (a wait that ends exactly at the context deadline): a wait
		// interrupted at or after its end was complete.
		return c.nowNanos() >= end
	}
}
