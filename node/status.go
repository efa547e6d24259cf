package node

// Server is one member of the raft configuration.
type Server struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
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
}
