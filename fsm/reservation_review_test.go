package fsm

import (
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// Tests written during the review of the reservation changes (multi.go,
// settle.go, reservationsnapshot.go). Each states a documented property
// the code does not keep.

// TestRefusedMultiLimitRestoresACommittedInFlightCap: doc.go, step 3 of
// "Reservations": when a limit refuses at t*, "the parts already
// committed are restored byte for byte". An in-flight cap committed
// before a later cap refuses (here: the later cap's holds would carry
// more than bucket.MaxInFlightLimit permits in all, a refusal its Query
// does not foresee) is undone by multi.go's undoCommitted with
// Release(expiry-1, expiry, n): that moves the cap's clock to expiry-1
// (about t* + its TTL) and drops every hold lapsing before it. The
// refused reserve changes the cap's state, and the cap then refuses
// every request until that far-future clock time although it has room.
func TestRefusedMultiLimitRestoresACommittedInFlightCap(t *testing.T) {
	h := newHarness(t)
	h.put(0, "a", concurrency(t, 2, time.Second))
	h.put(0, "b", concurrency(t, bucket.MaxInFlightLimit, 10*time.Second))
	if res := h.reserve1(0, tracked(0, Part{"b", bucket.MaxInFlightLimit})); res.Status != Granted {
		t.Fatalf("filling b: %+v", res)
	}
	if res := h.reserve1(0, tracked(0, Part{"a", 1})); res.Status != Granted {
		t.Fatalf("one of a's two: %+v", res)
	}
	before := pacerState(h, "a")
	// b is full until its hold lapses at 10 s: a reserve that may not
	// wait is refused naming b (one that may waits in b's queue, below),
	// and no cap commits anything before every cap fits.
	res := h.reserve1(sec/2, tracked(0, Part{"a", 1}, Part{"b", bucket.MaxInFlightLimit}))
	if res.Status != Refused || res.Blocking != "b" {
		t.Fatalf("got %+v, want refused by b", res)
	}
	if after := pacerState(h, "a"); after != before {
		t.Errorf("a refused multi-limit reserve changed the cap a:\nbefore %x\nafter  %x", before, after)
	}
	res = h.reserve1(sec/2, tracked(20*sec, Part{"a", 1}, Part{"b", bucket.MaxInFlightLimit}))
	if res.Status != Queued {
		t.Fatalf("got %+v, want queued behind b's hold", res)
	}
	if after := pacerState(h, "a"); after != before {
		t.Errorf("a waiting multi-limit reserve changed the cap a:\nbefore %x\nafter  %x", before, after)
	}
	// b's hold lapses at 10 s: the waiter is granted then, on both caps.
	h.noop(11 * sec)
	d := h.f.TakeWaiterDecisions()
	if len(d) != 1 || d[0].Result.Status != Granted || d[0].Result.NowNanos != 11*sec {
		t.Fatalf("decisions at 11 s: %+v, want the waiter granted", d)
	}
	// a holds 1 of 2 (the waiter's): a second permit fits at once.
	if res := h.reserve1(11*sec, tracked(0, Part{"a", 1})); res.Status != Granted {
		t.Errorf("a has room for a permit but answered %+v", res)
	}
}

// TestShadowInFlightCapSeesReleases: doc.go, "Shadow mode": the shadow
// pacer "sees only the grants it would have made, so the counters say
// what enforcement would have done to the same traffic". An in-flight cap
// in shadow mode records no hold in the reservation (multi.go decides
// shadow parts with Reserve and keeps no hold expiry), so a release never
// reaches its pacer: every permit stays held for the whole TTL and the
// next reserve is counted as would-refuse, where the enforced cap grants.
func TestShadowInFlightCapSeesReleases(t *testing.T) {
	run := func(shadow bool) (granted bool, wouldRefuse uint64) {
		h := newHarness(t)
		if shadow {
			h.putShadow(0, "cap", concurrency(t, 1, time.Minute))
		} else {
			h.put(0, "cap", concurrency(t, 1, time.Minute))
		}
		first := h.reserve1(0, tracked(0, Part{"cap", 1}))
		if first.Status != Granted {
			t.Fatalf("first: %+v", first)
		}
		if rel := h.releaseCmd(sec, Release{Reservation: first.ReservationID}); rel.Status != Settled {
			t.Fatalf("release: %+v", rel)
		}
		second := h.reserve1(2*sec, tracked(0, Part{"cap", 1}))
		info, _ := h.f.Limit("cap")
		return second.Status == Granted, info.ShadowWouldRefuse
	}
	if granted, _ := run(false); !granted {
		t.Fatalf("the enforced cap refused after a release")
	}
	if _, wouldRefuse := run(true); wouldRefuse != 0 {
		t.Errorf("the shadow cap counts %d would-refuse where enforcement grants: its releases are never applied", wouldRefuse)
	}
}

// TestRestoredHostileReservationDoesNotPanicApply: Restore accepts any
// reservation part whose bytes re-encode the same, including a pre
// state that is not a state of the limit's pacer, or a hold expiry on a
// rate limit. A valid CmdSettle or CmdRelease then panics in Apply
// (settlePart panics when RestoreState(pre) fails; the Releaser type
// assertions panic on a strict pacer). Snapshots come from disk and
// from the network (InstallSnapshot); a replica must refuse such a
// snapshot, not crash on the next entry.
func TestRestoredHostileReservationDoesNotPanicApply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(p *reservedPart)
		apply  func(h *harness, id uint64)
	}{
		{"foreign pre state, settled", func(p *reservedPart) { p.pre = []byte{1, 2, 3} }, func(h *harness, id uint64) {
			h.settleCmd(2*sec, Settle{Reservation: id, Actual: []Part{{"api", 0}}})
		}},
		{"hold on a rate limit, released", func(p *reservedPart) { p.holdExpiresAtNanos = 50 * sec }, func(h *harness, id uint64) {
			h.releaseCmd(2*sec, Release{Reservation: id})
		}},
		{"hold on a rate limit, settled", func(p *reservedPart) { p.holdExpiresAtNanos = 50 * sec }, func(h *harness, id uint64) {
			h.settleCmd(2*sec, Settle{Reservation: id, Actual: []Part{{"api", 0}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.put(0, "api", bursty(t, 10))
			res := h.reserve1(sec, tracked(0, Part{"api", 5}))
			if res.Status != Granted {
				t.Fatalf("reserve: %+v", res)
			}
			tc.mutate(&h.f.st.reservations.byID[res.ReservationID].parts[0])
			snap := snapshotBytes(t, h.f)
			h2 := &harness{t: t, f: New(), index: h.index}
			if err := restore(h2.f, snap); err != nil {
				return // refused: what a replica should do
			}
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Restore accepted the snapshot, then Apply of a valid entry panicked: %v", r)
				}
			}()
			tc.apply(h2, res.ReservationID)
		})
	}
}
