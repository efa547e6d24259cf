package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/permitd/permitd/fsm"
)

// storage.go: a node's data directory: the raft log and stable store it
// opens (openLogStore), whether it holds a node's state already
// (HasExistingState), and backups: a consistent snapshot of the register
// to a file, and a new cluster seeded from one (etcdctl snapshot save /
// restore).
//
// SaveSnapshot runs on the leader only (a snapshot may be larger than a
// forwarded frame): after a raft barrier it writes the state machine's
// snapshot encoding, which covers every decision committed before the
// call. SeedDataDir writes that encoding into an empty data directory as a
// raft snapshot at term 1 and at the index the state covers, with the new
// cluster's configuration: a node started on it restores the state
// (limits, pacers, leases, request IDs, sessions, the cluster time) and
// needs no --initial-cluster. Seed every node of the new cluster from the
// same file with the same servers.

// SaveSnapshot writes a consistent snapshot of the register's state to w
// and returns the applied index it covers. Only the leader takes one:
// elsewhere it fails with ErrNoLeader naming the leader.
func (n *Node) SaveSnapshot(ctx context.Context, w io.Writer) (uint64, error) {
	if err := n.checkRemoved(); err != nil {
		return 0, err
	}
	if !n.waitLeading(ctx) {
		_, leader := n.raft.LeaderWithID()
		return 0, userErrorf(ErrNoLeader, "node %q is not the leader (the leader is %q): ask the leader for a snapshot", n.cfg.ID, leader)
	}
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := n.awaitFuture(n.raft.Barrier(timeout)); err != nil {
		return 0, mapRaftErr(err)
	}
	return n.fsm.WriteSnapshot(w)
}

// SeedDataDir prepares the empty directory dataDir for a node of a new
// cluster whose voters are servers, from a snapshot written by
// SaveSnapshot. It validates the snapshot completely first (it must
// restore), refuses a directory that already holds a node's state, and
// returns the index the state covers.
func SeedDataDir(dataDir string, snapshot []byte, servers []raft.Server) (uint64, error) {
	if len(servers) == 0 {
		return 0, fmt.Errorf("%w: seeding %s: no servers given for the new cluster", ErrInvalid, dataDir)
	}
	if has, err := HasExistingState(dataDir); err != nil {
		return 0, err
	} else if has {
		return 0, fmt.Errorf("%w: seeding %s: the directory already holds a node's state; give an empty one", ErrInvalid, dataDir)
	}
	f := fsm.New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(snapshot))); err != nil {
		return 0, fmt.Errorf("%w: the snapshot does not restore: %w", ErrInvalid, err)
	}
	index := max(f.AppliedIndex(), 1)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return 0, fmt.Errorf("node: data dir: %w", err)
	}
	// The log and stable store exist (empty) so that the directory looks
	// like any node's.
	store, err := openLogStore(filepath.Join(dataDir, "raft.db"))
	if err != nil {
		return 0, err
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dataDir, "snapshots"), 2, hclog.NewNullLogger())
	if err != nil {
		return 0, fmt.Errorf("node: snapshot store: %w", err)
	}
	_, trans := raft.NewInmemTransport("")
	sink, err := snaps.Create(1, index, 1, raft.Configuration{Servers: servers}, index, trans)
	if err != nil {
		return 0, fmt.Errorf("node: creating the seed snapshot: %w", err)
	}
	if _, err := sink.Write(snapshot); err != nil {
		_ = sink.Cancel()
		return 0, fmt.Errorf("node: writing the seed snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return 0, fmt.Errorf("node: closing the seed snapshot: %w", err)
	}
	if has, err := HasExistingState(dataDir); err != nil || !has {
		return 0, errors.Join(fmt.Errorf("node: the seeded directory %s holds no state", dataDir), err)
	}
	return index, nil
}

// openLogStore opens the raft log and stable store at path. Every commit
// is fsynced (bbolt's NoSync and raftboltdb's stay false): a decision is
// on disk at a majority before its answer leaves, which is what lets a
// node that lost power come back without forgetting a grant. Not
// persisting the freelist (bbolt rebuilds it on open) and keeping it as a
// map cut the pages each commit writes, as Consul does; neither loses a
// committed entry.
func openLogStore(path string) (*raftboltdb.BoltStore, error) {
	s, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: logLockTimeout, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
	if errors.Is(err, bbolt.ErrTimeout) {
		who := "another process"
		if h := holdersOf(path); h != "" {
			who += ", " + h + ","
		}
		return nil, fmt.Errorf("node: open %s: %s holds the data directory %s (its lock on raft.db was not released within %s): stop that process, or give this node a data directory of its own: %w",
			path, who, filepath.Dir(path), logLockTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("node: open %s: %w", path, err)
	}
	return s, nil
}

// logLockTimeout is how long opening raft.db waits for another process's
// lock on it (bbolt's flock) to go.
const logLockTimeout = time.Second

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
