package api

// status.go: a node's view of itself and of the cluster (GET /v1/status,
// GET /v1/cluster). Package node fills them; the Go client reads them.

// Status is a point-in-time view of a node, served by GET /v1/status.
type Status struct {
	ID string `json:"id"`
	// State is leader, follower, candidate, removed or shutdown.
	State        string `json:"state"`
	LeaderID     string `json:"leader_id"`
	Term         uint64 `json:"term"`
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
	LastLogIndex uint64 `json:"last_log_index"`
	// FirstLogIndex is the oldest entry still in this node's log (0 when
	// empty); LastSnapshotIndex the index its last snapshot covers. A
	// leader whose FirstLogIndex is above a follower's LastLogIndex can
	// only bring that follower up to date by sending it a snapshot.
	FirstLogIndex     uint64 `json:"first_log_index"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
	// ClusterNanos is the cluster time of the last applied command, the
	// timeline of the _cluster_ns fields (a lease pool's).
	ClusterNanos int64 `json:"cluster_now_ns"`
	// StateHash is filled only by debug endpoints.
	StateHash     string   `json:"state_hash,omitempty"`
	Servers       []Server `json:"servers"`
	Ready         bool     `json:"ready"`
	LastContactNs int64    `json:"last_contact_ns"`
	// PendingReserves is how many reserves the node holds now (at most
	// its --max-pending-reserves); ShedReserves how many it refused as
	// overloaded since it started.
	PendingReserves int64  `json:"pending_reserves"`
	ShedReserves    uint64 `json:"shed_reserves"`
	// ExpiredGrants is how many grants this node answered as refusals
	// since it started, because their (first) permit expired while it
	// held the answer (replays included); ExpiredGrantsUnreported how
	// many of the fresh ones it could not report to the register, whose
	// counters then still count them as granted.
	ExpiredGrants           uint64 `json:"expired_grants"`
	ExpiredGrantsUnreported uint64 `json:"expired_grants_unreported"`
	// WaitingReserves is how many reserves wait in in-flight caps'
	// queues, in this node's applied state (0 from a server older than
	// the field).
	WaitingReserves int `json:"waiting_reserves"`
	// ReserveBatches is how many reserve entries this node submitted
	// while it led and saw applied and answered, since it started (an
	// entry whose leadership was lost before its apply is not counted,
	// whether or not it committed); BatchedReserves the reserves they
	// carried, and ReserveBatchNanos their time from submission to
	// applied, summed. Read twice, their differences give the mean batch
	// and the mean commit time in between (bench --mode overload reports
	// them for each phase): short batches are the node's doing, slow
	// commits of full ones its disk's and machine's. A server older than
	// these fields leaves them 0.
	ReserveBatches    uint64 `json:"reserve_batches"`
	BatchedReserves   uint64 `json:"batched_reserves"`
	ReserveBatchNanos uint64 `json:"reserve_batch_ns"`
	// ReserveStages breaks those entries' reserves down by where their
	// time went on this node (see ReserveStages).
	ReserveStages ReserveStages `json:"reserve_stages"`
	// SnapshotFailures is how many raft snapshots this node failed to
	// take or write (a full or failing disk) since it started;
	// RestoreFailures how many snapshots it failed to restore (one sent
	// by the leader, or one on its disk at start). A server older than
	// these fields leaves them 0.
	SnapshotFailures uint64 `json:"snapshot_failures"`
	RestoreFailures  uint64 `json:"restore_failures"`
}

// Server is one member of the raft configuration. A server that is not a
// Voter joined and awaits promotion: the leader makes it a voter once it
// has caught up, and the leader's answer says how far it has come
// (Promotion; nil from other nodes, for voters, and from older servers).
// HTTPAddr is the address of its HTTP API as it last told the answering
// node over the cluster's network (empty when unknown: it has not
// answered since the answering node started, or is older than the
// field).
type Server struct {
	ID        string     `json:"id"`
	RaftAddr  string     `json:"raft_addr"`
	HTTPAddr  string     `json:"http_addr,omitempty"`
	Voter     bool       `json:"voter"`
	Leader    bool       `json:"leader"`
	Promotion *Promotion `json:"promotion,omitempty"`
}

// Promotion states of a non-voter, as the leader last observed it.
const (
	// PromotionUnreachable: the last probe got no answer over the
	// cluster's network (no connection, or a TLS handshake either side
	// refused).
	PromotionUnreachable = "unreachable"
	// PromotionNotFollowing: it answered, but as another server, or
	// following another leader or term.
	PromotionNotFollowing = "not_following"
	// PromotionBehind: it follows this leader but has not applied the
	// log far enough.
	PromotionBehind = "behind"
	// PromotionCaughtUp: caught up at every probe for CaughtUpNs; it is
	// promoted when that reaches the leader's promotion time.
	PromotionCaughtUp = "caught_up"
)

// Promotion is the leader's view of a joined non-voter on its way to
// voting (in Server, on the leader only).
type Promotion struct {
	// State is one of the Promotion* states; Reason says why it is not
	// caught up (empty when it is).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// AppliedIndex is the applied index it last reported (0 if it never
	// answered) and LeaderCommitIndex the leader's commit index then.
	AppliedIndex      uint64 `json:"applied_index"`
	LeaderCommitIndex uint64 `json:"leader_commit_index"`
	// WatchedNs is how long the leader has observed it, CaughtUpNs how
	// long it has been caught up without a break (0 if it is not).
	WatchedNs  int64 `json:"watched_ns"`
	CaughtUpNs int64 `json:"caught_up_ns"`
}

// Cluster is the answer to GET /v1/cluster: the raft configuration as the
// answering node sees it.
type Cluster struct {
	// ID is the answering node's id.
	ID       string   `json:"id"`
	LeaderID string   `json:"leader_id"`
	Term     uint64   `json:"term"`
	Servers  []Server `json:"servers"`
}

// ReserveStages is where the reserves of the entries a node committed as
// leader spent their time on it, since it started: each field after
// Unmeasured is a stage's nanoseconds summed over Reserves reserves (an
// entry's stage counts once per reserve it carried), so a stage's
// difference between two readings divided by Reserves' is its mean per
// reserve over that interval. The stages follow each other; what a
// client measures beyond their sum is its own work, the network's round
// trip, the edge's (HTTP or binary) decoding and encoding, the node's
// validation and admission before the stamp, and the reserve's last
// hand-off from the batcher to the connection that answers it. Reserves
// forwarded by a follower count on the leader, from its stamp. A reserve
// that waited in an in-flight cap's queue counts until its queued answer.
type ReserveStages struct {
	// Reserves is how many reserves the stages below cover; Unmeasured
	// those of entries whose times were lost (overwritten before they
	// were read), which the stages leave out.
	Reserves   uint64 `json:"reserves"`
	Unmeasured uint64 `json:"unmeasured"`
	// BatchWaitNanos: from the reserve's arrival stamp to the call of
	// raft's Apply with its entry (the hand-off to the batcher, the wait
	// for a commit slot while MaxInflight entries commit, and encoding).
	BatchWaitNanos uint64 `json:"batch_wait_ns"`
	// RaftQueueNanos: from that call to the start of the leader's log
	// append of the entry (raft's apply queue and its leader loop).
	RaftQueueNanos uint64 `json:"raft_queue_ns"`
	// LogAppendNanos: the leader's LogStore.StoreLogs call that stored
	// the entry (raft's log cache, bbolt's write and fsync, the
	// election-receipt note).
	LogAppendNanos uint64 `json:"log_append_ns"`
	// ReplicateCommitNanos: from the end of that append to the start of
	// the entry's apply on the leader (replication to the followers,
	// their appends and fsyncs, their acknowledgements, the commit and
	// raft's hand-off to the FSM goroutine, including entries applied
	// ahead of it).
	ReplicateCommitNanos uint64 `json:"replicate_commit_ns"`
	// ApplyNanos: the entry's FSM apply on the leader (the register's
	// decisions, the apply observer, the waiters' hand-off).
	ApplyNanos uint64 `json:"apply_ns"`
	// AnswerNanos: from the end of that apply until the batcher handed
	// the last of the entry's answers to the reserves waiting for them
	// (raft's future, the batcher's goroutines, the commit hooks).
	AnswerNanos uint64 `json:"answer_ns"`
}
