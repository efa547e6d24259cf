package worker

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDroppedStealMessagesLosePermitsNeverCreateThem runs the fleet with
// 40 % of steal requests and 40 % of steal answers dropped and the rest
// delayed up to 20 ms (in the worker on the fake register, in a fault
// layer on memberlist's transport on the cluster), 5 ms of latency each
// way to the register, a worker whose register answers are lost for a
// while (applied, but the worker never hears), and group C cut off from
// the register (so it lives on stolen permits until its steal grace
// ends). Then:
//
//   - the fleet received no more stolen permits than it gave (a dropped
//     answer loses what it carried);
//   - it spent no more than the register minted, within the over-grant
//     bound in every window;
//   - every permit was handed out while its grant was live at the
//     register: before the renew or return reporting on it was applied
//     and before its expiry (the donor's grant's expiry for stolen ones).
//
// It runs on the pool of the other tests (C = O = 300, one TTL of
// permits: the bound is loose) and on a tight pool (C = O = 60, TTL
// 150 ms renewed every 50 ms) where the fleet runs close to C + O, with
// the fake register, and on the default pool with a real 3-node raft
// register (poolSpecs).
func TestDroppedStealMessagesLosePermitsNeverCreateThem(t *testing.T) {
	for _, tc := range poolSpecs() {
		t.Run(tc.name, func(t *testing.T) { droppedSteals(t, tc.spec) })
	}
}

func droppedSteals(t *testing.T, spec fleetSpec) {
	var (
		mu                            sync.Mutex
		rng                           = rand.New(rand.NewPCG(7, 11))
		dropped, droppedAnswers, sent atomic.Int64
	)
	fault := func(from, to string, reply bool) (bool, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		sent.Add(1)
		if rng.Float64() < 0.4 {
			dropped.Add(1)
			if reply {
				droppedAnswers.Add(1)
			}
			return true, 0
		}
		return false, time.Duration(rng.Int64N(int64(20 * time.Millisecond)))
	}
	// The fleets on the fake register drop steal messages in the worker,
	// the fleet on the cluster in memberlist's transport.
	if spec.register == clusterKind {
		spec.transportFault = fault
	} else {
		spec.stealFault = fault
	}
	f := startFleet(t, spec)
	for _, l := range f.links {
		l.latency.Store(int64(5 * time.Millisecond))
	}
	f.drive()
	isC := f.inGroup("C")
	waitFor(t, 5*time.Second, "3 renewals each", func() bool { return f.minRenewals(all) >= 3 })

	// a1's answers are lost for two TTLs: its renewals are applied, it
	// retries them with the same request ID and meanwhile spends nothing
	// of the grants it reported on.
	f.links[0].loseAnswers.Store(true)
	for i := range f.workers {
		if isC(i) {
			f.links[i].cut.Store(true)
		}
	}
	cutAt := f.nowNanos()
	waitFor(t, 3*time.Second, "two TTLs of faults", func() bool { return f.nowNanos() > cutAt+int64(2*spec.ttl) })
	f.links[0].loseAnswers.Store(false)
	waitFor(t, 3*time.Second, "C's steal grace to end", func() bool { return f.nowNanos() > cutAt+int64(3*spec.ttl) })
	for i := range f.workers {
		f.links[i].cut.Store(false)
	}
	healAt := f.nowNanos()
	waitFor(t, 3*time.Second, "everyone renewing again", func() bool {
		return f.nowNanos() > healAt+int64(2*spec.renew) && f.minRenewals(all) > 0
	})
	f.stopDrivers()

	in, out := f.stealTotals()
	t.Logf("steal messages: %d sent, %d dropped (%d answers); permits stolen out %d, in %d: %d lost with dropped answers",
		sent.Load(), dropped.Load(), droppedAnswers.Load(), out, in, out-in)
	if in > out {
		t.Errorf("the fleet received %d stolen permits, more than it gave (%d)", in, out)
	}
	if dropped.Load() == 0 {
		t.Errorf("no steal message was dropped: the test exercised nothing")
	}
	if spec.transportFault != nil {
		g := &f.gossipFaults
		t.Logf("memberlist transport: %d steal messages seen, %d dropped (%d answers)", g.sent.Load(), g.dropped.Load(), g.droppedReplies.Load())
		if g.dropped.Load() == 0 {
			t.Errorf("the transport's fault layer dropped no steal message")
		}
	}
	for i, w := range f.workers {
		s := w.Stats()
		if s.SpentStolenPermits > s.StolenInPermits {
			t.Errorf("%s spent %d stolen permits but received %d", spec.workers[i].name, s.SpentStolenPermits, s.StolenInPermits)
		}
	}
	if fails := f.workers[0].Stats().RegisterFails; fails == 0 {
		t.Errorf("a1 saw no failed register call: the lost answers exercised nothing")
	}
	f.checkGrants()
	f.checkBound()
}
