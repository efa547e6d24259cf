package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// timeline is the leader's view of cluster time (the first invariant of
// doc.go: a permit is never granted early, across leader changes
// included). When a node becomes leader it first applies its whole log (a raft
// Barrier), then continues from the last applied timestamp, counting forward
// with its own monotonic clock:
//
//	stamp = base + (clock.NowNanos() − start)
//
// where base is the FSM's last applied cluster time plus the time since
// this node took that state in (receipt.go) and start the clock reading at
// takeover. Every step is also capped by the process's own monotonic clock
// (real): between two stamps the timeline advances no more than real time
// did, so an injected clock that jumps or runs fast (the test clock of
// --clock-offset/--clock-rate and jepsen-lite's clock nemesis) can only
// make the timeline slower, never faster. The cap is per step, not on the
// total since takeover: a clock that stalls (a backward jump) and later
// jumps forward again would otherwise let the timeline catch up the stall
// at once, and a grant decided during the stall (its wait counted from a
// timeline that lagged) would be used after slots the catch-up hands out
// as fresh, closer than the interval. Time lost to a slow clock stays
// lost, which only makes later grants later. In production both are the
// same clock and the cap changes nothing (all it can lose is the longest
// gap between the two readings of one stamp). Time that passed between the
// old leader's last stamp and this node's receipt of it is lost, which can
// only make later grants later, never earlier; the wall clock plays no
// part, so a node whose wall clock is hours off stamps correctly. Stamps are
// non-decreasing, and the FSM clamps again (max(last, stamp)).
//
// The timeline is also the one place where "this node leads and may
// stamp" lives: ready is closed while it is active and replaced when it
// ends, so a request waiting for a leader to take over (waitActive) wakes
// at the instant stamping begins. How a node takes over is takeover.go.
type timeline struct {
	clock wire.Clock
	real  wire.Clock

	mu     sync.Mutex
	ready  chan struct{} // closed while active; a fresh one after end
	done   chan struct{} // closed when the active period ends
	active bool
	// periods counts the active periods begun; period is the current
	// one's number while active, 0 while not (written under mu, read
	// without it: every request asks isActive).
	periods  uint64
	period   atomic.Uint64
	term     uint64
	base     int64
	start    int64
	last     int64 // the last stamp
	lastReal int64 // real's reading when the timeline stood at last
}

// newTimeline returns an inactive timeline counting with clock, capped by
// real.
func newTimeline(clock, real wire.Clock) *timeline {
	return &timeline{clock: clock, real: real, ready: make(chan struct{})}
}

// begin makes the timeline active for term, continuing from baseNanos
// now.
func (t *timeline) begin(term uint64, baseNanos int64) {
	t.beginAt(term, baseNanos, t.clock.NowNanos(), t.real.NowNanos())
}

// beginAt makes the timeline active for term, continuing from baseNanos
// as of the readings clockNanos and realNanos of its clocks (earlier
// readings than now: the receipt of the state baseNanos comes from,
// receipt.go), so the time since counts.
func (t *timeline) beginAt(term uint64, baseNanos, clockNanos, realNanos int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active {
		close(t.ready)
		t.done = make(chan struct{})
	}
	t.periods++ // a new period, even if one was active: its term may differ
	t.period.Store(t.periods)
	t.active = true
	t.term = term
	t.base = baseNanos
	t.start = clockNanos
	t.last = baseNanos
	t.lastReal = realNanos
}

// end deactivates the timeline: this node is no longer leader.
func (t *timeline) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active {
		t.ready = make(chan struct{})
		close(t.done)
	}
	t.active = false
	t.period.Store(0)
}

// activeDone returns a channel closed when the timeline's current active
// period ends (this node stops leading), or false if it is not active.
func (t *timeline) activeDone() (<-chan struct{}, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done, t.active
}

// readyCh returns a channel closed while the timeline is active (now or
// once it begins).
func (t *timeline) readyCh() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready
}

// stamp returns the current cluster time, the term the timeline began in
// and the real (monotonic) instant of the reading, or false if this node
// is not an active leader. The instant is what an answer's durations are
// counted from when they are sent (see answer.go): it is never earlier
// than the real time at which the timeline reached the stamp.
func (t *timeline) stamp() (int64, uint64, time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active {
		return 0, 0, time.Time{}, false
	}
	var realNanos, clockNanos int64
	var at time.Time
	rm, realMono := t.real.(*wire.MonotonicClock)
	cm, clockMono := t.clock.(*wire.MonotonicClock)
	if realMono && clockMono {
		// Both are the process's clock: one reading serves the three
		// (three cost a busy leader a few percent of its CPU, under the
		// lock every reserve takes).
		at = time.Now()
		realNanos, clockNanos = rm.NanosAt(at), cm.NanosAt(at)
	} else {
		realNanos, clockNanos = t.real.NowNanos(), t.clock.NowNanos()
		at = time.Now() // after the readings: never earlier than them
	}
	now := t.base + max(clockNanos-t.start, 0)
	now = min(now, t.last+max(realNanos-t.lastReal, 0)) // no faster than real time since the last stamp
	now = max(now, t.last)
	t.last, t.lastReal = now, realNanos
	return now, t.term, at, true
}

// activeTerm returns the term the active timeline began in.
func (t *timeline) activeTerm() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.term
}

// isActive reports whether the timeline is stamping.
func (t *timeline) isActive() bool {
	return t.period.Load() != 0
}

// activePeriod identifies the timeline's current active period (its
// number since the node started), or is 0 if it is not active: a check
// made in one period holds for none other.
func (t *timeline) activePeriod() uint64 {
	return t.period.Load()
}
