package node

import (
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/transport/api"
)

// status.go: what a node reports of itself and of the cluster, in the
// API's vocabulary (api.Status, served by GET /v1/status and GET
// /v1/cluster), without blocking: metrics scrapes read it.

// Status returns the node's current view of itself and the cluster.
func (n *Node) Status() api.Status {
	st := api.Status{
		ID:           n.cfg.ID,
		Term:         n.raft.CurrentTerm(),
		AppliedIndex: n.raft.AppliedIndex(),
		CommitIndex:  n.raft.CommitIndex(),
		LastLogIndex: n.raft.LastIndex(),
		ClusterNanos: n.fsm.LastNowNanos(),
	}
	st.PendingReserves, st.ShedReserves = n.Load()
	st.ExpiredGrants, st.ExpiredGrantsUnreported = n.expired.expired.Load(), n.expired.unreported.Load()
	st.WaitingReserves = n.fsm.Waiting()
	st.SnapshotFailures, st.RestoreFailures = n.snapFails.take.Load(), n.snapFails.restore.Load()
	st.ReserveBatches, st.BatchedReserves, st.ReserveBatchNanos = n.commits.read()
	st.ReserveStages = n.stages.read()
	if first, err := n.store.FirstIndex(); err == nil {
		st.FirstLogIndex = first
	}
	if v, err := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64); err == nil {
		st.LastSnapshotIndex = v
	}
	switch n.raft.State() {
	case raft.Leader:
		st.State = "leader"
	case raft.Follower:
		st.State = "follower"
	case raft.Candidate:
		st.State = "candidate"
	default:
		st.State = "shutdown"
	}
	_, lid := n.raft.LeaderWithID()
	st.LeaderID = string(lid)
	if lc := n.raft.LastContact(); !lc.IsZero() {
		st.LastContactNs = int64(time.Since(lc))
	}
	st.Servers = []api.Server{} // [] rather than null when the configuration is empty or unreadable, as /v1/cluster
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		now := time.Now()
		for _, s := range f.Configuration().Servers {
			sv := api.Server{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter, Leader: s.ID == lid,
				HTTPAddr: n.httpAddrs.get(s.ID)}
			if string(s.ID) == n.cfg.ID {
				sv.HTTPAddr = n.ownHTTPAddr()
			}
			if !sv.Voter && st.State == "leader" {
				sv.Promotion = n.promotion.view(s.ID, now)
			}
			st.Servers = append(st.Servers, sv)
		}
	}
	if st.State == "leader" {
		st.Ready = n.timeline.isActive()
	} else {
		st.Ready = st.LeaderID != "" && st.AppliedIndex >= st.CommitIndex
	}
	if n.members.isRemoved() {
		st.State, st.Ready = "removed", false
	}
	return st
}

// StateHash returns the local replica's applied index and the hash of its
// state at that index (for jepsen-lite's durability checker and tests). It
// encodes the whole state, so it is not part of Status, which metrics
// scrapes read.
func (n *Node) StateHash() (uint64, string) {
	for {
		idx := n.fsm.AppliedIndex()
		h := n.fsm.StateHash()
		if n.fsm.AppliedIndex() == idx {
			return idx, hex.EncodeToString(h[:])
		}
	}
}

// reserveCommits counts a leader's reserve entries (the reserve batcher's
// entries applied and answered): how many, the reserves they carried and
// their time from submission to applied. Status serves the totals; their
// differences between two readings tell a run's short batches (fewer
// reserves an entry: the batcher's doing) from its slow commits (more
// time an entry at the same size: the disk's and the machine's).
type reserveCommits struct {
	batches, reserves, nanos atomic.Uint64
}

// add counts one committed entry of size reserves that took took.
func (c *reserveCommits) add(size int, took time.Duration) {
	c.batches.Add(1)
	c.reserves.Add(uint64(size))
	c.nanos.Add(uint64(max(took, 0)))
}

// read returns the totals: entries, reserves and nanoseconds. The three
// are read one after the other, so a reading taken while an entry is
// being counted may hold part of it; between readings seconds apart
// that is noise.
func (c *reserveCommits) read() (batches, reserves, nanos uint64) {
	return c.batches.Load(), c.reserves.Load(), c.nanos.Load()
}
