package cluster

import (
	"testing"

	"github.com/permitd/permitd/transport/client"
)

// TestObserverSnapshotInstalls: a node seen needing an entry that no other
// node still has, then seen with a snapshot past that gap, installed a
// snapshot; a node that lags within the others' logs did not; leadership
// changes are recorded once each.
func TestObserverSnapshotInstalls(t *testing.T) {
	o := &Observer{last: LeaderChange{Leader: "?"}, behind: map[string]SnapshotInstall{}}
	st := func(state string, term, first, last, snap uint64) client.Status {
		return client.Status{State: state, Term: term, FirstLogIndex: first, LastLogIndex: last, LastSnapshotIndex: snap}
	}
	// n3 lags (last 40) but the leader still has entry 41 onwards: no install.
	o.Observe(1, map[string]client.Status{"n1": st("leader", 2, 30, 100, 90), "n2": st("follower", 2, 30, 100, 90), "n3": st("follower", 2, 1, 40, 0)})
	o.Observe(2, map[string]client.Status{"n1": st("leader", 2, 30, 120, 90), "n2": st("follower", 2, 30, 120, 90), "n3": st("follower", 2, 1, 120, 0)})
	if got := o.SnapshotInstalls(); len(got) != 0 {
		t.Fatalf("installs %+v, want none", got)
	}
	// n3 isolated at 120 while the others compact past it.
	o.Observe(3, map[string]client.Status{"n1": st("leader", 2, 150, 200, 190), "n2": st("follower", 2, 150, 200, 190), "n3": st("follower", 3, 1, 120, 0)})
	o.Observe(4, map[string]client.Status{"n1": st("leader", 2, 150, 210, 190), "n2": st("follower", 2, 150, 210, 190), "n3": st("follower", 4, 1, 120, 0)})
	if got := o.SnapshotInstalls(); len(got) != 0 {
		t.Fatalf("installs while still behind: %+v", got)
	}
	o.Observe(5, map[string]client.Status{"n1": st("leader", 5, 150, 220, 190), "n2": st("follower", 5, 150, 220, 190), "n3": st("follower", 5, 0, 190, 190)})
	got := o.SnapshotInstalls()
	if len(got) != 1 || got[0].Node != "n3" || got[0].BehindNanos != 3 || got[0].CaughtUpNanos != 5 || got[0].SnapshotIndex != 190 || got[0].OthersFirstIndex != 150 {
		t.Fatalf("installs %+v, want n3 behind at 3, caught up at 5 with snapshot 190", got)
	}
	changes := o.LeaderChanges()
	if len(changes) != 2 || changes[0].Leader != "n1" || changes[1].Term != 5 {
		t.Fatalf("leader changes %+v", changes)
	}
}
