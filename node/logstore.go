package node

import (
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// logstore.go: the raft log and stable store every node (and a seeded data
// directory) opens.

// openLogStore opens the raft log and stable store at path. Every commit
// is fsynced (bbolt's NoSync and raftboltdb's stay false): a decision is
// on disk at a majority before its answer leaves, which is what lets a
// node that lost power come back without forgetting a grant. Not
// persisting the freelist (bbolt rebuilds it on open) and keeping it as a
// map cut the pages each commit writes, as Consul does; neither loses a
// committed entry.
func openLogStore(path string) (*raftboltdb.BoltStore, error) {
	return raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
}
