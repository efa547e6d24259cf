package node

import (
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

// TestStatusCountsReserveEntries: a leader's Status counts the reserve
// entries it committed, the reserves they carried and their commit time
// (what bench --mode overload reads around its phases); a follower's
// stay 0. Without the count in the batcher, every delta is 0.
func TestStatusCountsReserveEntries(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, "api", strictConfig(t, time.Millisecond, 5)); return err })
	before := l.Status()
	const reserves = 5
	for range reserves {
		if _, err := l.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	after := l.Status()
	batches := after.ReserveBatches - before.ReserveBatches
	if batches < 1 || batches > reserves || after.BatchedReserves-before.BatchedReserves != reserves || after.ReserveBatchNanos <= before.ReserveBatchNanos {
		t.Errorf("after %d reserves one at a time: %d entries carrying %d reserves in %d ns; want 1-%d entries carrying %d, in more than 0 ns",
			reserves, batches, after.BatchedReserves-before.BatchedReserves, after.ReserveBatchNanos-before.ReserveBatchNanos, reserves, reserves)
	}
	for _, n := range c.nodes {
		if n == l {
			continue
		}
		if st := n.Status(); st.ReserveBatches != 0 || st.BatchedReserves != 0 || st.ReserveBatchNanos != 0 {
			t.Errorf("follower %s counts %d entries, %d reserves, %d ns; want 0 (only a leader commits reserve entries)", st.ID, st.ReserveBatches, st.BatchedReserves, st.ReserveBatchNanos)
		}
	}
}
