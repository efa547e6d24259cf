package node

import (
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// snapshotfailures.go: the snapshots this node failed to take or to
// restore (Status.SnapshotFailures, Status.RestoreFailures), for the
// operator's alert: a full or failing disk shows first as snapshots that
// cannot be written, and a log that then is never compacted.

// snapshotFailures counts what raft's calls of the FSM's Snapshot,
// Persist and Restore returned as errors since the node started.
type snapshotFailures struct {
	take, restore atomic.Uint64
}

// countingFSM is the FSM raft is given: the waiterFSM, with its snapshot
// and restore failures counted.
type countingFSM struct {
	waiterFSM
}

// Snapshot implements raft.FSM: a failure to encode the state, or later
// to write it (Persist), is counted.
func (f countingFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := f.waiterFSM.Snapshot()
	if err != nil {
		f.n.snapFails.take.Add(1)
		return nil, err
	}
	return countedSnapshot{s, &f.n.snapFails.take}, nil
}

// Restore implements raft.FSM: a snapshot that does not restore (from
// the leader, or from disk at start) is counted.
func (f countingFSM) Restore(rc io.ReadCloser) error {
	err := f.waiterFSM.Restore(rc)
	if err != nil {
		f.n.snapFails.restore.Add(1)
	}
	return err
}

// countedSnapshot counts a failed Persist (the snapshot store's write,
// sync or rename: a full disk).
type countedSnapshot struct {
	raft.FSMSnapshot
	fails *atomic.Uint64
}

// Persist implements raft.FSMSnapshot.
func (s countedSnapshot) Persist(sink raft.SnapshotSink) error {
	err := s.FSMSnapshot.Persist(sink)
	if err != nil {
		s.fails.Add(1)
	}
	return err
}
