package node

import (
	"encoding/hex"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Server is one member of the raft configuration. A server that is not a
// Voter joined and awaits promotion (promote.go); the leader's status
// says how far it has come in Promotion (nil elsewhere, and for voters).
type Server struct {
	ID        string     `json:"id"`
	RaftAddr  string     `json:"raft_addr"`
	Voter     bool       `json:"voter"`
	Leader    bool       `json:"leader"`
	Promotion *Promotion `json:"promotion,omitempty"`
}

// Status is a point-in-time view of a node, served by GET /v1/status.
type Status struct {
	ID           string `json:"id"`
	State        string `json:"state"` // leader, follower, candidate, removed, shutdown
	LeaderID     string `json:"leader_id"`
	Term         uint64 `json:"term"`
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
	LastLogIndex uint64 `json:"last_log_index"`
	// FirstLogIndex is the oldest entry still in this node's log (0 when
	// empty); LastSnapshotIndex the index its last snapshot covers. A
	// leader whose FirstLogIndex is above a follower's LastLogIndex can
	// only bring that follower up to date by sending it a snapshot.
	FirstLogIndex     uint64   `json:"first_log_index"`
	LastSnapshotIndex uint64   `json:"last_snapshot_index"`
	ClusterNanos      int64    `json:"cluster_now_ns"`
	StateHash         string   `json:"state_hash,omitempty"` // filled only by debug endpoints
	Servers           []Server `json:"servers"`
	Ready             bool     `json:"ready"`
	LastContactNs     int64    `json:"last_contact_ns"`
	// PendingReserves is how many reserves the node holds now (at most
	// Config.MaxPendingReserves); ShedReserves how many it refused as
	// overloaded since it started.
	PendingReserves int64  `json:"pending_reserves"`
	ShedReserves    uint64 `json:"shed_reserves"`
	// ExpiredGrants is how many grants this node answered as refusals
	// since it started, because their (first) permit expired while it
	// held the answer (replays included); ExpiredGrantsUnreported how
	// many of the fresh ones it could not report to the register, whose
	// counters then still count them as granted (expiredgrants.go).
	ExpiredGrants           uint64 `json:"expired_grants"`
	ExpiredGrantsUnreported uint64 `json:"expired_grants_unreported"`
	// WaitingReserves is how many reserves wait in in-flight caps' queues,
	// in this node's applied state (fsm/waiters.go).
	WaitingReserves int `json:"waiting_reserves"`
	// ReserveBatches is how many reserve entries this node submitted
	// while it led and saw applied and answered, since it started (an
	// entry whose leadership was lost before its apply is not counted,
	// whether or not it committed); BatchedReserves the reserves they
	// carried, and ReserveBatchNanos their time from submission to
	// applied, summed. Read twice, their differences give the mean batch
	// and the mean commit time in between (bench --mode overload reports
	// them for each phase): short batches are the node's doing, slow
	// commits of full ones its disk's and machine's.
	ReserveBatches    uint64 `json:"reserve_batches"`
	BatchedReserves   uint64 `json:"batched_reserves"`
	ReserveBatchNanos uint64 `json:"reserve_batch_ns"`
}

// Status returns the node's current view of itself and the cluster.
func (n *Node) Status() Status {
	st := Status{
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
	st.ReserveBatches, st.BatchedReserves, st.ReserveBatchNanos = n.commits.read()
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
	st.Servers = []Server{} // [] rather than null when the configuration is empty or unreadable, as /v1/cluster
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		now := time.Now()
		for _, s := range f.Configuration().Servers {
			sv := Server{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter, Leader: s.ID == lid}
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
