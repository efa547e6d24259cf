package node

import (
	"errors"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// config.go: a node's settings, and their defaults.

// Config configures a Node. Zero durations and sizes select the defaults
// documented on each field.
type Config struct {
	// ID is the node's raft server ID; required.
	ID string
	// DataDir holds raft.db (log and stable store, fsync on) and snapshots/.
	DataDir string
	// RaftAddr is the address the node listens on for raft and forwarding;
	// it is also the address other nodes dial unless AdvertiseAddr is set.
	RaftAddr string
	// AdvertiseAddr is the raft address announced to the cluster.
	AdvertiseAddr string
	// InitialCluster, if not empty, bootstraps a new cluster with these
	// voters when the node has no state yet. Give every initial node the
	// same list: bootstrapping identically on each is safe.
	InitialCluster []raft.Server

	// Clock is the monotonic clock the node stamps with; default the
	// process's (wire.NewMonotonicClock).
	Clock wire.Clock
	// Network carries raft and forwarding; default TCPNetwork.
	Network Network
	// Logger receives hclog key/value logs; default: warnings to stderr.
	Logger hclog.Logger

	// HeartbeatTimeout (default 500ms), ElectionTimeout (default 500ms)
	// and LeaderLeaseTimeout (default 300ms) tune raft for fast failover
	// on a LAN. CommitTimeout (default 50ms, raft's) is how long an idle
	// leader waits before sending followers the commit index: new
	// entries are replicated at once whatever it is; at 5 ms an idle
	// 3-node leader spent a tenth of a core on it.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotThreshold (default 8192 entries), SnapshotInterval (default
	// 20s) and TrailingLogs (default 4096) control log compaction.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64

	// MaxBatch is the most reserves in one log entry (default 1024), and
	// the most lease commands (at most fsm.MaxBatchLeaseCommands).
	MaxBatch int
	// MaxInflight is the most reserve entries being committed at once
	// (default 2: more entries in flight means smaller batches, and each
	// entry costs the leader and a follower an fsync); lease entries have
	// as many slots of their own.
	MaxInflight int
	// ApplyTimeout bounds one raft apply (default 5s).
	ApplyTimeout time.Duration
	// MaxPendingReserves bounds the reserves this node holds at once
	// (default PendingBatches*MaxBatch, DefaultMaxPendingReserves at the
	// default MaxBatch): its clients' (HTTP and binary,
	// waiting for a batch, a commit or a forwarded answer) and, on the
	// leader, those followers forwarded to it. A reserve beyond it fails
	// at once with ErrOverloaded instead of queueing (overload.go).
	MaxPendingReserves int
	// LeaderWait bounds, beyond a reserve's own max wait, how long a
	// reserve waits for a leader to be known and to answer (default 1s):
	// with no leader reachable it fails (ErrNoLeader) within max wait +
	// LeaderWait. An election usually ends well within it.
	LeaderWait time.Duration
	// PromoteAfter is how long a joined non-voter must stay caught up
	// with the leader, probed over the cluster's network, before the
	// leader makes it a voter (default 2s; promote.go).
	PromoteAfter time.Duration
	// MaxPendingJoins bounds the non-voters (joined servers not yet
	// promoted) at once (default 3): a join beyond is refused with
	// ErrConflict until one is promoted or removed.
	MaxPendingJoins int
	// OnBatch, if set, is called after each reserve entry is applied with
	// its size and its apply latency (for metrics).
	OnBatch func(size int, applyLatency time.Duration)
	// Applied, if set, is told what every entry this node applies decided
	// (for per-limit metrics): see ApplyObserver. Every node applies every
	// entry, so every node observes the same decisions.
	Applied ApplyObserver

	// UnsafeResumeFromOwnClock is TEST-ONLY and UNSAFE: it deliberately
	// breaks invariant 2 (cluster time). A new leader then resumes the
	// cluster timeline from its own Clock reading instead of the FSM's last
	// applied time, so a leader whose clock is ahead jumps the timeline
	// forward and grants permits early. It exists so that jepsen-lite can
	// show it catches this bug (the agent's --test-break-timeline). Never
	// set it outside such a test.
	UnsafeResumeFromOwnClock bool
}

func (c *Config) setDefaults() error {
	if c.ID == "" {
		return errors.New("node: config: ID is required")
	}
	if c.DataDir == "" {
		return errors.New("node: config: DataDir is required")
	}
	if c.RaftAddr == "" {
		return errors.New("node: config: RaftAddr is required")
	}
	if c.Clock == nil {
		c.Clock = wire.NewMonotonicClock()
	}
	if c.Network == nil {
		c.Network = TCPNetwork{}
	}
	if c.Logger == nil {
		c.Logger = hclog.New(&hclog.LoggerOptions{Name: "permitd", Level: hclog.Warn, Output: os.Stderr})
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, 500*time.Millisecond)
	def(&c.ElectionTimeout, 500*time.Millisecond)
	def(&c.LeaderLeaseTimeout, 300*time.Millisecond)
	def(&c.CommitTimeout, 50*time.Millisecond)
	def(&c.SnapshotInterval, 20*time.Second)
	def(&c.ApplyTimeout, 5*time.Second)
	def(&c.LeaderWait, time.Second)
	def(&c.PromoteAfter, 2*time.Second)
	if c.MaxPendingJoins <= 0 {
		c.MaxPendingJoins = 3
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		c.LeaderLeaseTimeout = c.HeartbeatTimeout
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 4096
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1024
	}
	if c.MaxBatch > fsm.MaxBatchReserves {
		c.MaxBatch = fsm.MaxBatchReserves
	}
	if c.MaxPendingReserves <= 0 {
		c.MaxPendingReserves = PendingBatches * c.MaxBatch
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = 2
	}
	return nil
}

// raftConfig is the raft configuration a node with these settings runs
// with.
func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.ID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	rc.MaxAppendEntries = 512
	rc.BatchApplyCh = true
	rc.Logger = c.Logger.Named("raft")
	return rc
}
