package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/transport/client"
)

// LeaderChange is an observed change of leadership: from TimeNanos on,
// the node claiming leadership in the highest term was Leader (empty:
// none answered as leader).
type LeaderChange struct {
	TimeNanos int64  `json:"time_ns"`
	Leader    string `json:"leader"`
	Term      uint64 `json:"term"`
}

// SnapshotInstall is a snapshot a node must have installed from its
// leader, as seen through GET /v1/status: at BehindNanos its last log
// index was below every other answering node's first log index minus one
// (it needed an entry no node still had in its log: the leader could
// only bring it up to date with InstallSnapshot), and at CaughtUpNanos its
// last snapshot covered that gap.
type SnapshotInstall struct {
	Node string `json:"node"`
	// BehindNanos is when it was first seen behind; NodeLastIndex its
	// last log index then, OthersFirstIndex the smallest first log index
	// among the other nodes then.
	BehindNanos      int64  `json:"behind_ns"`
	NodeLastIndex    uint64 `json:"node_last_index"`
	OthersFirstIndex uint64 `json:"others_first_index"`
	// CaughtUpNanos is when it was seen caught up, SnapshotIndex its last
	// snapshot index then.
	CaughtUpNanos int64  `json:"caught_up_ns"`
	SnapshotIndex uint64 `json:"snapshot_index"`
}

// Observer polls every running node's GET /v1/status and records the
// changes of leadership and the snapshots the nodes were seen to install
// from a leader (see SnapshotInstall): the report's timeline and its
// per-node count of remote snapshots. The count is a lower bound: a node
// that fell behind and caught up between two polls is not seen.
type Observer struct {
	cl    *Cluster
	ct    *Control
	start time.Time

	mu       sync.Mutex
	changes  []LeaderChange
	last     LeaderChange
	installs []SnapshotInstall
	behind   map[string]SnapshotInstall // nodes seen behind, not yet caught up
}

// maxObserved bounds the changes and installs kept.
const maxObserved = 10_000

// ObservePeriod is the Observer's polling period.
const ObservePeriod = 250 * time.Millisecond

// NewObserver returns an observer of cl's nodes; times are offsets from
// start (the history's time base).
func NewObserver(cl *Cluster, ct *Control, start time.Time) *Observer {
	return &Observer{cl: cl, ct: ct, start: start, last: LeaderChange{Leader: "?"}, behind: map[string]SnapshotInstall{}}
}

// Run polls every ObservePeriod until ctx ends.
func (o *Observer) Run(ctx context.Context) {
	for ctx.Err() == nil {
		sts := o.ct.Statuses(ctx, o.cl.Nodes, 300*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		o.Observe(int64(time.Since(o.start)), sts)
		_ = wait.Sleep(ctx, ObservePeriod)
	}
}

// Observe records one poll's answers (node ID → status) taken at nowNanos.
func (o *Observer) Observe(nowNanos int64, sts map[string]client.Status) {
	o.mu.Lock()
	defer o.mu.Unlock()
	id, term := LeaderOf(sts)
	if id != o.last.Leader || term != o.last.Term {
		o.last = LeaderChange{TimeNanos: nowNanos, Leader: id, Term: term}
		if len(o.changes) < maxObserved {
			o.changes = append(o.changes, o.last)
		}
	}
	for nid, st := range sts {
		if b, ok := o.behind[nid]; ok {
			if st.LastSnapshotIndex+1 >= b.OthersFirstIndex && st.LastLogIndex+1 >= b.OthersFirstIndex {
				b.CaughtUpNanos, b.SnapshotIndex = nowNanos, st.LastSnapshotIndex
				if len(o.installs) < maxObserved {
					o.installs = append(o.installs, b)
				}
				delete(o.behind, nid)
			}
			continue
		}
		var gap uint64 // the smallest first log index among the others
		for oid, ost := range sts {
			if oid != nid && ost.FirstLogIndex > 0 && (gap == 0 || ost.FirstLogIndex < gap) {
				gap = ost.FirstLogIndex
			}
		}
		if gap > 0 && st.LastLogIndex+1 < gap {
			o.behind[nid] = SnapshotInstall{Node: nid, BehindNanos: nowNanos, NodeLastIndex: st.LastLogIndex, OthersFirstIndex: gap}
		}
	}
}

// LeaderChanges returns the changes of leadership seen so far.
func (o *Observer) LeaderChanges() []LeaderChange {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]LeaderChange(nil), o.changes...)
}

// SnapshotInstalls returns the snapshot installs seen so far.
func (o *Observer) SnapshotInstalls() []SnapshotInstall {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]SnapshotInstall(nil), o.installs...)
}
