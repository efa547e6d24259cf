package fsm

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// leaseState returns a harness whose state has every kind of lease record:
// two leased limits (one without leases), a linearized one, active leases
// with and without lingering permits, a returned lease still lingering, and
// dedup records of every lease outcome.
func leaseState(t testing.TB) *harness {
	h := newHarness(t)
	h.check = checkLeaseBook
	h.put(0, "hot", hot(t))
	h.put(0, "idle", strict(t, 50, 0))
	h.put(0, "lin", strict(t, 5, 3))
	h.put(0, "slow", strict(t, 1.0/120, 0))
	h.policy(0, LeasePolicy{Limit: "hot", Leased: true, BurstPermits: 500, MaxOutstandingPermits: 400})
	h.policy(0, LeasePolicy{Limit: "idle", Leased: true})
	h.reserve1(0, rsv("lin", 1, 0, "reserve-1"))
	h.noop(sec)
	a := h.lease(sec, Lease{Limit: "hot", Holder: "a1", Group: "alpha", Weight: 2, DemandMilliPermitsPerSec: 300_500, TTLNanos: sec, RequestID: "lease-a1"})
	b := h.lease(sec, Lease{Limit: "hot", Holder: "b1", Group: "beta", Weight: 1, DemandMilliPermitsPerSec: 900_000, TTLNanos: 2 * sec, RequestID: "lease-b1"})
	h.lease(sec+ms, Lease{Limit: "hot", Holder: "a1", Group: "alpha", Weight: 2, TTLNanos: sec, RequestID: "refused"})
	h.lease(sec+ms, Lease{Limit: "gone", Holder: "a1", Group: "alpha", Weight: 2, TTLNanos: sec, RequestID: "unknown"})
	h.lease(sec+ms, Lease{Limit: "lin", Holder: "a1", Group: "alpha", Weight: 2, TTLNanos: sec, RequestID: "invalid"})
	h.renew(sec+ms, Renew{Report: Report{Limit: "hot", LeaseID: a.LeaseID, Epoch: 7}, TTLNanos: sec, RequestID: "fenced"})
	a = h.renew(sec+100*ms, Renew{Report: Report{Limit: "hot", LeaseID: a.LeaseID, Epoch: a.Epoch, SpentPermits: 10, StolenOutPermits: 5, StolenInPermits: 2}, DemandMilliPermitsPerSec: 250_000, TTLNanos: sec, RequestID: "renew-a1"})
	h.ret(sec+200*ms, Return{Report: Report{Limit: "hot", LeaseID: b.LeaseID, Epoch: b.Epoch, SpentPermits: 1, StolenOutPermits: 3}, RequestID: "return-b1"})
	h.lease(sec+300*ms, Lease{Limit: "hot", Holder: "c1", Group: "beta", Weight: 3, DemandMilliPermitsPerSec: 123_456, TTLNanos: 300 * ms})
	h.noop(sec + 400*ms)
	return h
}

func TestLeaseSnapshotRoundTrip(t *testing.T) {
	h := leaseState(t)
	if ls := h.f.Leases("hot"); len(ls) != 3 || ls[1].Active || ls[1].LingeringPermits != 3 || ls[0].LingeringPermits != 5 {
		t.Fatalf("weak test: leases %+v", ls)
	}
	h.f.mu.RLock()
	entitled := false
	for _, l := range h.f.st.limits["hot"].pool.leases {
		entitled = entitled || l.entitled > 0 || l.entitledRem > 0
	}
	h.f.mu.RUnlock()
	if !entitled {
		t.Fatalf("weak test: no lease holds an entitlement")
	}
	snap := snapshotBytes(t, h.f)
	g := restoreByteIdentical(t, h.f, snap)
	for _, name := range []string{"hot", "idle", "lin"} {
		if !reflect.DeepEqual(g.Leases(name), h.f.Leases(name)) {
			t.Fatalf("%s: restored leases %+v, want %+v", name, g.Leases(name), h.f.Leases(name))
		}
		p1, ok1 := h.f.LeasePool(name)
		p2, ok2 := g.LeasePool(name)
		if p1 != p2 || ok1 != ok2 {
			t.Fatalf("%s: restored pool %+v, want %+v", name, p2, p1)
		}
	}
	checkLeaseBook(t, g)
	// Both continue identically, through the random lease traffic.
	hg := &harness{t: t, f: g, index: h.index, check: checkLeaseBook}
	sim := newLeaseSim(h, 42)
	sim.now = h.f.LastNowNanos()
	for range 600 {
		b := sim.entry()
		r1, r2 := h.apply(b), hg.apply(b)
		if !reflect.DeepEqual(r1, r2) {
			t.Fatalf("index %d: original %+v, restored %+v", h.index, r1, r2)
		}
		sim.observe(b, r1)
	}
	if h.f.StateHash() != g.StateHash() {
		t.Fatalf("original and restored FSMs diverged")
	}
}

// TestLeaseReplicasAgree feeds the same log of lease traffic mixed with
// reserves and puts to two FSMs, and to a third that restores the first's
// snapshot half way, and checks that they agree byte for byte.
func TestLeaseReplicasAgree(t *testing.T) {
	for seed := range uint64(3) {
		a, b, c := leased(t, 200, 300), leased(t, 200, 300), leased(t, 200, 300)
		sim := newLeaseSim(a, seed)
		other := randomLog(t, seed, 400)
		for i := range 1200 {
			var e []byte
			if i%3 == 2 {
				e = other[i/3]
			} else {
				e = sim.entry()
			}
			ra, rb := a.apply(e), b.apply(e)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("seed %d entry %d: results differ: %+v vs %+v", seed, i, ra, rb)
			}
			sim.observe(e, ra)
			switch {
			case i == 600:
				if err := restore(c.f, snapshotBytes(t, a.f)); err != nil {
					t.Fatal(err)
				}
				c.index = a.index
			case i > 600:
				if rc := c.apply(e); !reflect.DeepEqual(ra, rc) {
					t.Fatalf("seed %d entry %d: restored replica %+v, want %+v", seed, i, rc, ra)
				}
			}
		}
		if a.f.StateHash() != b.f.StateHash() || a.f.StateHash() != c.f.StateHash() {
			t.Fatalf("seed %d: replicas disagree", seed)
		}
		if p, _ := a.f.LeasePool("hot"); p.LeasesOpened == 0 || p.Renewals == 0 {
			t.Fatalf("seed %d: weak test: %+v", seed, p)
		}
	}
}

// TestLeaseRestoreRejects corrupts the lease book of a valid state in ways
// a checksum cannot catch and checks that Restore rejects each.
func TestLeaseRestoreRejects(t *testing.T) {
	snap := snapshotBytes(t, leaseState(t).f)
	tests := []struct {
		desc   string
		mutate func(s *state)
		want   string
	}{
		{"unbalanced accounts", func(s *state) { s.limits["hot"].pool.minted++ }, "free + outstanding + settled"},
		{"outstanding not held", func(s *state) { s.limits["hot"].pool.outstanding++; s.limits["hot"].pool.minted++ }, "its leases hold"},
		{"active lease already expired", func(s *state) { s.lastNowNanos = sec + 650*ms }, "before last now"},
		{"lease id beyond the counter", func(s *state) { s.lastLeaseID = 1 }, "at most the last lease id"},
		{"holder twice", func(s *state) {
			ls := s.limits["hot"].pool.leases
			ls[2].holder = ls[0].holder
		}, "holds leases"},
		{"inactive lease with nothing lingering", func(s *state) {
			p := s.limits["hot"].pool
			p.outstanding -= 3
			p.stolen += 3
			p.leases[1].linger = nil
		}, "nothing lingering"},
		{"epoch 0", func(s *state) { s.limits["hot"].pool.leases[0].epoch = 0 }, "epoch 0"},
		{"weight 0", func(s *state) { s.limits["hot"].pool.leases[0].weight = 0 }, "out of range"},
		{"TTL too long", func(s *state) {
			l := s.limits["hot"].pool.leases[0]
			l.expiresAtNanos = l.grantedAtNanos + MaxLeaseTTLNanos + 1
		}, "for a TTL"},
		{"entitlement beyond the grant's TTL", func(s *state) {
			l := s.limits["hot"].pool.leases[0]
			l.entitled = l.expiresAtNanos - l.grantedAtNanos + 1
		}, "entitled"},
		{"entitlement remainder of a whole permit", func(s *state) { s.limits["hot"].pool.leases[0].entitledRem = milliPermitsPerSecNanos },
			"remainder"},
		{"entitlement without a share", func(s *state) {
			l := s.limits["hot"].pool.leases[0]
			l.share, l.entitled = 0, 1
		}, "both 0 with share 0"},
		{"pool of a limit too slow to lease", func(s *state) {
			s.limits["slow"].pool = &leasePool{byHolder: map[string]*lease{}}
			s.pooled.insert(s.limits["slow"])
		},
			"slower than one per lease TTL"},
	}
	for _, tt := range tests {
		g := New()
		if err := restore(g, snap); err != nil {
			t.Fatal(err)
		}
		tt.mutate(&g.st)
		bad := g.st.appendSnapshot(nil)
		err := restore(New(), bad)
		if err == nil || !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Restore error %v, want ErrDecode containing %q", tt.desc, err, tt.want)
		}
	}
}

// TestLeaseRestoreMutations flips every bit of a lease-rich snapshot's
// body (fixing the checksum): Restore must reject the result or accept
// exactly its bytes, with a consistent lease book.
func TestLeaseRestoreMutations(t *testing.T) {
	restoreMutations(t, snapshotBytes(t, leaseState(t).f), func(f *FSM) { checkConservation(t, f) })
}

// checkConservation checks what Restore guarantees of any accepted
// snapshot: the lease book's invariants except the capacity ones, which a
// snapshot taken right after a policy change may exceed.
func checkConservation(t testing.TB, f *FSM) {
	t.Helper()
	checkBook(t, f, false)
}

// TestLeaseConcurrentReads runs the lease read API against Apply and
// Snapshot (run with -race).
func TestLeaseConcurrentReads(t *testing.T) {
	h := leased(t, 300, 300)
	h.check = nil
	sim := newLeaseSim(h, 5)
	stop := readConcurrently(2, func() {
		_ = h.f.Leases("hot")
		_, _ = h.f.LeasePool("hot")
		_, _, _, _ = h.f.LeaseAccounts("hot")
		_ = h.f.StateHash()
	})
	for i := range 600 {
		b := sim.entry()
		sim.observe(b, h.apply(b))
		if i%100 == 0 {
			snapshotBytes(t, h.f)
		}
	}
	stop()
}

// TestLeaseStateHashIsSnapshotHash checks StateHash with a lease book.
func TestLeaseStateHashIsSnapshotHash(t *testing.T) {
	h := leaseState(t)
	if h.f.StateHash() != sha256.Sum256(snapshotBytes(t, h.f)) {
		t.Fatal("StateHash is not the SHA-256 of the snapshot")
	}
	if fmt.Sprint(h.f.Leases("nope")) != "[]" {
		t.Fatalf("Leases of a missing limit = %v", h.f.Leases("nope"))
	}
}
