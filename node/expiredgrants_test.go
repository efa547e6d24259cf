package node

import (
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestGrantsAnsweredAsRefusalsCountAsRefusals: a grant whose permit
// expired while a node held its answer leaves as a refusal, and the
// register's counters then count it as a refusal, not a grant, on every
// replica (the issue: a strict limit at 1 000/s answered three reserves
// 429 while its counters showed 3 granted). Here every grant expires a
// nanosecond after its slot, so every answer the leader sends, for its
// own reserves and for a follower's, is a refusal.
func TestGrantsAnsweredAsRefusalsCountAsRefusals(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	// One permit a microsecond, usable for a nanosecond: each reserve,
	// sent after the previous one's answer (a commit, far more than a
	// microsecond, apart), gets the slot of its own arrival, which has
	// expired before any answer leaves. (At 1 000/s a fast machine
	// answered within the millisecond, and the next reserve got a slot
	// still ahead, usable when its answer left: a grant.)
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1_000_000, MaxReserved: 10, Expiry: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "rps", Config: cfg}); return err })
	f := c.followers(l)[0]
	for i, n := range []*Node{l, l, l, f, f} {
		res, err := n.Reserve(ctx, fsm.Reserve{Limit: "rps", Permits: 1, MaxWaitNanos: int64(time.Second)})
		if err != nil || res.Status != fsm.Refused {
			t.Fatalf("reserve %d: %+v, %v; want a refusal (the grant expired before its answer left)", i, res, err)
		}
	}
	for _, n := range append([]*Node{l}, c.followers(l)...) {
		waitFor(t, 10*time.Second, "every replica to count the 5 refusals", func() bool {
			info, ok := n.fsm.Limit("rps")
			return ok && info.GrantedRequests == 0 && info.GrantedPermits == 0 && info.RefusedRequests == 5 && info.ExpiredRequests == 5
		})
	}
	if st := l.Status(); st.ExpiredGrants != 5 || st.ExpiredGrantsUnreported != 0 {
		t.Errorf("leader status: %d expired grants, %d unreported; want 5 and 0", st.ExpiredGrants, st.ExpiredGrantsUnreported)
	}
}

// TestFollowerReportsAGrantThatExpiredWhileItHeldIt: the leader answers a
// forwarded reserve with a grant that is still usable, the follower holds
// it past its expiry (a stall), answers a refusal and reports it with the
// index of the entry that decided it: the register counts a refusal.
func TestFollowerReportsAGrantThatExpiredWhileItHeldIt(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 10, MaxReserved: 10, Expiry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "slow", Config: cfg}); return err })
	f := c.followers(l)[0]
	f.testHoldRelayed = func() { time.Sleep(100 * time.Millisecond) }
	res, err := f.Reserve(ctx, fsm.Reserve{Limit: "slow", Permits: 1})
	if err != nil || res.Status != fsm.Refused {
		t.Fatalf("reserve through the stalled follower: %+v, %v; want a refusal", res, err)
	}
	waitFor(t, 10*time.Second, "the register to count the refusal", func() bool {
		info, ok := l.fsm.Limit("slow")
		return ok && info.GrantedRequests == 0 && info.RefusedRequests == 1 && info.ExpiredRequests == 1
	})
	if st := f.Status(); st.ExpiredGrants != 1 || st.ExpiredGrantsUnreported != 0 {
		t.Errorf("follower status: %d expired grants, %d unreported; want 1 and 0", st.ExpiredGrants, st.ExpiredGrantsUnreported)
	}
}
