package fsm

import (
	"slices"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

func (h *harness) settleCmd(nowNanos int64, c Settle) SettleResult {
	h.t.Helper()
	b, err := AppendSettle(nil, at(nowNanos), c)
	if err != nil {
		h.t.Fatalf("AppendSettle(%+v): %v", c, err)
	}
	return h.apply(b).(SettleResult)
}

func (h *harness) releaseCmd(nowNanos int64, c Release) ReleaseResult {
	h.t.Helper()
	b, err := AppendRelease(nil, at(nowNanos), c)
	if err != nil {
		h.t.Fatalf("AppendRelease(%+v): %v", c, err)
	}
	return h.apply(b).(ReleaseResult)
}

func (h *harness) putShadow(nowNanos int64, name string, cfg bucket.Config) {
	h.t.Helper()
	b, err := AppendPut(nil, at(nowNanos), PutLimit{Name: name, Config: cfg, Shadow: true})
	if err != nil {
		h.t.Fatal(err)
	}
	h.apply(b)
}

func tracked(maxWaitNanos int64, parts ...Part) Reserve {
	return Reserve{Limit: parts[0].Limit, Permits: parts[0].Permits, Also: parts[1:], MaxWaitNanos: maxWaitNanos, Track: true}
}

func concurrency(t testing.TB, maxInFlight int64, ttl time.Duration) bucket.Config {
	return compile(t, bucket.Spec{Algorithm: bucket.Concurrency, MaxInFlight: maxInFlight, HoldTTL: ttl})
}

func pacerState(h *harness, name string) string {
	return string(h.f.st.limits[name].pacer.AppendState(nil))
}

// TestMultiLimitGrantWaitsForTheSlowestLimit: the grant's time is the
// latest at which every limit can serve its part, and every limit is
// charged at that time.
func TestMultiLimitGrantWaitsForTheSlowestLimit(t *testing.T) {
	h := newHarness(t)
	h.put(0, "rpm", strict(t, 1, 10))   // one per second, 10 ahead
	h.put(0, "tpm", bursty(t, 1000))    // a thousand per second
	h.reserve1(0, rsv("rpm", 1, 0, "")) // rpm's next slot: 1 s
	res := h.reserve1(0, tracked(2*sec, Part{"rpm", 1}, Part{"tpm", 1500}))
	if res.Status != Granted || res.WaitNanos != sec || res.ReservationID != 1 {
		t.Fatalf("got %+v, want granted after 1 s with reservation 1", res)
	}
	// tpm served 1500 permits at 1 s, as if asked then: the 1 000 stored
	// by then and 500 fresh, so a request right after waits until 1.5 s.
	if got := h.reserve1(0, rsv("tpm", 1, 10*sec, "")); got.WaitNanos != sec+sec/2 {
		t.Errorf("tpm's next grant waits %v, want 1.5s", time.Duration(got.WaitNanos))
	}
}

// TestRefusedMultiLimitChangesNothing: refused because one limit is too
// slow, or because a strict limit cannot reserve that far ahead, a
// multi-limit reserve leaves every limit as it was and names the limit
// that blocked.
func TestRefusedMultiLimitChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.put(0, "fast", bursty(t, 1000))
	h.put(0, "slow", strict(t, 1, 0)) // pessimistic: grants only at now
	h.put(0, "cap", concurrency(t, 1, time.Minute))
	h.reserve1(0, rsv("slow", 1, 0, ""))
	before := [3]string{pacerState(h, "fast"), pacerState(h, "slow"), pacerState(h, "cap")}
	res := h.reserve1(0, tracked(0, Part{"fast", 10}, Part{"cap", 1}, Part{"slow", 1}))
	if res.Status != Refused || res.Blocking != "slow" || res.RetryAfterNanos != sec {
		t.Fatalf("got %+v, want refused by slow, retry after 1 s", res)
	}
	// With a max wait the time is reachable, but slow's MaxReserved 0
	// refuses to serve ahead: fast is restored, cap never touched.
	res = h.reserve1(0, tracked(5*sec, Part{"fast", 10}, Part{"slow", 1}, Part{"cap", 1}))
	if res.Status != Refused || res.Blocking != "slow" {
		t.Fatalf("got %+v, want refused by slow's MaxReserved", res)
	}
	after := [3]string{pacerState(h, "fast"), pacerState(h, "slow"), pacerState(h, "cap")}
	if before != after {
		t.Errorf("a refused multi-limit reserve changed a limit's state")
	}
	if h.f.Reservations() != 0 {
		t.Errorf("a refused reserve left %d reservations", h.f.Reservations())
	}
}

// TestSettleRefundsExactlyWhileNothingElseTouchedTheLimit: a refund makes
// the limit exactly as if the reserve had asked for what it used; after
// another grant the unused permits are lost.
func TestSettleRefundsExactlyWhileNothingElseTouchedTheLimit(t *testing.T) {
	h := newHarness(t)
	h.put(0, "tpm", bursty(t, 100))
	twin := newHarness(t)
	twin.put(0, "tpm", bursty(t, 100))

	res := h.reserve1(sec, tracked(0, Part{"tpm", 80}))
	twin.reserve1(sec, tracked(0, Part{"tpm", 30}))
	s := h.settleCmd(sec+10, Settle{Reservation: res.ReservationID, Actual: []Part{{"tpm", 30}}, RequestID: "s1"})
	if s.Status != Settled || s.Parts[0].Refunded != 50 {
		t.Fatalf("settle: %+v, want 50 refunded", s)
	}
	if pacerState(h, "tpm") != pacerState(twin, "tpm") {
		t.Errorf("after the refund the limit differs from one that granted 30 permits")
	}
	// A retry of the settlement is answered the same, changing nothing.
	again := h.settleCmd(sec+20, Settle{Reservation: res.ReservationID, Actual: []Part{{"tpm", 30}}, RequestID: "s1"})
	if !again.Duplicate || again.Parts[0].Refunded != 50 {
		t.Errorf("retry: %+v, want the first answer as a duplicate", again)
	}
	if c := h.settleCmd(sec+20, Settle{Reservation: res.ReservationID, RequestID: "s2"}); c.Status != SettleConflict {
		t.Errorf("second settlement: %+v, want a conflict", c)
	}

	// Another grant in between, on a limit that takes no late refunds
	// (warm-up): nothing comes back.
	h.put(2*sec, "warm", compile(t, bucket.Spec{Algorithm: bucket.WarmingUp, Rate: 100, Warmup: time.Second}))
	r2 := h.reserve1(2*sec, tracked(10*sec, Part{"warm", 40}))
	h.reserve1(2*sec, rsv("warm", 1, 10*sec, ""))
	s = h.settleCmd(2*sec+10, Settle{Reservation: r2.ReservationID, Actual: []Part{{"warm", 0}}})
	if s.Status != Settled || s.Parts[0].Refunded != 0 {
		t.Errorf("settle after another grant: %+v, want nothing refunded", s)
	}
}

// TestLateRefundTakesBackWhatTheSlackAllows: on a Bursty limit (100/s,
// 0.1 s of burst: 10 permits), a grant of 40 from an empty store is
// followed by a grant of 1, served 0.4 s later from an empty store (slack
// 0.1 s). Settling the 40 at 0 then gives back 10 permits, which lowers
// the debt by 0.1 s; an earlier grant settled after that gets nothing
// back, and the limit serves as if the 40 had been 30.
func TestLateRefundTakesBackWhatTheSlackAllows(t *testing.T) {
	cfg := compile(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 100, MaxBurstSeconds: 0.1})
	h := newHarness(t)
	twin := newHarness(t)
	h.put(0, "tpm", cfg)
	twin.put(0, "tpm", cfg)
	first := h.reserve1(sec, tracked(sec, Part{"tpm", 5}))
	twin.reserve1(sec, tracked(sec, Part{"tpm", 5}))
	big := h.reserve1(sec, tracked(sec, Part{"tpm", 40}))
	twin.reserve1(sec, tracked(sec, Part{"tpm", 30}))
	h.reserve1(sec+1, rsv("tpm", 1, sec, ""))
	twin.reserve1(sec+1, rsv("tpm", 1, sec, ""))
	// A replica restored from a snapshot taken now settles the same way:
	// the marks are replicated state.
	replica := newHarness(t)
	if err := restore(replica.f, snapshotBytes(t, h.f)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		a := replica.settleCmd(sec+2, Settle{Reservation: big.ReservationID, Actual: []Part{{"tpm", 0}}})
		b := replica.settleCmd(sec+3, Settle{Reservation: first.ReservationID, Actual: []Part{{"tpm", 0}}})
		l, rl := h.f.st.limits["tpm"], replica.f.st.limits["tpm"]
		if a.Parts[0].Refunded != 10 || b.Parts[0].Refunded != 0 || pacerState(replica, "tpm") != pacerState(h, "tpm") ||
			!slices.Equal(rl.refundMarks, l.refundMarks) || rl.marksFromSeq != l.marksFromSeq || rl.seq != l.seq {
			t.Errorf("a replica restored before the settlements refunded %d and %d, and differs after them", a.Parts[0].Refunded, b.Parts[0].Refunded)
		}
	}()
	s := h.settleCmd(sec+2, Settle{Reservation: big.ReservationID, Actual: []Part{{"tpm", 0}}})
	if s.Status != Settled || s.Parts[0].Refunded != 10 {
		t.Fatalf("late settle: %+v, want 10 of the 40 refunded (the grant after it had 0.1 s of slack)", s)
	}
	s = h.settleCmd(sec+3, Settle{Reservation: first.ReservationID, Actual: []Part{{"tpm", 0}}})
	if s.Status != Settled || s.Parts[0].Refunded != 0 {
		t.Fatalf("second late settle: %+v, want nothing refunded (the slack is spent)", s)
	}
	// The debt P = nextFree - stored is the twin's (as if the 40 had been
	// 30); the next free time stays at the 1-permit grant's served time
	// (1.35 s) and the rest is in the store.
	debt := func(h *harness) (next, stored int64) {
		next, _ = h.f.st.limits["tpm"].pacer.Query(sec+4, 1)
		return next, h.f.st.limits["tpm"].pacer.(*bucket.BurstyPacer).StoredNanos()
	}
	next, stored := debt(h)
	twinNext, twinStored := debt(twin)
	if next-stored != twinNext-twinStored || next != sec+350*int64(time.Millisecond) {
		t.Errorf("after the refund: next free %d, stored %d; want the twin's debt %d, next free at 1.35 s", next, stored, twinNext-twinStored)
	}
}

// TestSettleChargesAnOverrun: using more than reserved delays later
// grants by what the extra permits cost.
func TestSettleChargesAnOverrun(t *testing.T) {
	h := newHarness(t)
	h.put(0, "rpm", strict(t, 10, 100)) // 100 ms apart
	res := h.reserve1(0, tracked(0, Part{"rpm", 1}))
	s := h.settleCmd(10, Settle{Reservation: res.ReservationID, Actual: []Part{{"rpm", 4}}})
	if s.Parts[0].Charged != 3 {
		t.Fatalf("settle: %+v, want 3 charged", s)
	}
	if got := h.reserve1(10, rsv("rpm", 1, 10*sec, "")); got.WaitNanos != 4*sec/10-10 {
		t.Errorf("next grant waits %v, want 400ms after the first", time.Duration(got.WaitNanos))
	}
}

// TestConcurrencyHoldsUntilReleaseOrTTL: an in-flight permit is held until
// released (once) or until its TTL; a release after the TTL changes
// nothing.
func TestConcurrencyHoldsUntilReleaseOrTTL(t *testing.T) {
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 2, 10*time.Second))
	h.put(0, "rpm", bursty(t, 1000))
	a := h.reserve1(0, tracked(0, Part{"cap", 2}, Part{"rpm", 1}))
	if a.Status != Granted || a.ExpiresInNanos != 10*sec || !a.Holds {
		t.Fatalf("got %+v, want granted, holding in-flight permits for 10 s", a)
	}
	if r := h.reserve1(0, tracked(sec, Part{"rpm", 1})); r.Status != Granted || r.Holds {
		t.Fatalf("rate limit only: %+v, want granted, holding nothing in flight", r)
	}
	if r := h.reserve1(sec, tracked(0, Part{"cap", 1})); r.Status != Refused || r.Blocking != "cap" || r.RetryAfterNanos != 9*sec {
		t.Fatalf("cap full: %+v, want refused until the hold expires", r)
	}
	if rel := h.releaseCmd(2*sec, Release{Reservation: a.ReservationID}); rel.Released != 2 {
		t.Fatalf("release: %+v, want 2 released", rel)
	}
	if rel := h.releaseCmd(2*sec, Release{Reservation: a.ReservationID}); !rel.Duplicate || rel.Released != 0 {
		t.Errorf("second release: %+v, want a duplicate releasing nothing", rel)
	}
	b := h.reserve1(2*sec, tracked(0, Part{"cap", 2}))
	if b.Status != Granted {
		t.Fatalf("after the release: %+v, want granted", b)
	}
	before := pacerState(h, "cap")
	if rel := h.releaseCmd(13*sec, Release{Reservation: b.ReservationID}); rel.Released != 0 {
		t.Errorf("release after the TTL: %+v, want nothing released", rel)
	}
	_ = before
	if r := h.reserve1(13*sec, tracked(0, Part{"cap", 2})); r.Status != Granted {
		t.Errorf("after the TTL: %+v, want granted", r)
	}
}

// TestSettleRejectsWhatDoesNotFit: another owner's reservation, an unknown
// one, a limit it does not hold, an overrun on an in-flight cap: a clear
// status and nothing changed.
func TestSettleRejectsWhatDoesNotFit(t *testing.T) {
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 5, time.Minute))
	q := tracked(0, Part{"cap", 2})
	q.Owner = "alice"
	res := h.reserve1(0, q)
	before := pacerState(h, "cap")
	for _, c := range []struct {
		settle Settle
		want   SettleStatus
	}{
		{Settle{Reservation: res.ReservationID, Owner: "bob"}, SettleForbidden},
		{Settle{Reservation: 99, Owner: "alice"}, SettleUnknown},
		{Settle{Reservation: res.ReservationID, Owner: "alice", Actual: []Part{{"other", 1}}}, SettleInvalid},
		{Settle{Reservation: res.ReservationID, Owner: "alice", Actual: []Part{{"cap", 3}}}, SettleInvalid},
	} {
		if got := h.settleCmd(sec, c.settle); got.Status != c.want || got.Detail == "" {
			t.Errorf("settle %+v: %+v, want status %d with a detail", c.settle, got, c.want)
		}
	}
	if pacerState(h, "cap") != before {
		t.Errorf("a rejected settlement changed the limit")
	}
	if got := h.releaseCmd(sec, Release{Reservation: res.ReservationID, Owner: "bob"}); got.Status != SettleForbidden {
		t.Errorf("release by another owner: %+v, want forbidden", got)
	}
	// Settling 1 of the 2 held releases the other at once.
	if got := h.settleCmd(sec, Settle{Reservation: res.ReservationID, Owner: "alice", Actual: []Part{{"cap", 1}}}); got.Parts[0].Refunded != 1 {
		t.Errorf("settle 1 of 2 in flight: %+v, want 1 released", got)
	}
}

// TestReservationBecomesFinal: after its settle window a reservation is
// forgotten, and a settlement is answered unknown.
func TestReservationBecomesFinal(t *testing.T) {
	h := newHarness(t)
	h.put(0, "tpm", bursty(t, 100))
	q := tracked(0, Part{"tpm", 5})
	q.SettleWithinNanos = 5 * sec
	res := h.reserve1(0, q)
	if got := h.settleCmd(5*sec, Settle{Reservation: res.ReservationID}); got.Status != SettleUnknown {
		t.Errorf("settle at the end of the window: %+v, want unknown (final)", got)
	}
	if h.f.Reservations() != 0 {
		t.Errorf("%d reservations kept after their window", h.f.Reservations())
	}
}

// TestShadowLimitGrantsEverythingAndCounts: a shadow limit grants at once
// and counts what enforcement would have done; in a multi-limit reserve it
// never blocks.
func TestShadowLimitGrantsEverythingAndCounts(t *testing.T) {
	h := newHarness(t)
	h.putShadow(0, "new", strict(t, 1, 0))
	h.put(0, "old", bursty(t, 1000))
	for i := range 3 {
		if r := h.reserve1(0, rsv("new", 1, 0, "")); r.Status != Granted || r.WaitNanos != 0 {
			t.Fatalf("reserve %d on a shadow limit: %+v, want granted at once", i, r)
		}
	}
	if r := h.reserve1(0, tracked(0, Part{"new", 1}, Part{"old", 1})); r.Status != Granted || r.WaitNanos != 0 {
		t.Fatalf("multi-limit with a shadow limit: %+v, want granted at once", r)
	}
	info, _ := h.f.Limit("new")
	if !info.Shadow || info.ShadowWouldRefuse != 3 || info.GrantedRequests != 4 {
		t.Errorf("shadow counters: %+v, want 3 would-refuse of 4 grants", info)
	}
}
