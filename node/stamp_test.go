package node

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestStampHeldAcrossLeadershipChangesPassesNoTime: a leader A stamps an
// entry, then loses and regains the leadership (A→B→A) before the entry is
// appended. A's old timeline kept counting while B led from the last
// applied time, so the held stamp lies ahead of the cluster timeline;
// applied as is it would move cluster time ahead of real time and grant a
// permit right after B's. The entry carries the term it was stamped in,
// raft appends it in A's new term, and the register decides it as if no
// time had passed.
func TestStampHeldAcrossLeadershipChangesPassesNoTime(t *testing.T) {
	c := newTestCluster(t, 3)
	a := c.leader()
	ctx := ctxTimeout(t, 60*time.Second)
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: 200 * time.Millisecond, MaxReserved: 5, Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := a.PutLimit(ctx, fsm.PutLimit{Name: "s", Config: cfg}); return err })
	if res, err := a.Reserve(ctx, fsm.Reserve{Limit: "s", Permits: 1, MaxWaitNanos: int64(time.Second)}); err != nil || res.Status != fsm.Granted {
		t.Fatalf("first permit: %+v %v", res, err)
	}
	// Let A's timeline run two seconds past the last applied entry, then
	// stamp an entry and hold it.
	applied := a.fsm.LastNowNanos()
	var held fsm.Stamp
	waitFor(t, 10*time.Second, "A's timeline 2 s past the last entry", func() bool {
		st, _, ok := a.stampForApply()
		held = st
		return ok && st.Nanos-applied >= int64(2*time.Second)
	})
	entry, err := fsm.AppendReserveBatch(nil, held, []fsm.Reserve{{Limit: "s", Permits: 1, ArrivedNanos: held.Nanos}})
	if err != nil {
		t.Fatal(err)
	}

	// A → B: B continues the timeline from the last applied entry and
	// grants the next permit.
	var b *Node
	for _, f := range c.followers(a) {
		b = f
		break
	}
	retryNoLeader(t, func() error { return a.TransferLeadership(ctx, b.ID()) })
	waitFor(t, 10*time.Second, "B leading", func() bool { return b.timeline.isActive() })
	if res, err := b.Reserve(ctx, fsm.Reserve{Limit: "s", Permits: 1, MaxWaitNanos: int64(time.Second)}); err != nil || res.Status != fsm.Granted {
		t.Fatalf("B's permit: %+v %v", res, err)
	}
	// B → A.
	retryNoLeader(t, func() error { return b.TransferLeadership(ctx, a.ID()) })
	waitFor(t, 10*time.Second, "A leading again", func() bool { return a.timeline.isActive() })
	_, term, _, _ := a.timeline.stamp()
	if term == held.Term {
		t.Fatalf("A leads in term %d again: the transfers did not change the term", term)
	}
	before := a.fsm.LastNowNanos()
	if before >= held.Nanos {
		t.Skipf("the cluster timeline (%d) caught up with the held stamp (%d): the transfers took too long to show anything", before, held.Nanos)
	}

	f := a.raft.Apply(entry, 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatalf("apply the held entry: %v", err)
	}
	res := f.Response().([]fsm.ReserveResult)[0]
	if got := a.fsm.LastNowNanos(); got >= held.Nanos || res.NowNanos != before || res.OnArrival {
		t.Fatalf("held entry (stamped at %d in term %d, appended in term %d) decided at %d (on arrival %v), timeline %d → %d: "+
			"a stamp from another term moved cluster time ahead", held.Nanos, held.Term, a.raft.CurrentTerm(), res.NowNanos, res.OnArrival, before, got)
	}
	if res.Status == fsm.Granted && res.WaitNanos == 0 {
		t.Fatalf("the held reserve was granted at once right after B's permit: %+v", res)
	}
	if a.raft.State() != raft.Leader {
		t.Logf("A lost the leadership meanwhile (harmless)")
	}
}
