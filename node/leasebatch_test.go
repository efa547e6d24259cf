package node

import "testing"

// TestConcurrentLeaseCommandsShareEntries: 64 holders open leases and
// renew them all at once, through the leader and through a follower. The
// leader batches the lease commands that arrive while earlier ones commit
// (CmdLeaseBatch), so the log grows by fewer entries than commands, and
// every holder gets its own answer: a grant of its own lease, renewed at
// the next epoch, with the pool's accounts conserved.
func TestConcurrentLeaseCommandsShareEntries(t *testing.T) {
	l, f, ctx := leasedCluster(t)
	const holders = 64
	before := l.raft.AppliedIndex()
	openAndRenewAll(t, ctx, func(i int) *Node {
		if i%2 == 1 {
			return f
		}
		return l
	}, holders)
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
