package fsm

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func (h *harness) openSession(nowNanos int64) SessionResult {
	h.t.Helper()
	res, ok := h.apply(AppendOpenSession(nil, at(nowNanos))).(SessionResult)
	if !ok || res.ID != h.index || res.IdleNanos != SessionIdleNanos {
		h.t.Fatalf("open session: %+v, want ID %d", res, h.index)
	}
	return res
}

// srsv builds a reserve of session id, without an owner.
func srsv(limit string, permits, maxWaitNanos int64, id, seq, acked uint64) Reserve {
	return Reserve{Limit: limit, Permits: permits, MaxWaitNanos: maxWaitNanos, Session: SessionRef{ID: id, Seq: seq, AckedBelow: acked}}
}

// by is reserve r sent by owner.
func by(owner string, r Reserve) Reserve {
	r.Owner = owner
	return r
}

func TestSessionRetriesAreAnsweredOnce(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", strict(t, 1, 5))
	s := h.openSession(0).ID
	first := h.reserve1(0, srsv("api", 1, 10*sec, s, 1, 1))
	second := h.reserve1(0, srsv("api", 1, 10*sec, s, 2, 1))
	if first.Status != Granted || second.Status != Granted || second.WaitNanos != sec {
		t.Fatalf("two requests: %+v, %+v", first, second)
	}
	// A retry of request 1, later: the same decision, nothing reserved.
	again := h.reserve1(sec/2, srsv("api", 1, 10*sec, s, 1, 1))
	if !again.Duplicate || again.Status != Granted || again.WaitNanos != 0 {
		t.Fatalf("retry of request 1 = %+v, want the first decision replayed", again)
	}
	if info, _ := h.f.Limit("api"); info.GrantedRequests != 2 {
		t.Fatalf("a retry was decided again: %+v", info)
	}
	if _, outcomes := h.f.SessionCount(); outcomes != 2 {
		t.Fatalf("the session keeps %d outcomes, want 2 (nothing acknowledged)", outcomes)
	}
	// Acknowledging below 3 forgets both; a retry of 1 is then a client bug.
	h.reserve1(sec, srsv("api", 1, 10*sec, s, 3, 3))
	if _, outcomes := h.f.SessionCount(); outcomes != 1 {
		t.Fatalf("the session keeps %d outcomes after acknowledging 1 and 2, want 1", outcomes)
	}
	if got := h.reserve1(sec, srsv("api", 1, 10*sec, s, 1, 1)); got.Status != Invalid || !strings.Contains(got.Detail, "already acknowledged") {
		t.Fatalf("retry of an acknowledged request = %+v, want Invalid", got)
	}
	// A late acknowledgement (smaller) changes nothing.
	if got := h.reserve1(sec, srsv("api", 1, 10*sec, s, 3, 1)); !got.Duplicate {
		t.Fatalf("retry of 3 with an older acknowledgement = %+v, want the recorded decision", got)
	}
}

func TestSessionExpiresWhenIdleAndAnswersSessionExpired(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", strict(t, 1000, 0))
	s := h.openSession(0).ID
	h.reserve1(sec, srsv("api", 1, 0, s, 1, 1))
	// Kept alive by activity: a retry 9 minutes later is still recognised.
	if got := h.reserve1(sec+SessionIdleNanos-1, srsv("api", 1, 0, s, 1, 1)); !got.Duplicate {
		t.Fatalf("retry just inside the idle window = %+v, want a duplicate", got)
	}
	h.noop(2*sec + 2*SessionIdleNanos)
	if n, _ := h.f.SessionCount(); n != 0 {
		t.Fatalf("%d sessions open after the idle window, want 0", n)
	}
	got := h.reserve1(2*sec+2*SessionIdleNanos, srsv("api", 1, 0, s, 1, 1))
	if got.Status != SessionExpired || got.Duplicate || !strings.Contains(got.Detail, "open a new session") {
		t.Fatalf("reserve of an expired session = %+v, want SessionExpired", got)
	}
	if info, _ := h.f.Limit("api"); info.GrantedRequests != 1 {
		t.Fatalf("a reserve of an expired session was decided: %+v", info)
	}
	if got := h.reserve1(0, srsv("api", 1, 0, 999, 1, 1)); got.Status != SessionExpired {
		t.Fatalf("reserve of a session never opened = %+v, want SessionExpired", got)
	}
}

func TestSessionPendingBound(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", strict(t, 1e9, 0))
	s := h.openSession(0).ID
	rs := make([]Reserve, MaxSessionPending)
	for i := range rs {
		rs[i] = srsv("api", 1, 0, s, uint64(i+1), 1)
	}
	h.reserve(0, rs...)
	got := h.reserve1(0, srsv("api", 1, 0, s, MaxSessionPending+1, 1))
	if got.Status != Invalid || !strings.Contains(got.Detail, "unacknowledged") {
		t.Fatalf("one request past the pending bound = %+v, want Invalid", got)
	}
	// Acknowledging frees room.
	if got := h.reserve1(0, srsv("api", 1, 0, s, MaxSessionPending+1, MaxSessionPending)); got.Status == Invalid {
		t.Fatalf("after acknowledging = %+v", got)
	}
}

func TestSessionSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", strict(t, 2, 3))
	a := h.openSession(0).ID
	b := h.openSession(sec).ID
	h.reserve(2*sec, srsv("api", 1, 5*sec, a, 4, 2), srsv("api", 2, 0, b, 1, 1), srsv("nope", 1, 0, b, 7, 1), srsv("api", 1, 0, a, 5, 2))
	snap := snapshotBytes(t, h.f)
	g := New()
	if err := restore(g, snap); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if again := snapshotBytes(t, g); !bytes.Equal(again, snap) {
		t.Fatalf("a restored session table snapshots to other bytes")
	}
	n, outcomes := g.SessionCount()
	if n != 2 || outcomes != 4 {
		t.Fatalf("restored %d sessions with %d outcomes, want 2 and 4", n, outcomes)
	}
	g2 := &harness{t: t, f: g, index: h.index}
	want := h.reserve1(3*sec, srsv("api", 1, 5*sec, a, 4, 2))
	if got := g2.reserve1(3*sec, srsv("api", 1, 5*sec, a, 4, 2)); got != want || !got.Duplicate {
		t.Fatalf("retry on the restored copy = %+v, on the original %+v", got, want)
	}
}

// TestSessionReserveOfAnotherOwner: session IDs are raft indexes, easy to
// guess, so a reserve of a session is answered only for the session's
// owner. A reserve of alice's session sent by mallory (another API token)
// or without an owner, and alice's reserve of a session without an owner,
// are answered exactly as a reserve of a session never opened (the same
// status and detail, so that nobody learns which sessions are open), and
// change nothing: no limit, no outcome recorded, alice's acknowledgement
// and last activity kept. Mallory cannot read alice's answer (a retry of
// her number is no Duplicate), plant one (alice's next number, sent
// later, is decided afresh, not answered with mallory's decision), drop
// hers (acked_below past them: alice's retry still replays), nor keep
// her session alive (it expires SessionIdleNanos after alice's last
// reserve).
func TestSessionReserveOfAnotherOwner(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", bursty(t, 1000))
	h.put(0, "tight", strict(t, 1, 0))
	alice := h.openAs(0, OpenSession{Owner: "alice", PerOwner: 4}).ID
	anon := h.openSession(0).ID
	first := h.reserve1(sec, by("alice", srsv("api", 1, 0, alice, 1, 1)))
	if first.Status != Granted || first.Duplicate {
		t.Fatalf("alice's first reserve = %+v, want a fresh grant", first)
	}
	before := stateBody(t, h.f)
	const never = 1 << 40
	notOpen := h.reserve1(2*sec, by("mallory", srsv("api", 1, 0, never, 1, 1)))
	if notOpen.Status != SessionExpired {
		t.Fatalf("a reserve of a session never opened = %+v, want SessionExpired", notOpen)
	}
	// notOpen's detail for session id.
	detailFor := func(id uint64) string {
		return strings.ReplaceAll(notOpen.Detail, strconv.FormatUint(never, 10), strconv.FormatUint(id, 10))
	}
	for _, tc := range []struct {
		what string
		r    Reserve
	}{
		{"mallory replays alice's request 1", by("mallory", srsv("api", 1, 0, alice, 1, 1))},
		{"mallory plants alice's next request and acknowledges her answers", by("mallory", srsv("nope", 1, 0, alice, 2, 2))},
		{"mallory plants a refusal under alice's request 3", by("mallory", srsv("tight", 5, 0, alice, 3, 1))},
		{"mallory acknowledges far past alice's requests", by("mallory", srsv("api", 1, 0, alice, 1<<20, 1<<20))},
		{"a reserve without an owner on alice's session", srsv("api", 1, 0, alice, 2, 2)},
		{"alice on a session opened without an owner", by("alice", srsv("api", 1, 0, anon, 1, 1))},
	} {
		got := h.reserve1(2*sec, tc.r)
		if got.Status != SessionExpired || got.Duplicate || got.Detail != detailFor(tc.r.Session.ID) {
			t.Fatalf("%s = %+v, want the answer to a session never opened (%q)", tc.what, got, detailFor(tc.r.Session.ID))
		}
		if !bytes.Equal(stateBody(t, h.f), before) {
			t.Fatalf("%s changed the register's state", tc.what)
		}
	}
	// A batch: alice's own reserve is decided, mallory's beside it is not.
	got := h.reserve(2*sec, by("mallory", srsv("api", 1, 0, alice, 4, 1)), by("alice", srsv("api", 1, 0, alice, 4, 1)))
	if got[0].Status != SessionExpired || got[1].Status != Granted || got[1].Duplicate {
		t.Fatalf("a batch of mallory's and alice's request 4 = %+v, want mallory's refused and alice's decided", got)
	}

	// Alice's retry still replays her own answer; her next requests are
	// decided afresh, with nothing of mallory's.
	if again := h.reserve1(3*sec, by("alice", srsv("api", 1, 0, alice, 1, 1))); again.Status != Granted || !again.Duplicate {
		t.Fatalf("alice's retry of request 1 = %+v, want her grant replayed", again)
	}
	info, _ := h.f.Limit("api")
	for seq := uint64(2); seq <= 3; seq++ {
		if got := h.reserve1(3*sec, by("alice", srsv("api", 1, 0, alice, seq, 1))); got.Status != Granted || got.Duplicate {
			t.Fatalf("alice's request %d = %+v, want decided afresh (not mallory's planted answer)", seq, got)
		}
	}
	if after, _ := h.f.Limit("api"); after.GrantedRequests != info.GrantedRequests+2 {
		t.Fatalf("granted %d after alice's two new requests, before %d", after.GrantedRequests, info.GrantedRequests)
	}
	if n, outcomes := h.f.SessionCount(); n != 2 || outcomes != 4 {
		t.Fatalf("%d sessions keeping %d outcomes, want 2 keeping alice's 4", n, outcomes)
	}

	// Mallory's reserves do not keep alice's session alive.
	lastAlice := 3 * sec
	h.reserve1(lastAlice+SessionIdleNanos-1, by("mallory", srsv("api", 1, 0, alice, 5, 5)))
	if got := h.reserve1(lastAlice+SessionIdleNanos, by("alice", srsv("api", 1, 0, alice, 1, 1))); got.Status != SessionExpired {
		t.Fatalf("alice's retry %v after her last reserve, mallory's in between = %+v, want SessionExpired", SessionIdleNanos, got)
	}
}

// TestOwnedSessionReserveEncoding: a session's reserve without an owner
// keeps the bytes it had before owners were sent (key 2, read as the
// empty owner), one with an owner is key 3 followed by it, and an owner is
// carried only with a session or in the reservation form. (Malformed
// owners are in TestDecodeRejects.)
func TestOwnedSessionReserveEncoding(t *testing.T) {
	ref := SessionRef{ID: 7, Seq: 9, AckedBelow: 3}
	plain, err := AppendReserveBatch(nil, at(5), []Reserve{{Limit: "a", Permits: 1, Session: ref}})
	if err != nil {
		t.Fatal(err)
	}
	// The layout of a session's reserve since encoding version 2: count,
	// name, permits, max wait, arrival delta, key, id, seq, acked below.
	old := append(appendHeader(nil, CmdReserveBatch, at(5)), 1, 1, 'a', 1, 0, 0, keySession, 7, 9, 3)
	if !bytes.Equal(plain, old) {
		t.Fatalf("a session's reserve without an owner encodes as %x, want the old bytes %x", plain, old)
	}
	for _, owner := range []string{"", "alice", strings.Repeat("o", MaxOwnerLen)} {
		r := Reserve{Limit: "a", Permits: 1, Session: ref, Owner: owner}
		b, err := AppendReserveBatch(nil, at(5), []Reserve{r})
		if err != nil {
			t.Fatalf("owner %q: %v", owner, err)
		}
		if want := append(bytes.Clone(old[:len(old)-4]), keyOwnedSession, 7, 9, 3); owner != "" && !bytes.Equal(b[:len(want)], want) {
			t.Fatalf("owner %q: encodes as %x, want key 3 then the session (%x) and the owner", owner, b, want)
		}
		e, err := Decode(b)
		if err != nil || len(e.Reserves) != 1 || e.Reserves[0].Owner != owner || e.Reserves[0].Session != ref {
			t.Fatalf("owner %q: Decode = %+v, %v", owner, e.Reserves, err)
		}
	}
	for _, tc := range []struct {
		r    Reserve
		want string
	}{
		{Reserve{Limit: "a", Permits: 1, Session: ref, Owner: strings.Repeat("o", MaxOwnerLen+1)}, "owner is 129 bytes"},
		{Reserve{Limit: "a", Permits: 1, RequestID: "x", Owner: "alice"}, "an owner also with a session"},
		{Reserve{Limit: "a", Permits: 1, Owner: "alice"}, "an owner also with a session"},
	} {
		if _, err := AppendReserveBatch(nil, at(5), []Reserve{tc.r}); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AppendReserveBatch(%+v) = %v, want ErrInvalidCommand containing %q", tc.r, err, tc.want)
		}
	}
}
