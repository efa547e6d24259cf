package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// raftside.go: the floor under permitd's consensus: a bare hashicorp/raft
// cluster of 3 nodes in this process, each with raft-boltdb/v2 stores on
// disk (fsync on) and the TCP transport on loopback, with the raft
// settings permitd's node runs with (node/config.go's defaults and
// raftConfig, node/node.go's log cache, bbolt options and transport pool)
// and a no-op FSM. A decision is one Apply of a small entry on the
// leader, measured until its future returns (committed at a majority and
// applied): what permitd's reserve costs without permitd.

// Settings of the bare raft cluster, as permitd's node uses them.
const (
	raftMembers          = 3
	raftReadyTimeout     = 30 * time.Second
	raftApplyTimeout     = 5 * time.Second
	raftHeartbeatTimeout = 500 * time.Millisecond
	raftElectionTimeout  = 500 * time.Millisecond
	raftLeaderLease      = 300 * time.Millisecond
	raftCommitTimeout    = 50 * time.Millisecond
	raftSnapshotEntries  = 8192
	raftSnapshotInterval = 20 * time.Second
	raftTrailingLogs     = 4096
	raftMaxAppend        = 512
	raftLogCache         = 1024
	raftPool             = 3
	raftNetTimeout       = 2 * time.Second
	// raftPayloadBytes is an entry's size: about one reserve's encoding
	// in permitd's batch entry.
	raftPayloadBytes = 64
)

// raftCluster is a running bare raft cluster.
type raftCluster struct {
	nodes  []*raft.Raft
	stores []*raftboltdb.BoltStore
	trans  []*raft.NetworkTransport
	leader atomic.Pointer[raft.Raft] // the node decisions are sent to
}

// noopFSM applies nothing.
type noopFSM struct{}

func (noopFSM) Apply(*raft.Log) interface{}         { return nil }
func (noopFSM) Snapshot() (raft.FSMSnapshot, error) { return noopSnapshot{}, nil }
func (noopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

// noopSnapshot is an empty snapshot.
type noopSnapshot struct{}

func (noopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (noopSnapshot) Release()                             {}

// startRaft starts the cluster with its data under dir and waits for a
// leader that has committed an entry.
func startRaft(ctx context.Context, dir string) (_ *raftCluster, err error) {
	rc := &raftCluster{}
	defer func() {
		if err != nil {
			rc.stop()
		}
	}()
	servers := make([]raft.Server, raftMembers)
	logs := make([]raft.LogStore, raftMembers)
	snaps := make([]raft.SnapshotStore, raftMembers)
	for i := range raftMembers {
		d := filepath.Join(dir, "raft-r"+strconv.Itoa(i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("compare-redis: raft data dir: %w", err)
		}
		s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(d, "raft.db"),
			BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}})
		if err != nil {
			return nil, fmt.Errorf("compare-redis: raft store: %w", err)
		}
		rc.stores = append(rc.stores, s)
		if logs[i], err = raft.NewLogCache(raftLogCache, s); err != nil {
			return nil, fmt.Errorf("compare-redis: raft log cache: %w", err)
		}
		if snaps[i], err = raft.NewFileSnapshotStoreWithLogger(filepath.Join(d, "snapshots"), 2, hclog.NewNullLogger()); err != nil {
			return nil, fmt.Errorf("compare-redis: raft snapshots: %w", err)
		}
		t, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, raftPool, raftNetTimeout, hclog.NewNullLogger())
		if err != nil {
			return nil, fmt.Errorf("compare-redis: raft transport: %w", err)
		}
		rc.trans = append(rc.trans, t)
		servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID("r" + strconv.Itoa(i+1)), Address: t.LocalAddr()}
	}
	for i := range raftMembers {
		c := raftConfig(servers[i].ID)
		r, err := raft.NewRaft(c, noopFSM{}, logs[i], rc.stores[i], snaps[i], rc.trans[i])
		if err != nil {
			return nil, fmt.Errorf("compare-redis: start raft: %w", err)
		}
		rc.nodes = append(rc.nodes, r)
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			return nil, fmt.Errorf("compare-redis: bootstrap raft: %w", err)
		}
	}
	deadline := time.Now().Add(raftReadyTimeout)
	for {
		for _, r := range rc.nodes {
			if r.State() == raft.Leader && r.Apply(make([]byte, raftPayloadBytes), raftApplyTimeout).Error() == nil {
				rc.leader.Store(r)
				return rc, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("compare-redis: no raft leader committed an entry within %v", raftReadyTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// raftConfig is permitd's node's raft configuration (node.Config's
// defaults through raftConfig), logging nothing.
func raftConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = raftHeartbeatTimeout
	c.ElectionTimeout = raftElectionTimeout
	c.LeaderLeaseTimeout = raftLeaderLease
	c.CommitTimeout = raftCommitTimeout
	c.SnapshotThreshold = raftSnapshotEntries
	c.SnapshotInterval = raftSnapshotInterval
	c.TrailingLogs = raftTrailingLogs
	c.MaxAppendEntries = raftMaxAppend
	c.BatchApplyCh = true
	c.Logger = hclog.NewNullLogger()
	return c
}

// decider applies one entry per decision on the leader; every commit is a
// grant. When leadership moves (a loaded machine can delay heartbeats past
// the election timeout), the decision is sent again to the new leader,
// as permitd's clients do, within raftApplyTimeout: the time counts in
// its latency, not as an error.
func (rc *raftCluster) decider() decideFunc {
	payload := make([]byte, raftPayloadBytes)
	return func(ctx context.Context, _, _ int) (bool, error) {
		giveUp := time.Now().Add(raftApplyTimeout)
		for {
			r := rc.leader.Load()
			err := r.Apply(payload, raftApplyTimeout).Error()
			if err == nil {
				return true, nil
			}
			if !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipLost) {
				return false, fmt.Errorf("raft apply: %w", err)
			}
			if !rc.awaitLeader(ctx, giveUp) {
				return false, fmt.Errorf("raft apply: %w (no new leader within %v)", err, raftApplyTimeout)
			}
		}
	}
}

// awaitLeader points rc.leader at the node that leads now, waiting for
// one until giveUp; false if none did by then or ctx ended.
func (rc *raftCluster) awaitLeader(ctx context.Context, giveUp time.Time) bool {
	for {
		for _, r := range rc.nodes {
			if r.State() == raft.Leader {
				rc.leader.Store(r)
				return true
			}
		}
		if time.Now().After(giveUp) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// stop shuts every node down and closes its stores.
func (rc *raftCluster) stop() error {
	var errs []error
	for _, r := range rc.nodes {
		errs = append(errs, r.Shutdown().Error())
	}
	for _, t := range rc.trans {
		errs = append(errs, t.Close())
	}
	for _, s := range rc.stores {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
