package worker

import (
	"testing"
	"time"
)

// TestLeaderKillDuringRenewals crashes the leader of a real 3-node
// register while the fleet renews (a call is under way at the instant of
// the kill), with the answers to a1 lost from just before the kill until
// the new leader has served a renewal period (its renewals are applied,
// it retries them with the same request ID, and the new leader answers
// from the replicated dedup table). Then:
//
//   - no lease is granted twice: every (lease, epoch) was granted by at
//     most one fresh answer, and by exactly one entry of the committed
//     log of each surviving node (replayed into a fresh FSM, which also
//     checks minted = free + outstanding + settled after every entry);
//     every grant a worker spent from is in that log with the permits the
//     worker was told;
//   - no permit is spent twice: the fleet handed out of each grant (its
//     holder and the peers that stole from it) at most its permits, each
//     while the grant was live at the register, and within
//     C + O + floor(W/I) + 1 in every window;
//   - the fleet goes on after the new leader is elected: every group
//     spends again and every worker renews or leases again.
func TestLeaderKillDuringRenewals(t *testing.T) {
	spec := baseSpec()
	spec.register = clusterKind
	// Longer than the other tests: grants outlive the election (about a
	// second, counted in cluster time since the new leader counts it), so
	// the new leader renews the leases the old one granted.
	spec.ttl, spec.renew = 3*time.Second, 200*time.Millisecond
	f := startFleet(t, spec)
	reg := f.reg.(*clusterRegister)
	f.drive()
	waitFor(t, 5*time.Second, "3 renewals each", func() bool { return f.minRenewals(all) >= 3 })

	before := make([]Stats, len(f.workers))
	for i, w := range f.workers {
		before[i] = w.Stats()
	}
	old := reg.leader()
	f.links[0].loseAnswers.Store(true)
	waitFor(t, 2*time.Second, "a register call under way", func() bool { return reg.inFlight.Load() > 0 })
	killAt := f.nowNanos()
	reg.kill(old)
	now := reg.leader()
	readyAt := f.nowNanos()
	t.Logf("killed leader %s; %s leads %v later", reg.ids[old], reg.ids[now], time.Duration(readyAt-killAt))
	if now == old {
		t.Fatalf("the killed node still leads")
	}
	// One renewal period under the new leader, then a1 hears again.
	waitFor(t, 3*time.Second, "a renewal period under the new leader", func() bool { return f.nowNanos() > readyAt+int64(spec.renew) })
	f.links[0].loseAnswers.Store(false)
	waitFor(t, 5*time.Second, "every worker renewing again", func() bool {
		for i, w := range f.workers {
			s := w.Stats()
			if s.Renewals+s.Leases < before[i].Renewals+before[i].Leases+2 {
				return false
			}
		}
		return true
	})
	for _, g := range []string{"A", "B", "C"} {
		waitFor(t, 3*time.Second, "group "+g+" spending under the new leader", func() bool {
			return f.spent(f.inGroup(g), readyAt, f.nowNanos()) > 0
		})
	}
	f.stopDrivers()
	var fenced, fails uint64
	for i, w := range f.workers {
		s := w.Stats()
		fenced += s.Fenced - before[i].Fenced
		fails += s.RegisterFails - before[i].RegisterFails
	}
	t.Logf("after the kill: %d failed register calls, %d fenced answers; a1 failed %d calls", fails, fenced, f.workers[0].Stats().RegisterFails-before[0].RegisterFails)
	if f.workers[0].Stats().RegisterFails == before[0].RegisterFails {
		t.Errorf("a1 saw no failed register call: the lost answers exercised nothing")
	}
	f.checkGrants()
	f.checkBound()

	// Return every lease, then audit the committed log.
	f.shutdown()
	reg.checkAnswers(t)
	logged := reg.replayLog(t, testLimit)
	handed := map[grantKey]int64{}
	for _, log := range f.logs {
		log.mu.Lock()
		for _, s := range log.grants {
			handed[s.key] += s.n
		}
		log.mu.Unlock()
	}
	for k, n := range handed {
		lg, ok := logged[k]
		if !ok {
			t.Errorf("the fleet spent %d permits of grant %+v, which no surviving log holds", n, k)
			continue
		}
		if g, _ := reg.grant(k); g.permits != lg.permits {
			t.Errorf("grant %+v: the workers were told %d permits, the log granted %d", k, g.permits, lg.permits)
		}
		if n > lg.permits {
			t.Errorf("the fleet spent %d permits of grant %+v, which the log granted %d", n, k, lg.permits)
		}
	}
	t.Logf("the committed log holds %d grants; the fleet spent from %d of them", len(logged), len(handed))
}
