package node

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

// TestStatusCountsReserveEntries: a leader's Status counts the reserve
// entries it saw applied, the reserves they carried and their time from
// submission to applied, exactly as Config.OnBatch is told of them (what
// bench --mode overload reads around its phases); a follower's stay 0.
// Concurrent reserves share entries, so a count of entries in place of
// reserves fails it, as does no count at all.
func TestStatusCountsReserveEntries(t *testing.T) {
	var hookBatches, hookReserves, hookNanos atomic.Uint64
	c := newTestClusterWithConfig(t, 3, func(cfg *Config) {
		cfg.OnBatch = func(size int, took time.Duration) {
			hookBatches.Add(1)
			hookReserves.Add(uint64(size))
			hookNanos.Add(uint64(took))
		}
	})
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: strictConfig(t, time.Microsecond, 1000)})
		return err
	})
	before := l.Status()
	b0, r0, n0 := hookBatches.Load(), hookReserves.Load(), hookNanos.Load()
	const callers, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := l.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := l.Status()
	batches := after.ReserveBatches - before.ReserveBatches
	reserves := after.BatchedReserves - before.BatchedReserves
	nanos := after.ReserveBatchNanos - before.ReserveBatchNanos
	if reserves != callers*each {
		t.Errorf("%d reserves counted; want the %d reserved", reserves, callers*each)
	}
	if batches != hookBatches.Load()-b0 || reserves != hookReserves.Load()-r0 || nanos != hookNanos.Load()-n0 {
		t.Errorf("counted %d entries, %d reserves, %d ns; OnBatch was told %d, %d, %d", batches, reserves, nanos,
			hookBatches.Load()-b0, hookReserves.Load()-r0, hookNanos.Load()-n0)
	}
	if batches == 0 || batches >= reserves || nanos == 0 {
		t.Errorf("%d entries for %d concurrent reserves in %d ns; want fewer entries than reserves (they share entries), in more than 0 ns", batches, reserves, nanos)
	}
	for _, n := range c.nodes {
		if n == l {
			continue
		}
		if st := n.Status(); st.ReserveBatches != 0 || st.BatchedReserves != 0 || st.ReserveBatchNanos != 0 {
			t.Errorf("follower %s counts %d entries, %d reserves, %d ns; want 0 (only a leader submits reserve entries)", st.ID, st.ReserveBatches, st.BatchedReserves, st.ReserveBatchNanos)
		}
	}
}
