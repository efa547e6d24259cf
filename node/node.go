package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

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

// Node is one permitd register node: raft, the FSM, the leader's cluster
// timeline and batcher, and forwarding of client requests to the leader.
// All methods are safe for concurrent use.
type Node struct {
	cfg      Config
	log      hclog.Logger
	fsm      *fsm.FSM
	raft     *raft.Raft
	raftNet  *raft.NetworkTransport
	store    *raftboltdb.BoltStore
	mux      *mux
	timeline *timeline
	// receipts says how much of an election a new leader may count
	// (receipt.go).
	receipts *receipts
	batcher  *batcher[fsm.Reserve, fsm.ReserveResult]
	// pending counts the reserves held now (a binary one from its read,
	// while its call runs, even one that turns out invalid); shed those
	// refused because it was at MaxPendingReserves (overload.go).
	pending atomic.Int64
	shed    atomic.Uint64
	// commits counts the reserve entries this node committed as leader
	// (Status.ReserveBatches and the fields after it).
	commits reserveCommits
	// overloadedMsg is the message of a reserve a read loop shed
	// (AdmitShed), built once.
	overloadedMsg []byte
	// leases batches lease, renew and return commands (lease.go).
	leases *batcher[fsm.LeaseCommand, fsm.LeaseResult]
	fwd    *forwarder
	// fwdLeases batches the lease commands a follower forwards
	// (forwardbatch.go).
	fwdLeases *leaseForwarder
	// calls serves the calls of pipelined connections (callpool.go).
	calls *callPool
	// expired queues the reports of grants answered as refusals
	// (expiredgrants.go).
	expired *expiredReports

	members membership
	// changeMu serializes the membership changes this node makes as
	// leader (joins, removals, promotions); promotion is what the leader
	// observed of the non-voters (promote.go).
	changeMu  sync.Mutex
	promotion promoter

	// waiters hands the decisions on queued reserves to the goroutines
	// holding their answers (waiters.go); wake pokes the waker (waker.go).
	waiters *waiterHub
	wake    chan struct{}

	stopCh   chan struct{}
	stopOnce sync.Once
	// stopped is canceled when stopCh closes, for calls that take a
	// context; stop (once, under stopOnce) closes and cancels both.
	stopped context.Context
	stop    func()
	wg      sync.WaitGroup

	// testHoldAnswers, set only by tests before the node serves, runs
	// after a reserve entry is applied and before its answers are handed
	// back: it simulates an fsync or scheduling stall.
	testHoldAnswers func()
	// testHoldRelayed, set only by tests before the node serves, runs
	// after a follower read the leader's answer to a reserve and before
	// it answers: a stall on the forwarding follower.
	testHoldRelayed func()
	// testDecided, set only by tests before the node serves, sees every
	// reserve the leader decided, before its answer is shifted to its
	// departure (NowNanos and OnArrival still set).
	testDecided func(fsm.ReserveResult)
	// testNoCommandBatch, set only by tests, makes the node answer
	// wire.OpCommandBatch as a version without it does.
	testNoCommandBatch atomic.Bool
	// testDelayForwardedAnswer, set only by tests, delays (nanoseconds)
	// the leader's answer to a forwarded reserve after its durations are
	// fixed: a slow network leg from the leader back to the follower.
	testDelayForwardedAnswer atomic.Int64
	// testDelayLeaderAnswer, set only by tests, delays (nanoseconds) the
	// leader's answer to a reserve between the register's decision and
	// the shift of its durations to the answer's departure: a stall of
	// the leader (a GC pause, a slow apply).
	testDelayLeaderAnswer atomic.Int64
	// testWithdrawGrace, set only by tests, replaces withdrawGrace.
	testWithdrawGrace atomic.Int64
	// testWithdrawn, set only by tests before the reserve it concerns is
	// made, sees the outcome of every withdrawal this node sent.
	testWithdrawn func(fsm.ReleaseResult, error)
	// testCallWindow, set only by tests, replaces maxForwardedInflight for
	// the connections this node serves from then on.
	testCallWindow atomic.Int64
}

// New starts a node: it opens (or creates) its data directory, starts raft
// and, if the node has no state and InitialCluster is set, bootstraps the
// cluster. A node restarted after kill -9 recovers from its data directory
// alone.
func New(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger,
		fsm:      fsm.New(),
		timeline: newTimeline(cfg.Clock, wire.NewMonotonicClock()),
		fwd:      &forwarder{network: cfg.Network, timeout: 2 * time.Second},
		stopCh:   make(chan struct{}),
		expired:  newExpiredReports(),
		waiters:  newWaiterHub(),
		wake:     make(chan struct{}, 1),
	}
	var cancel context.CancelFunc
	n.stopped, cancel = context.WithCancel(context.Background())
	n.stop = func() { close(n.stopCh); cancel() }
	n.fwdLeases = newLeaseForwarder(n.fwd, wire.AddNanos(cfg.ApplyTimeout, cfg.LeaderWait))
	n.receipts = newReceipts(n.timeline.clock, n.timeline.real)
	n.calls = newCallPool(n.stopCh)
	n.overloadedMsg = overloadedMessage(cfg.ID, cfg.MaxPendingReserves)
	var err error
	n.mux, err = newMux(cfg.Network, cfg.RaftAddr)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Node, error) {
		n.mux.close()
		if n.store != nil {
			n.store.Close()
		}
		return nil, err
	}
	n.store, err = openLogStore(filepath.Join(cfg.DataDir, "raft.db"))
	if err != nil {
		return fail(fmt.Errorf("node: open raft.db: %w", err))
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.DataDir, "snapshots"), 2, cfg.Logger.Named("snapshots"))
	if err != nil {
		return fail(fmt.Errorf("node: snapshot store: %w", err))
	}
	if cfg.AdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr)
		if err != nil {
			return fail(fmt.Errorf("node: advertise address %q: %w", cfg.AdvertiseAddr, err))
		}
		n.mux.advAddr = a
	}
	n.raftNet = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  raftLayer{m: n.mux},
		MaxPool: 3,
		Timeout: 2 * time.Second,
		Logger:  cfg.Logger.Named("raft-net"),
	})
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.MaxAppendEntries = 512
	rc.BatchApplyCh = true
	rc.Logger = cfg.Logger.Named("raft")
	if err := raft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("node: raft config: %w", err))
	}
	has, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		return fail(fmt.Errorf("node: read raft state: %w", err))
	}
	// Replication reads recent entries back; serve them from memory.
	logs, err := raft.NewLogCache(1024, n.store)
	if err != nil {
		return fail(fmt.Errorf("node: log cache: %w", err))
	}
	n.raft, err = raft.NewRaft(rc, waiterFSM{receiptFSM{n.fsm, n.receipts}, n}, receiptLog{logs, n.receipts}, n.store, snaps, n.raftNet)
	if err != nil {
		return fail(fmt.Errorf("node: start raft: %w", err))
	}
	if !has && len(cfg.InitialCluster) > 0 {
		f := n.raft.BootstrapCluster(raft.Configuration{Servers: cfg.InitialCluster})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.raft.Shutdown()
			return fail(fmt.Errorf("node: bootstrap: %w", err))
		}
	}
	// A node that starts from a data directory was a member of the
	// configuration it holds, unless that configuration already left it
	// out (membership.go).
	n.members.wasMember = has
	n.checkMembership()
	n.batcher = newBatcher(n, reserveBatch, cfg.MaxBatch, cfg.MaxInflight, cfg.ApplyTimeout)
	n.leases = newBatcher(n, leaseBatch, min(cfg.MaxBatch, fsm.MaxBatchLeaseCommands), cfg.MaxInflight, cfg.ApplyTimeout)
	n.wg.Add(5)
	go func() { defer n.wg.Done(); n.serveForwardListener() }()
	go func() { defer n.wg.Done(); n.watchLeadership() }()
	go func() { defer n.wg.Done(); n.promoteLoop() }()
	go func() { defer n.wg.Done(); n.sendExpiredReports() }()
	go func() { defer n.wg.Done(); n.runWaker() }()
	return n, nil
}

// HasExistingState reports whether dataDir holds a node's raft state (a
// log, a stable store or a snapshot): a node started on it rejoins its
// cluster by itself, while a node on an empty directory needs an initial
// cluster to bootstrap or a cluster to join. It opens nothing for writing.
func HasExistingState(dataDir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dataDir, "raft.db")); err == nil {
		return true, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("node: data dir %s: %w", dataDir, err)
	}
	entries, err := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node: data dir %s: %w", dataDir, err)
	}
	return len(entries) > 0, nil
}

// ID returns the node's server ID.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the address the node's raft listener is bound to.
func (n *Node) RaftAddr() string { return n.mux.ln.Addr().String() }

// leaderAddr returns the current leader's raft address, waiting for one to
// be known until ctx ends.
func (n *Node) leaderAddr(ctx context.Context) (string, string, error) {
	for {
		addr, id := n.raft.LeaderWithID()
		if addr != "" {
			return string(addr), string(id), nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", "", fmt.Errorf("%w: no leader known: %v", ErrNoLeader, ctx.Err())
		case <-n.stopCh:
			t.Stop()
			return "", "", ErrShutdown
		case <-t.C:
		}
	}
}

func (n *Node) voterCount() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	c := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			c++
		}
	}
	return c
}
