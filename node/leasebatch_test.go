package node

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

// TestConcurrentLeaseCommandsShareEntries: 64 holders open leases and
// renew them all at once, through the leader and through a follower. The
// leader batches the lease commands that arrive while earlier ones commit
// (CmdLeaseBatch), so the log grows by fewer entries than commands, and
// every holder gets its own answer: a grant of its own lease, renewed at
// the next epoch, with the pool's accounts conserved.
func TestConcurrentLeaseCommandsShareEntries(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.followers(l)[0]
	ctx := ctxTimeout(t, 60*time.Second)
	const holders = 64
	const ttl = int64(20 * time.Second)
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, "api", strictConfig(t, time.Millisecond, 5)); return err })
	retryNoLeader(t, func() error {
		_, err := l.PutLeasePolicy(ctx, fsm.LeasePolicy{Limit: "api", Leased: true})
		return err
	})
	before := l.raft.AppliedIndex()

	grants := make([]fsm.LeaseResult, holders)
	run := func(what string, op func(i int, n *Node) (fsm.LeaseResult, error)) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, holders)
		for i := range holders {
			n := l
			if i%2 == 1 {
				n = f
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := op(i, n)
				if err == nil && res.Status != fsm.LeaseGranted {
					err = fmt.Errorf("answered %+v", res)
				}
				if err != nil {
					errs <- fmt.Errorf("%s %d: %w", what, i, err)
					return
				}
				grants[i] = res
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run("lease", func(i int, n *Node) (fsm.LeaseResult, error) {
		return n.Lease(ctx, fsm.Lease{Limit: "api", Holder: fmt.Sprintf("h%d", i), Group: fmt.Sprintf("g%d", i%4), Weight: 1,
			DemandMilliPermitsPerSec: 10_000, TTLNanos: ttl, RequestID: fmt.Sprintf("open-%d", i)})
	})
	ids := map[uint64]bool{}
	for i, g := range grants {
		if ids[g.LeaseID] || g.Epoch != 1 {
			t.Fatalf("holder %d: grant %+v (lease IDs must be distinct, epoch 1)", i, g)
		}
		ids[g.LeaseID] = true
	}
	opened := append([]fsm.LeaseResult(nil), grants...)
	run("renew", func(i int, n *Node) (fsm.LeaseResult, error) {
		g := opened[i]
		return n.Renew(ctx, fsm.Renew{Report: fsm.Report{Limit: "api", LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: g.Permits},
			DemandMilliPermitsPerSec: 10_000, TTLNanos: ttl, RequestID: fmt.Sprintf("renew-%d", i)})
	})
	for i, g := range grants {
		if g.LeaseID != opened[i].LeaseID || g.Epoch != 2 {
			t.Fatalf("holder %d: renewed to %+v, want lease %d at epoch 2", i, g, opened[i].LeaseID)
		}
	}
	entries := l.raft.AppliedIndex() - before
	if entries >= 2*holders {
		t.Fatalf("%d lease commands took %d log entries: none were batched", 2*holders, entries)
	}
	pool, _, err := l.LeaseView(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	if pool.MintedPermits != pool.FreePermits+pool.OutstandingPermits+pool.SettledPermits {
		t.Fatalf("pool accounts not conserved: %+v", pool)
	}
	t.Logf("%d lease commands in %d log entries", 2*holders, entries)
}
