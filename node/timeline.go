package node

import (
	"sync"
	"time"
)

// timeline is the leader's view of cluster time (ARCHITECTURE.md, invariant
// 2). When a node becomes leader it first applies its whole log (a raft
// Barrier), then continues from the last applied timestamp, counting forward
// with its own monotonic clock:
//
//	stamp = base + (clock.NowNanos() − start)
//
// where base is the FSM's last applied cluster time and start the clock
// reading at takeover. The elapsed time is also capped by the process's own
// monotonic clock (real): an injected clock that jumps or runs fast (the
// test clock of --clock-offset/--clock-rate and jepsen-lite's clock nemesis)
// can only make the timeline slower, never faster. In production both are
// the same clock and the cap changes nothing. Time that passed during the election is lost, which
// can only make later grants later, never earlier; the wall clock plays no
// part, so a node whose wall clock is hours off stamps correctly. Stamps are
// non-decreasing, and the FSM clamps again (max(last, stamp)).
type timeline struct {
	clock Clock
	real  Clock

	mu        sync.Mutex
	active    bool
	term      uint64
	base      int64
	start     int64
	realStart int64
	last      int64
}

// begin makes the timeline active for term, continuing from baseNanos.
func (t *timeline) begin(term uint64, baseNanos int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active = true
	t.term = term
	t.base = baseNanos
	t.start = t.clock.NowNanos()
	t.realStart = t.real.NowNanos()
	t.last = baseNanos
}

// end deactivates the timeline: this node is no longer leader.
func (t *timeline) end() {
	t.mu.Lock()
	t.active = false
	t.mu.Unlock()
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
	elapsed := min(t.clock.NowNanos()-t.start, t.real.NowNanos()-t.realStart)
	now := t.base + max(elapsed, 0)
	if now < t.last {
		now = t.last
	}
	t.last = now
	return now, t.term, time.Now(), true
}

// activeTerm returns the term the active timeline began in.
func (t *timeline) activeTerm() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.term
}

// isActive reports whether the timeline is stamping.
func (t *timeline) isActive() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active
}
