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

// node.go: a Node and its life: New starts raft and what the node adds
// around it, Shutdown and Kill stop it (its settings are config.go's).

// Node is one permitd register node: raft, the FSM, the leader's cluster
// timeline and batcher, and forwarding of client requests to the leader.
// All methods are safe for concurrent use.
type Node struct {
	cfg Config
	log hclog.Logger
	fsm *fsm.FSM
	// families keeps the counters of the templated keys that left their
	// family since the node started (templatestats.go).
	families KeyFamilies
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
	// stages breaks the reserve entries this node committed as leader
	// down by stage (stages.go; Status.ReserveStages).
	stages *reserveStages
	// overloadedMsg is the message of a reserve a read loop shed
	// (AdmitShed), built once.
	overloadedMsg []byte
	// leases batches lease, renew and return commands (lease.go).
	leases *batcher[fsm.LeaseCommand, fsm.LeaseResult]
	fwd    *forwarder
	// fwdLeases batches the lease commands a follower forwards
	// (forwardbatch.go).
	fwdLeases *leaseForwarder
	// calls serves the calls of pipelined connections (forward.go).
	calls *callPool
	// expired queues the reports of grants answered as refusals
	// (expiredgrants.go).
	expired *expiredReports
	// snapFails counts the snapshots raft failed to take or restore
	// (snapshotfailures.go).
	snapFails snapshotFailures

	members membership
	// changeMu serializes the membership changes this node makes as
	// leader (joins, removals, promotions); promotion is what the leader
	// observed of the non-voters (promote.go).
	changeMu  sync.Mutex
	promotion promoter
	// httpAddr is this node's advertised HTTP address (SetHTTPAddr);
	// httpAddrs the other members' as they told this node (httpaddrs.go).
	httpAddr  atomic.Pointer[string]
	httpAddrs httpAddrs

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
	n := newNode(cfg)
	var err error
	n.mux, err = newMux(cfg.Network, cfg.RaftAddr)
	if err != nil {
		n.stop() // the call pool's sweeper
		return nil, err
	}
	has, err := n.startRaft()
	if err != nil {
		n.mux.close()
		if n.store != nil {
			n.store.Close()
		}
		n.stop()
		return nil, err
	}
	// A node that starts from a data directory was a member of the
	// configuration it holds, unless that configuration already left it
	// out (cluster.go).
	n.members.wasMember = has
	n.checkMembership()
	n.batcher = newBatcher(n, reserveBatch, cfg.MaxBatch, cfg.MaxInflight, cfg.ApplyTimeout)
	n.leases = newBatcher(n, leaseBatch, min(cfg.MaxBatch, fsm.MaxBatchLeaseCommands), cfg.MaxInflight, cfg.ApplyTimeout)
	n.wg.Add(6)
	go func() { defer n.wg.Done(); n.serveForwardListener() }()
	go func() { defer n.wg.Done(); n.watchLeadership() }()
	go func() { defer n.wg.Done(); n.promoteLoop() }()
	go func() { defer n.wg.Done(); n.httpAddrLoop() }()
	go func() { defer n.wg.Done(); n.sendExpiredReports() }()
	go func() { defer n.wg.Done(); n.runWaker() }()
	return n, nil
}

// newNode is a node's parts that need no I/O: its register, its
// timeline, forwarding, the bounds of what it holds, and what stops it.
func newNode(cfg Config) *Node {
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
		stages:   newReserveStages(),
	}
	var cancel context.CancelFunc
	n.stopped, cancel = context.WithCancel(context.Background())
	n.stop = func() { close(n.stopCh); cancel() }
	n.fwdLeases = newLeaseForwarder(n.fwd, wire.AddNanos(cfg.ApplyTimeout, cfg.LeaderWait))
	n.receipts = newReceipts(n.timeline.clock, n.timeline.real)
	n.calls = newCallPool(n.stopCh)
	n.overloadedMsg = overloadedMessage(cfg.ID, cfg.MaxPendingReserves)
	return n
}

// startRaft opens the node's log store and snapshots in its data
// directory and starts raft on its raft port (n.mux), bootstrapping the
// cluster when the directory holds no state yet and the config names an
// initial cluster; has reports whether it held state. On an error the
// caller closes the port and the store.
func (n *Node) startRaft() (has bool, err error) {
	cfg := n.cfg
	n.store, err = openLogStore(filepath.Join(cfg.DataDir, "raft.db"))
	if err != nil {
		return false, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.DataDir, "snapshots"), 2, cfg.Logger.Named("snapshots"))
	if err != nil {
		return false, fmt.Errorf("node: snapshot store: %w", err)
	}
	if cfg.AdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr)
		if err != nil {
			return false, fmt.Errorf("node: advertise address %q: %w", cfg.AdvertiseAddr, err)
		}
		n.mux.advAddr = a
	}
	n.raftNet = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  raftLayer{m: n.mux},
		MaxPool: 3,
		Timeout: 2 * time.Second,
		Logger:  cfg.Logger.Named("raft-net"),
	})
	rc := cfg.raftConfig()
	if err := raft.ValidateConfig(rc); err != nil {
		return false, fmt.Errorf("node: raft config: %w", err)
	}
	has, err = raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		return false, fmt.Errorf("node: read raft state: %w", err)
	}
	// Replication reads recent entries back; serve them from memory.
	logs, err := raft.NewLogCache(1024, n.store)
	if err != nil {
		return false, fmt.Errorf("node: log cache: %w", err)
	}
	n.raft, err = raft.NewRaft(rc, timedFSM{countingFSM{waiterFSM{receiptFSM{n.fsm, n.receipts}, n}}}, timedLog{receiptLog{logs, n.receipts}, n.stages}, n.store, snaps, n.raftNet)
	if err != nil {
		return false, fmt.Errorf("node: start raft: %w", err)
	}
	if !has && len(cfg.InitialCluster) > 0 {
		f := n.raft.BootstrapCluster(raft.Configuration{Servers: cfg.InitialCluster})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.raft.Shutdown()
			return false, fmt.Errorf("node: bootstrap: %w", err)
		}
	}
	return has, nil
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

// Stopping a node, gracefully (a leader hands over first) or as a crash
// would.

// Shutdown stops the node gracefully: a leader first transfers leadership
// (bounded by a few seconds), then raft stops and the stores close.
func (n *Node) Shutdown() error {
	var err error
	n.stopOnce.Do(func() {
		if n.raft.State() == raft.Leader && n.voterCount() > 1 {
			if terr := n.raft.LeadershipTransfer().Error(); terr != nil {
				n.log.Warn("leadership transfer on shutdown failed", "error", terr)
			}
		}
		n.stop()
		n.batcher.close()
		n.leases.close()
		if serr := n.raft.Shutdown().Error(); serr != nil {
			err = fmt.Errorf("node: raft shutdown: %w", serr)
		}
		n.fwd.close()
		n.mux.close()
		n.raftNet.Close()
		n.wg.Wait()
		if cerr := n.store.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("node: close raft.db: %w", cerr)
		}
	})
	return err
}

// Kill stops the node abruptly, as a crash would, for tests: no leadership
// transfer. Data on disk is whatever raft had fsynced.
func (n *Node) Kill() {
	n.stopOnce.Do(func() {
		n.stop()
		n.mux.close()
		n.raftNet.Close()
		n.batcher.close()
		n.leases.close()
		n.raft.Shutdown().Error()
		n.fwd.close()
		n.wg.Wait()
		n.store.Close()
	})
}
