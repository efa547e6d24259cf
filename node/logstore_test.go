package node

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// boltOf returns the bbolt handle inside a raftboltdb store (its
// unexported conn field): the only place the fsync setting can be read
// back from.
func boltOf(t *testing.T, s *raftboltdb.BoltStore) *bbolt.DB {
	t.Helper()
	f := reflect.ValueOf(s).Elem().FieldByName("conn")
	if !f.IsValid() || f.Type() != reflect.TypeOf((*bbolt.DB)(nil)) {
		t.Fatalf("raftboltdb.BoltStore has no conn *bbolt.DB field any more (a new version?): check how it exposes NoSync")
	}
	return (*bbolt.DB)(unsafe.Pointer(f.Pointer()))
}

// The README promises that a decision is fsynced at a majority before
// its answer leaves. Killing a process does not show a missing fsync (the
// kernel still writes its page cache), so the setting itself is checked,
// on the store a running node uses and on the one openLogStore makes.
func TestLogStoreFsyncsEveryCommit(t *testing.T) {
	c := newTestCluster(t, 1)
	n := c.leader()
	if db := boltOf(t, n.store); db.NoSync {
		t.Fatal("the running node's raft log does not fsync its commits (bbolt NoSync is true): an acknowledged decision can be lost with the power")
	}
	s, err := openLogStore(filepath.Join(t.TempDir(), "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if db := boltOf(t, s); db.NoSync {
		t.Fatal("openLogStore makes a raft log that does not fsync its commits (bbolt NoSync is true)")
	}
}

// TestDataDirHeldByAnotherNode: a node started on the data directory of a
// running node fails with an error that names the cause (another process
// holds the directory, and on Linux which), and the directory, not bbolt's
// bare "timeout".
func TestDataDirHeldByAnotherNode(t *testing.T) {
	c := newTestCluster(t, 1)
	id := c.ids[0]
	cfg := c.config(id, nil)
	cfg.RaftAddr = addrOf("second-" + id)
	cfg.Network = c.sw.Host(cfg.RaftAddr)
	n, err := New(cfg)
	if err == nil {
		n.Kill()
		t.Fatal("a second node started on a data directory a running node holds")
	}
	if !strings.Contains(err.Error(), "another process") || !strings.Contains(err.Error(), "holds the data directory "+c.dirs[id]) {
		t.Fatalf("second node on a held data directory: %v; want it to say another process holds the data directory %s", err, c.dirs[id])
	}
	// Here the holder is this process (the first node).
	if _, serr := os.Stat("/proc/self/fd"); serr == nil && !strings.Contains(err.Error(), fmt.Sprintf("pid %d (", os.Getpid())) {
		t.Errorf("second node on a held data directory: %v; want it to name the holder, pid %d", err, os.Getpid())
	}
}
