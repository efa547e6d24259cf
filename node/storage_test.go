package node

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// TestSnapshotSaveAndSeedANewCluster: a snapshot saved from the leader
// seeds a new three-node cluster that keeps every limit, lease and the
// cluster timeline: the next strict permit comes after the last one the
// old cluster granted, the leases are there at their epochs, and the new
// cluster goes on deciding.
func TestSnapshotSaveAndSeedANewCluster(t *testing.T) {
	old := newTestCluster(t, 3)
	l := old.leader()
	ctx := ctxTimeout(t, 60*time.Second)
	slow, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: time.Minute, MaxReserved: 3, Expiry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "slow", Config: slow}); return err })
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "hot", Config: strictConfig(t, time.Millisecond, 5)})
		return err
	})
	if _, err := l.PutLeasePolicy(ctx, fsm.LeasePolicy{Limit: "hot", Leased: true, BurstPermits: 100, MaxOutstandingPermits: 100}); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Lease(ctx, fsm.Lease{Limit: "hot", Holder: "w1", Group: "g", Weight: 1, DemandMilliPermitsPerSec: 1000, TTLNanos: int64(time.Minute)})
	if err != nil || lease.Status != fsm.LeaseGranted {
		t.Fatalf("lease: %+v %v", lease, err)
	}
	// A template with a cap of 2 keys, and one key taken with 2 permits
	// at once from its full store of 3 (one a minute).
	burst, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, Per: time.Minute, MaxBurstSeconds: 180})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := fsm.PutTemplate{Prefix: "cust", Config: burst, IdleNanos: int64(time.Hour), MaxKeys: 2}
	if _, err := l.PutTemplate(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Reserve(ctx, fsm.Reserve{Limit: "cust:a", Permits: 2}); err != nil || res.Status != fsm.Granted || res.WaitNanos != 0 {
		t.Fatalf("first reserve of a key: %+v %v", res, err)
	}
	// Two permits of one a minute: the next free slot is 2 minutes ahead.
	for range 2 {
		if res, err := l.Reserve(ctx, fsm.Reserve{Limit: "slow", Permits: 1, MaxWaitNanos: int64(time.Hour)}); err != nil || res.Status != fsm.Granted {
			t.Fatalf("reserve: %+v %v", res, err)
		}
	}
	// Only the leader saves a snapshot.
	if _, err := old.followers(l)[0].SaveSnapshot(ctx, &bytes.Buffer{}); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("snapshot from a follower: %v, want ErrNoLeader", err)
	}
	var snap bytes.Buffer
	index, err := l.SaveSnapshot(ctx, &snap)
	if err != nil || index == 0 {
		t.Fatalf("save: index %d, %v", index, err)
	}
	wantLimits, _ := l.Limits(ctx)
	_, wantLeases, err := l.LeaseView(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	savedNow := l.fsm.LastNowNanos()
	old.stopAll()

	// A new cluster of three, seeded from the file.
	fresh := &testCluster{t: t, sw: old.sw, dirs: map[string]string{}, nodes: map[string]*Node{}, clocks: map[string]wire.Clock{}}
	var servers []raft.Server
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("r%d", i)
		fresh.ids = append(fresh.ids, id)
		fresh.dirs[id] = t.TempDir()
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addrOf(id)), Suffrage: raft.Voter})
	}
	for _, id := range fresh.ids {
		if got, err := SeedDataDir(fresh.dirs[id], snap.Bytes(), servers); err != nil || got != index {
			t.Fatalf("seed %s: index %d, %v", id, got, err)
		}
	}
	if _, err := SeedDataDir(fresh.dirs["r1"], snap.Bytes(), servers); !errors.Is(err, ErrInvalid) {
		t.Fatalf("seeding a directory twice: %v", err)
	}
	if _, err := SeedDataDir(t.TempDir(), []byte("not a snapshot"), servers); !errors.Is(err, ErrInvalid) {
		t.Fatalf("seeding from garbage: %v", err)
	}
	for _, id := range fresh.ids {
		fresh.start(id, nil) // no initial cluster: the seed holds the configuration
	}
	t.Cleanup(fresh.stopAll)
	nl := fresh.leader()
	var gotLimits []fsm.LimitInfo
	retryNoLeader(t, func() error { var err error; gotLimits, err = nl.Limits(ctx); return err })
	if len(gotLimits) != len(wantLimits) {
		t.Fatalf("limits after the restore: %+v, want %+v", gotLimits, wantLimits)
	}
	for i := range gotLimits {
		g, w := gotLimits[i], wantLimits[i]
		if g.Name != w.Name || g.Config != w.Config || g.GrantedRequests != w.GrantedRequests || g.Leased != w.Leased || g.Lease != w.Lease {
			t.Errorf("limit %d after the restore: %+v, want %+v", i, g, w)
		}
	}
	_, gotLeases, err := nl.LeaseView(ctx, "hot")
	if err != nil || len(gotLeases) != len(wantLeases) || gotLeases[0].ID != wantLeases[0].ID || gotLeases[0].Epoch != wantLeases[0].Epoch {
		t.Fatalf("leases after the restore: %+v %v, want %+v", gotLeases, err, wantLeases)
	}
	if now := nl.fsm.LastNowNanos(); now < savedNow {
		t.Fatalf("the timeline went back: %d after the restore, %d saved", now, savedNow)
	}
	// The template, its cap and its key survive the restore: the key
	// keeps what it spent (its last stored permit and one served on
	// credit, as a bursty store serves, then a refusal where a key made
	// anew would grant), a second key is made, a third is past the cap.
	var tmpls []fsm.TemplateInfo
	retryNoLeader(t, func() error { var err error; tmpls, err = nl.Templates(ctx); return err })
	if len(tmpls) != 1 || tmpls[0].Prefix != "cust" || tmpls[0].Config != burst || tmpls[0].MaxKeys != 2 || tmpls[0].IdleNanos != int64(time.Hour) || tmpls[0].LiveKeys != 1 {
		t.Fatalf("templates after the restore: %+v, want %+v with 1 live key", tmpls, tmpl)
	}
	for i := range 2 {
		if res, err := nl.Reserve(ctx, fsm.Reserve{Limit: "cust:a", Permits: 1}); err != nil || res.Status != fsm.Granted || res.WaitNanos != 0 {
			t.Fatalf("the restored key's permit %d: %+v %v", i, res, err)
		}
	}
	if res, err := nl.Reserve(ctx, fsm.Reserve{Limit: "cust:a", Permits: 1}); err != nil || res.Status != fsm.Refused {
		t.Fatalf("one more permit of the restored key: %+v %v, want a refusal (its store of 3 spent, and one on credit)", res, err)
	}
	if res, err := nl.Reserve(ctx, fsm.Reserve{Limit: "cust:b", Permits: 3}); err != nil || res.Status != fsm.Granted {
		t.Fatalf("a second key after the restore: %+v %v", res, err)
	}
	if res, err := nl.Reserve(ctx, fsm.Reserve{Limit: "cust:c", Permits: 1}); err != nil || res.Status != fsm.KeysFull {
		t.Fatalf("a third key after the restore: %+v %v, want KeysFull (the cap of 2 kept)", res, err)
	}
	// The next permit of "slow" is after the two granted before the save.
	res, err := nl.Reserve(ctx, fsm.Reserve{Limit: "slow", Permits: 1, MaxWaitNanos: int64(time.Hour)})
	if err != nil || res.Status != fsm.Granted || res.WaitNanos < int64(time.Minute) {
		t.Fatalf("reserve after the restore: %+v %v, want a wait of more than a minute (the last grant is kept)", res, err)
	}
}
