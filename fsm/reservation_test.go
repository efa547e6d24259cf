package fsm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// reservation_test.go: reservations (reservation.go, multi.go): the holds
// they own, the table's bound, how long one lives, which limits it may
// name, and tests written during the review of the reservation changes
// (multi.go, settle.go, reservationsnapshot.go), each stating a
// documented property the code did not keep. Settlements are in
// settle_test.go and refund_test.go, the bound over every limit in
// reservation_bound_test.go.

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

// TestCapHoldsSurviveReconfigurationAndRecreation: cap 1, a reservation
// holds its permit; whatever puts and deletes follow (another algorithm
// and back, a delete and a re-creation, a shadow switch), a second reserve
// is refused while the first is held, the first's release frees its
// permit, and then the second is granted. A hold released while the limit
// was something else is not counted by a later incarnation.
func TestCapHoldsSurviveReconfigurationAndRecreation(t *testing.T) {
	capCfg := func(t *testing.T) bucket.Config { return concurrency(t, 1, time.Minute) }
	cases := []struct {
		name string
		// between runs at 1 s, after the first reserve (held) and before
		// the second.
		between func(t *testing.T, h *harness)
	}{
		{"strict and back", func(t *testing.T, h *harness) {
			h.put(sec, "cap", strict(t, 1, 0))
			h.put(sec, "cap", capCfg(t))
		}},
		{"bursty, a second later back", func(t *testing.T, h *harness) {
			h.put(sec, "cap", bursty(t, 5))
			h.put(2*sec, "cap", capCfg(t))
		}},
		{"delete and re-create", func(t *testing.T, h *harness) {
			if d := h.del(sec, "cap"); !d.Existed || d.Detail != "" {
				t.Fatalf("delete: %+v", d)
			}
			h.put(sec, "cap", capCfg(t))
		}},
		{"delete, re-create strict, then a cap with a shorter TTL", func(t *testing.T, h *harness) {
			h.del(sec, "cap")
			h.put(sec, "cap", strict(t, 1, 0))
			h.put(sec, "cap", concurrency(t, 1, 5*time.Second))
		}},
		{"shadow and enforced again", func(t *testing.T, h *harness) {
			h.putShadow(sec, "cap", capCfg(t))
			h.put(sec, "cap", capCfg(t))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.put(0, "cap", capCfg(t))
			a := h.reserve1(0, tracked(0, Part{"cap", 1}))
			if a.Status != Granted || !a.Holds {
				t.Fatalf("first reserve: %+v, want granted, holding", a)
			}
			c.between(t, h)
			if b := h.reserve1(3*sec, tracked(0, Part{"cap", 1})); b.Status != Refused || b.Blocking != "cap" {
				t.Fatalf("second reserve while the first is held: %+v, want refused by cap", b)
			}
			if rel := h.releaseCmd(4*sec, Release{Reservation: a.ReservationID}); rel.Status != Settled || rel.Released != 1 {
				t.Fatalf("release of the first: %+v, want 1 released", rel)
			}
			if b := h.reserve1(4*sec, tracked(0, Part{"cap", 1})); b.Status != Granted {
				t.Fatalf("second reserve after the release: %+v, want granted", b)
			}
		})
	}
	t.Run("released while not a cap", func(t *testing.T) {
		h := newHarness(t)
		h.put(0, "cap", capCfg(t))
		a := h.reserve1(0, tracked(0, Part{"cap", 1}))
		h.put(sec, "cap", strict(t, 1, 0))
		if rel := h.releaseCmd(2*sec, Release{Reservation: a.ReservationID}); rel.Released != 1 {
			t.Fatalf("release while the limit is strict: %+v, want 1 released", rel)
		}
		h.put(3*sec, "cap", capCfg(t))
		if b := h.reserve1(3*sec, tracked(0, Part{"cap", 1})); b.Status != Granted {
			t.Fatalf("reserve on the re-created cap: %+v, want granted (the released hold is not carried)", b)
		}
	})
	t.Run("settled while deleted", func(t *testing.T) {
		h := newHarness(t)
		h.put(0, "cap", concurrency(t, 2, time.Minute))
		a := h.reserve1(0, tracked(0, Part{"cap", 2}))
		h.del(sec, "cap")
		s := h.settleCmd(2*sec, Settle{Reservation: a.ReservationID, Actual: []Part{{"cap", 1}}})
		if s.Status != Settled || s.Parts[0].Refunded != 1 {
			t.Fatalf("settle while deleted: %+v, want 1 refunded", s)
		}
		h.put(3*sec, "cap", concurrency(t, 2, time.Minute))
		if b := h.reserve1(3*sec, tracked(0, Part{"cap", 2})); b.Status != Refused {
			t.Fatalf("2 on the re-created cap while 1 is held: %+v, want refused", b)
		}
		if b := h.reserve1(3*sec, tracked(0, Part{"cap", 1})); b.Status != Granted {
			t.Fatalf("1 on the re-created cap while 1 is held: %+v, want granted", b)
		}
	})
}

// fillReservations grants MaxReservations tracked reserves of one permit on
// limit through Apply, in batches of MaxBatchReserves at nowNanos, and
// returns the ID of the last reservation.
func fillReservations(t *testing.T, h *harness, nowNanos int64, limit string) uint64 {
	t.Helper()
	var last uint64
	for done := 0; done < MaxReservations; {
		n := min(MaxBatchReserves, MaxReservations-done)
		rs := make([]Reserve, n)
		for i := range rs {
			rs[i] = tracked(sec, Part{limit, 1})
		}
		for i, res := range h.reserve(nowNanos, rs...) {
			if res.Status != Granted || res.ReservationID != uint64(done+i+1) {
				t.Fatalf("tracked reserve %d = %+v, want Granted with reservation %d", done+i+1, res, done+i+1)
			}
			last = res.ReservationID
		}
		done += n
	}
	if got := h.f.Reservations(); got != MaxReservations {
		t.Fatalf("%d reservations live after filling, want %d", got, MaxReservations)
	}
	return last
}

// TestReservationCapAnswersBusy: the README's promise that at most
// MaxReservations (262 144) reservations are kept at once, and that beyond
// that a reserve in the reservation form is Busy with a Retry-After. The
// table is filled through Apply; the next tracked reserve, with or without
// a request ID, is Busy, says when the oldest reservation becomes final,
// and changes nothing but the applied index and the cluster time. The full
// table snapshots and restores to byte-identical state (the original after
// the Busy entry and the restored copy after a noop at the same index and
// time snapshot to the same bytes), and the restored copy answers the
// same. MaxReservations is a constant (no constructor parameter lowers
// it), so the test fills the real table: a few seconds without -race.
func TestReservationCapAnswersBusy(t *testing.T) {
	h := newHarness(t)
	h.put(0, "huge", bursty(t, 1e9)) // never refuses one permit a second ahead
	const fillAt = sec
	fillReservations(t, h, fillAt, "huge")
	first, ok := h.f.Reservation(1)
	if !ok {
		t.Fatal("reservation 1 is not live")
	}
	info, _ := h.f.Limit("huge")

	// A twin restored from the full table's snapshot. Restore itself
	// accepts only bytes that re-encode to themselves; the comparison
	// below checks, on top of that, that the twin holds exactly the
	// original's state. (Each snapshot of the full table costs about a
	// second under -race, so the test takes three, not four.)
	twin := &harness{t: t, f: New(), index: h.index}
	if err := restore(twin.f, snapshotBytes(t, h.f)); err != nil {
		t.Fatalf("Restore of a full reservation table: %v", err)
	}
	if got := twin.f.Reservations(); got != MaxReservations {
		t.Fatalf("restored %d reservations, want %d", got, MaxReservations)
	}

	now := fillAt + sec
	wantRetry := first.FinalAtNanos - now
	if wantRetry <= 0 {
		t.Fatalf("test setup: reservation 1 is final at %d, not after %d", first.FinalAtNanos, now)
	}
	withID := tracked(sec, Part{"huge", 1})
	withID.RequestID = "over-the-cap"
	over := h.reserve(now, tracked(sec, Part{"huge", 1}), withID)
	for i, res := range over {
		if res.Status != Busy || res.RetryAfterNanos != wantRetry || res.ReservationID != 0 || res.Duplicate {
			t.Fatalf("tracked reserve %d past the cap = %+v, want Busy with RetryAfterNanos %d (reservation 1 final at %d)",
				i, res, wantRetry, first.FinalAtNanos)
		}
	}
	if got := h.f.Reservations(); got != MaxReservations {
		t.Fatalf("%d reservations after the cap, want %d", got, MaxReservations)
	}
	if got, _ := h.f.Limit("huge"); got != info {
		t.Fatalf("a Busy reserve changed the limit: %+v, was %+v", got, info)
	}
	if n := h.f.DedupEntries(); n != 0 {
		t.Fatalf("a Busy reserve recorded its request id: %d ids", n)
	}
	// The Busy entry on the original and a noop at the same index and
	// time on the restored twin must leave byte-identical snapshots: the
	// Busy reserves changed nothing but what every entry changes, and the
	// restore lost nothing.
	twin.noop(now)
	if a, b := snapshotBytes(t, h.f), snapshotBytes(t, twin.f); !bytes.Equal(a, b) {
		t.Fatalf("the original after Busy reserves and its restored twin after a noop snapshot differently (%d vs %d bytes)", len(a), len(b))
	}

	// The restored copy continues exactly as the original.
	again := twin.reserve(now, tracked(sec, Part{"huge", 1}), withID)
	for i := range again {
		if again[i] != over[i] {
			t.Fatalf("on the restored copy reserve %d = %+v, on the original %+v", i, again[i], over[i])
		}
	}

	// Once the oldest reservation is final, the reservation form is
	// admitted again (Busy is temporary).
	res := h.reserve1(first.FinalAtNanos, tracked(sec, Part{"huge", 1}))
	if res.Status != Granted || res.ReservationID != MaxReservations+1 {
		t.Fatalf("tracked reserve after reservation 1 is final = %+v, want Granted with reservation %d", res, MaxReservations+1)
	}
	if got := h.f.Reservations(); got > MaxReservations {
		t.Fatalf("%d reservations live, more than %d", got, MaxReservations)
	}
}

// TestReservationWithLongHoldsStaysOpenUntilTheyLapse: README "settleable
// until settle_within after its time (default 1 minute, at most 10) or its
// in-flight holds' expiry, whichever is later". A 10-minute hold taken with
// the default 1-minute settle window can still be settled and released at
// 5 minutes, and the release frees the cap.
func TestReservationWithLongHoldsStaysOpenUntilTheyLapse(t *testing.T) {
	const minute = int64(time.Minute)
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 1, 10*time.Minute))
	h.put(0, "tpm", bursty(t, 1000))
	a := h.reserve1(0, tracked(0, Part{"tpm", 10}, Part{"cap", 1}))
	if a.Status != Granted || !a.Holds {
		t.Fatalf("reserve: %+v", a)
	}
	if s := h.settleCmd(5*minute, Settle{Reservation: a.ReservationID, Actual: []Part{{"tpm", 10}}}); s.Status != Settled {
		t.Errorf("settle at 5 min, holds until 10 min: %+v, want settled", s)
	}
	if rel := h.releaseCmd(5*minute, Release{Reservation: a.ReservationID}); rel.Released != 1 {
		t.Errorf("release at 5 min: %+v, want 1 released", rel)
	}
	if r := h.reserve1(5*minute, tracked(0, Part{"cap", 1})); r.Status != Granted {
		t.Errorf("after the release: %+v, want the cap free", r)
	}
}

// TestReservationNamingALeasedLimitIsInvalid: the register itself refuses
// a reserve in the reservation form that names a leased limit, whatever
// the edge let through (a lease policy committed between the node's check
// and this entry, say), and the refusal leaves the other parts' limits as
// they were.
func TestReservationNamingALeasedLimitIsInvalid(t *testing.T) {
	h := newHarness(t)
	h.put(0, "fast", bursty(t, 1000))
	h.put(0, "pool", strict(t, 100, 10))
	h.policy(0, LeasePolicy{Limit: "pool", Leased: true})
	before := pacerState(h, "fast")
	for _, parts := range [][]Part{
		{{"pool", 1}},
		{{"fast", 5}, {"pool", 1}},
		{{"pool", 1}, {"fast", 5}},
	} {
		res := h.reserve1(sec, tracked(sec, parts...))
		if res.Status != Invalid || !strings.Contains(res.Detail, `"pool" is leased`) {
			t.Fatalf("reserve of %v: got %+v, want invalid because pool is leased", parts, res)
		}
	}
	if after := pacerState(h, "fast"); after != before {
		t.Errorf("a refused reserve changed fast's pacer: %s, was %s", after, before)
	}
	if n := h.f.Reservations(); n != 0 {
		t.Errorf("a refused reserve left %d reservations", n)
	}
}

// TestHoldEndOfEveryGrant: a grant that holds an in-flight permit says
// when the hold lapses (HoldExpiresInNanos, relative to the answer's
// entry), apart from its expiry (the earliest of all its parts', here a
// strict limit's): for a fresh multi-limit grant, for a waiter granted
// at a lapse that a later entry decides (its hold runs from the lapse, so
// it ends less than a TTL after that entry), for replays (re-expressed
// relative to the retry, -1 once lapsed), and for replays answered by a
// copy restored from a snapshot (the hold's end is kept in the dedup
// record).
func TestHoldEndOfEveryGrant(t *testing.T) {
	const sec = int64(time.Second)
	h := newHarness(t)
	h.put(0, "rpm", compile(t, bucket.Spec{Algorithm: bucket.Strict, Rate: 10, Per: time.Second, Expiry: 20 * time.Millisecond}))
	h.put(0, "cap", concurrency(t, 1, 2*time.Second))
	a := tracked(0, Part{Limit: "rpm", Permits: 1}, Part{Limit: "cap", Permits: 1})
	a.RequestID = "a"
	res := h.reserve1(sec, a)
	if res.Status != Granted || !res.Holds || res.ExpiresInNanos != int64(20*time.Millisecond) || res.HoldExpiresInNanos != 2*sec {
		t.Fatalf("fresh grant: %+v, want granted, expiring in 20ms, its hold ending in 2s", res)
	}
	// B waits for the cap alone; A's hold lapses at 3 s and the no-op at
	// 3.5 s decides B, granted at 3 s: its hold ends at 5 s.
	b := tracked(int64(10*time.Second), Part{Limit: "cap", Permits: 1})
	b.RequestID = "b"
	if res := h.reserve1(sec+sec/10, b); res.Status != Queued {
		t.Fatalf("B: %+v, want queued", res)
	}
	h.noop(3*sec + sec/2)
	ds := h.f.TakeWaiterDecisions()
	if len(ds) != 1 || ds[0].Result.Status != Granted || ds[0].DecidedAtNanos != 3*sec {
		t.Fatalf("B's decision: %+v, want granted at 3s", ds)
	}
	if got := ds[0].Result; got.NowNanos != 3*sec+sec/2 || got.HoldExpiresInNanos != 3*sec/2 || got.ExpiresInNanos != 3*sec/2 {
		t.Fatalf("B's decision: %+v, want its hold (and expiry) to end 1.5s after the entry at 3.5s", got)
	}
	replay := func(f *FSM, nowNanos int64, q Reserve) ReserveResult {
		t.Helper()
		return (&harness{t: t, f: f, index: f.AppliedIndex()}).reserve1(nowNanos, q)
	}
	// A replay of A at 1.5 s: the strict permit expired, the hold runs
	// until 3 s.
	snap := snapshotBytes(t, h.f)
	restored := New()
	if err := restore(restored, snap); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*FSM{restored, h.f} {
		got := replay(f, 3*sec+sec/2+1, a)
		if !got.Duplicate || got.ExpiresInNanos != -1 || got.HoldExpiresInNanos != -1 {
			t.Fatalf("replay of A after its hold lapsed: %+v, want expired, hold lapsed", got)
		}
		got = replay(f, 4*sec, b)
		if !got.Duplicate || got.HoldExpiresInNanos != sec || got.ExpiresInNanos != sec {
			t.Fatalf("replay of B at 4s: %+v, want its hold to end in 1s", got)
		}
	}
	// A's replay before its hold lapsed, from a copy restored from a
	// snapshot taken then: the strict permit expired, the hold did not.
	h2 := newHarness(t)
	h2.put(0, "rpm", compile(t, bucket.Spec{Algorithm: bucket.Strict, Rate: 10, Per: time.Second, Expiry: 20 * time.Millisecond}))
	h2.put(0, "cap", concurrency(t, 1, 2*time.Second))
	h2.reserve1(sec, a)
	restored = New()
	if err := restore(restored, snapshotBytes(t, h2.f)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*FSM{restored, h2.f} {
		got := replay(f, 2*sec, a)
		if !got.Duplicate || !got.Holds || got.ExpiresInNanos != -1 || got.HoldExpiresInNanos != sec {
			t.Fatalf("replay of A at 2s: %+v, want its permit expired and its hold ending in 1s", got)
		}
	}
}

// TestLimitLeavesOpenReservationsToLimitView: the view an edge check reads
// on every reserve (Limit) does not walk the reservation table, so it
// reports no open reservations, while LimitView, the operators' read,
// counts them, as Limits does. (Counting them in Limit made every reserve
// walk up to MaxReservations entries under the read lock.)
func TestLimitLeavesOpenReservationsToLimitView(t *testing.T) {
	h := newHarness(t)
	h.put(0, "huge", bursty(t, 1e9))
	h.put(0, "other", bursty(t, 1e9))
	for _, res := range h.reserve(sec, tracked(sec, Part{"huge", 1}), tracked(sec, Part{"huge", 1}), tracked(sec, Part{"other", 1})) {
		if res.Status != Granted {
			t.Fatalf("tracked reserve: %+v", res)
		}
	}
	if l, _ := h.f.Limit("huge"); l.OpenReservations != 0 {
		t.Errorf("Limit(huge).OpenReservations = %d, want 0 (Limit must not walk the reservation table)", l.OpenReservations)
	}
	if l, _ := h.f.LimitView("huge"); l.OpenReservations != 2 {
		t.Errorf("LimitView(huge).OpenReservations = %d, want 2", l.OpenReservations)
	}
	for _, l := range h.f.Limits() {
		if want := map[string]int{"huge": 2, "other": 1}[l.Name]; l.OpenReservations != want {
			t.Errorf("Limits: %s has %d open reservations, want %d", l.Name, l.OpenReservations, want)
		}
	}
}
