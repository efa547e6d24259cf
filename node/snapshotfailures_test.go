package node

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// failingSink is a raft.SnapshotSink whose writes fail, as on a full
// disk.
type failingSink struct{ canceled bool }

func (s *failingSink) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }
func (s *failingSink) Close() error              { return nil }
func (s *failingSink) ID() string                { return "failing" }
func (s *failingSink) Cancel() error             { s.canceled = true; return nil }

// TestStatusCountsSnapshotFailures: a snapshot raft cannot write (its
// sink fails, as on a full disk) and one that does not restore are counted
// in the node's Status (permitd_snapshot_failures_total{op}); a snapshot
// written and restored without error counts nothing.
func TestStatusCountsSnapshotFailures(t *testing.T) {
	c := newTestCluster(t, 1)
	n := c.leader()
	f := countingFSM{waiterFSM{receiptFSM{n.fsm, n.receipts}, n}} // the FSM raft is given (node.go)

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var ok memSink
	if err := snap.Persist(&ok); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(strings.NewReader(ok.String()))); err != nil {
		t.Fatal(err)
	}
	if st := n.Status(); st.SnapshotFailures != 0 || st.RestoreFailures != 0 {
		t.Fatalf("after a snapshot written and restored: %d snapshot and %d restore failures, want 0 and 0", st.SnapshotFailures, st.RestoreFailures)
	}

	sink := &failingSink{}
	if err := snap.Persist(sink); err == nil || !sink.canceled {
		t.Fatalf("Persist on a failing sink: %v (canceled %t), want an error and the sink canceled", err, sink.canceled)
	}
	if err := f.Restore(io.NopCloser(strings.NewReader("not a snapshot"))); err == nil {
		t.Fatal("restoring garbage succeeded")
	}
	if st := n.Status(); st.SnapshotFailures != 1 || st.RestoreFailures != 1 {
		t.Fatalf("after a failed write and a failed restore: %d snapshot and %d restore failures, want 1 and 1", st.SnapshotFailures, st.RestoreFailures)
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ strings.Builder }

func (s *memSink) Close() error  { return nil }
func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
