package runner

import (
	"context"
	"sync"
	"time"
)

// LeaderChange is an observed change of leadership: from TimeNanos on,
// the node claiming leadership in the highest term was Leader (empty:
// none answered as leader).
type LeaderChange struct {
	TimeNanos int64  `json:"time_ns"`
	Leader    string `json:"leader"`
	Term      uint64 `json:"term"`
}

// leaderMonitor polls every running node's /v1/status and records changes
// of leadership, for the report's timeline.
type leaderMonitor struct {
	cl    *cluster
	ct    *control
	start time.Time

	mu      sync.Mutex
	changes []LeaderChange
}

// maxLeaderChanges bounds the changes kept.
const maxLeaderChanges = 10_000

// run polls every 250 ms until ctx ends.
func (m *leaderMonitor) run(ctx context.Context) {
	last := LeaderChange{Leader: "?"}
	for ctx.Err() == nil {
		sts := m.ct.statuses(ctx, m.cl.nodes, 300*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		id, term := leaderOf(sts)
		if id != last.Leader || term != last.Term {
			last = LeaderChange{TimeNanos: int64(time.Since(m.start)), Leader: id, Term: term}
			m.mu.Lock()
			if len(m.changes) < maxLeaderChanges {
				m.changes = append(m.changes, last)
			}
			m.mu.Unlock()
		}
		_ = sleepCtx(ctx, 250*time.Millisecond)
	}
}

func (m *leaderMonitor) snapshot() []LeaderChange {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]LeaderChange(nil), m.changes...)
}
