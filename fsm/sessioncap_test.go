package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// restoredTwin snapshots h's FSM, restores the bytes into a new FSM, checks
// that the copy snapshots to the same bytes, and returns a harness on it
// that continues at h's index.
func restoredTwin(t *testing.T, h *harness) *harness {
	t.Helper()
	snap := snapshotBytes(t, h.f)
	g := New()
	if err := restore(g, snap); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if again := snapshotBytes(t, g); !bytes.Equal(again, snap) {
		t.Fatalf("the restored copy snapshots to other bytes (%d vs %d)", len(again), len(snap))
	}
	return &harness{t: t, f: g, index: h.index}
}

// openAs applies a CmdOpenSession for o at nowNanos and returns its result,
// opened or refused.
func (h *harness) openAs(nowNanos int64, o OpenSession) SessionResult {
	h.t.Helper()
	b, err := AppendOpenSessionAs(nil, at(nowNanos), o)
	if err != nil {
		h.t.Fatalf("AppendOpenSessionAs(%+v): %v", o, err)
	}
	res, ok := h.apply(b).(SessionResult)
	if !ok {
		h.t.Fatalf("open session %+v: the result is not a SessionResult", o)
	}
	if opened := res.ID != 0; opened != (res.Detail == "") || opened && (res.ID != h.index || res.IdleNanos != SessionIdleNanos || res.RetryAfterNanos != 0) ||
		!opened && res.RetryAfterNanos < 1 {
		h.t.Fatalf("open session %+v = %+v: want the entry's index and the idle lifetime, or a refusal with a detail and a retry time", o, res)
	}
	return res
}

// stateBody is a snapshot without its header (cluster time, applied
// index) and checksum: what an entry that changes nothing leaves as it
// was.
func stateBody(t testing.TB, f *FSM) []byte {
	snap := snapshotBytes(t, f)
	return snap[snapshotHeaderLen : len(snap)-4]
}

// TestFullSessionTableKeepsLiveSessions: other clients filling the table
// (MaxSessions, 65 536) never close a live session. With the table full,
// an open is refused until the least recently used session expires
// (exactly then), the refusal changes nothing, and the first client's
// retry a second later is still answered from its session; once the
// other clients' sessions expire, an open succeeds and the retry is still
// recognised. The full table snapshots and restores byte for byte, and
// the restored copy answers the same.
func TestFullSessionTableKeepsLiveSessions(t *testing.T) {
	h := newHarness(t)
	h.put(0, "huge", bursty(t, 1e9))
	victim := h.openSession(0).ID
	if r := h.reserve1(0, srsv("huge", 1, sec, victim, 1, 1)); r.Status != Granted || r.Duplicate {
		t.Fatalf("the first client's reserve = %+v, want Granted", r)
	}
	for range MaxSessions - 1 {
		h.openSession(sec) // other clients
	}
	before := stateBody(t, h.f)
	r := h.openAs(2*sec, OpenSession{})
	if r.ID != 0 || r.RetryAfterNanos != SessionIdleNanos-2*sec || !strings.Contains(r.Detail, "65536 open sessions") {
		t.Fatalf("open at a full table = %+v, want refused until the first client's session expires (%dns)", r, SessionIdleNanos-2*sec)
	}
	if !bytes.Equal(stateBody(t, h.f), before) {
		t.Fatalf("a refused open changed the state")
	}
	twin := restoredTwin(t, h)
	for _, c := range []*harness{h, twin} {
		if got := c.reserve1(3*sec, srsv("huge", 1, sec, victim, 1, 1)); got.Status != Granted || !got.Duplicate {
			t.Fatalf("the first client's retry a second after the table filled = %+v, want its recorded grant", got)
		}
		if info, _ := c.f.Limit("huge"); info.GrantedRequests != 1 {
			t.Fatalf("%d requests granted, want 1 (the retry is not decided again)", info.GrantedRequests)
		}
		// The retry made the others' sessions the least recently used.
		if got := c.openAs(4*sec, OpenSession{}); got.ID != 0 || got.RetryAfterNanos != sec+SessionIdleNanos-4*sec {
			t.Fatalf("open after the retry = %+v, want refused until the others' sessions expire (%dns)", got, sec+SessionIdleNanos-4*sec)
		}
		if got := c.openAs(sec+SessionIdleNanos, OpenSession{}); got.ID == 0 {
			t.Fatalf("open once the others' sessions expired = %+v, want a session", got)
		}
		if n, _ := c.f.SessionCount(); n != 2 {
			t.Fatalf("%d sessions open, want 2 (the first client's and the new one)", n)
		}
		if got := c.reserve1(sec+SessionIdleNanos, srsv("huge", 1, sec, victim, 1, 1)); !got.Duplicate {
			t.Fatalf("the first client's retry %v after the others expired = %+v, want its recorded grant", SessionIdleNanos, got)
		}
	}
	if a, b := snapshotBytes(t, h.f), snapshotBytes(t, twin.f); !bytes.Equal(a, b) {
		t.Fatalf("the original and its restored copy diverged after the same entries")
	}
}

// TestSessionResultCapRefusesWithoutDeciding: the README's promise of at
// most MaxSessionResults (2^20) answers kept by all sessions together,
// kept without closing a live session. With the table at exactly that
// many (1024 unacknowledged answers in each session but one), a reserve
// of the session without answers is answered Busy, decided nothing,
// until the least recently used session that keeps answers expires;
// every session keeps its answers, the least recently used included. An
// acknowledgement makes room, and the same request is then decided. The
// table snapshots and restores byte for byte. MaxSessionResults is a
// constant, so the test fills the real table: about 6-10 s and 1 GB under
// -race.
func TestSessionResultCapRefusesWithoutDeciding(t *testing.T) {
	const per = 1024 // answers per session (<= MaxSessionPending)
	const full = MaxSessionResults / per
	if per > MaxSessionPending || full*per != MaxSessionResults || MaxBatchReserves%per != 0 || full >= MaxSessions {
		t.Fatalf("test setup: MaxSessionResults %d, %d answers per session, MaxBatchReserves %d do not divide",
			MaxSessionResults, per, MaxBatchReserves)
	}
	h := newHarness(t)
	h.put(0, "huge", bursty(t, 1e9))
	ids := make([]uint64, full+1)
	for i := range ids {
		ids[i] = h.openSession(0).ID
	}
	// Fill the first full sessions, in order, per answers each, none
	// acknowledged. The answers are UnknownLimit, recorded like any other
	// outcome but cheaper to decide (2^20 grants on a pacer take several
	// seconds under -race).
	rs := make([]Reserve, 0, MaxBatchReserves)
	for i, id := range ids[:full] {
		for seq := uint64(1); seq <= per; seq++ {
			rs = append(rs, srsv("absent", 1, sec, id, seq, 1))
		}
		if len(rs) == MaxBatchReserves || i == full-1 {
			for j, r := range h.reserve(sec, rs...) {
				if r.Status != UnknownLimit || r.Duplicate {
					t.Fatalf("filling: reserve %d of the batch = %+v, want UnknownLimit (recorded like any answer)", j, r)
				}
			}
			rs = rs[:0]
		}
	}
	if n, outcomes := h.f.SessionCount(); n != full+1 || outcomes != MaxSessionResults {
		t.Fatalf("%d sessions keep %d outcomes, want %d keeping %d", n, outcomes, full+1, MaxSessionResults)
	}
	twin := restoredTwin(t, h)

	oldest, last, newest := ids[0], ids[full-1], ids[full]
	for _, c := range []*harness{h, twin} {
		r := c.reserve1(3*sec, srsv("huge", 1, sec, newest, 1, 1))
		if r.Status != Busy || r.Duplicate || r.RetryAfterNanos != sec+SessionIdleNanos-3*sec || !strings.Contains(r.Detail, "unacknowledged answers") {
			t.Fatalf("answer %d, in the session without answers = %+v, want Busy until the oldest session keeping answers expires (%dns)",
				MaxSessionResults+1, r, sec+SessionIdleNanos-3*sec)
		}
		if info, _ := c.f.Limit("huge"); info.GrantedRequests != 0 || info.RefusedRequests != 0 {
			t.Fatalf("a reserve that could not be recorded was decided: %+v", info)
		}
		if n, outcomes := c.f.SessionCount(); n != full+1 || outcomes != MaxSessionResults {
			t.Fatalf("after the Busy answer %d sessions keep %d outcomes, want %d keeping %d", n, outcomes, full+1, MaxSessionResults)
		}
		got := c.reserve(4*sec, srsv("absent", 1, sec, oldest, 1, 1), srsv("absent", 1, sec, last, per, 1))
		for i, id := range []uint64{oldest, last} {
			if !got[i].Duplicate || got[i].Status != UnknownLimit {
				t.Fatalf("retry in session %d = %+v, want its recorded answer (no live session is closed)", id, got[i])
			}
		}
		// The oldest acknowledges its answers with a new request, which
		// makes room: the newest's request 1 is then decided.
		got = c.reserve(5*sec, srsv("absent", 1, sec, oldest, per+1, per+1), srsv("huge", 1, sec, newest, 1, 1))
		if got[0].Status != UnknownLimit || got[0].Duplicate || got[1].Status != Granted || got[1].Duplicate {
			t.Fatalf("after an acknowledgement: %+v, want the new requests decided", got)
		}
		if n, outcomes := c.f.SessionCount(); n != full+1 || outcomes != MaxSessionResults-per+2 {
			t.Fatalf("after the acknowledgement %d sessions keep %d outcomes, want %d keeping %d", n, outcomes, full+1, MaxSessionResults-per+2)
		}
	}
	if a, b := snapshotBytes(t, h.f), snapshotBytes(t, twin.f); !bytes.Equal(a, b) {
		t.Fatalf("the original and its restored copy diverged after the same entries")
	}
}

// TestSessionQuotaPerOwner: an owner opening with PerOwner N holds at most
// N sessions and N × SessionResultsPerSession answers, refused past that
// until its own least recently used session (or the one keeping answers)
// expires; other owners and sessions without an owner are not affected,
// and an acknowledgement makes room.
func TestSessionQuotaPerOwner(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", bursty(t, 1e9))
	alice := OpenSession{Owner: "alice", PerOwner: 3}
	var ids []uint64
	for i := range 3 {
		ids = append(ids, h.openAs(int64(i)*sec, alice).ID)
	}
	before := stateBody(t, h.f)
	r := h.openAs(3*sec, alice)
	if r.ID != 0 || r.RetryAfterNanos != SessionIdleNanos-3*sec || !strings.Contains(r.Detail, `owner "alice" holds 3 open sessions`) {
		t.Fatalf("alice's fourth open = %+v, want refused until her oldest session expires (%dns)", r, SessionIdleNanos-3*sec)
	}
	if !bytes.Equal(stateBody(t, h.f), before) {
		t.Fatalf("a refused open changed the state")
	}
	bob := h.openAs(3*sec, OpenSession{Owner: "bob", PerOwner: 3}).ID
	if anon := h.openAs(3*sec, OpenSession{}); anon.ID == 0 {
		t.Fatalf("an open without an owner was refused: %+v", anon)
	}

	// Alice's share of the answers: 3 × SessionResultsPerSession, all in
	// her second session.
	const quota = 3 * SessionResultsPerSession
	rs := make([]Reserve, quota)
	for i := range rs {
		rs[i] = by("alice", srsv("api", 1, 0, ids[1], uint64(i+1), 1))
	}
	for i, got := range h.reserve(4*sec, rs...) {
		if got.Status != Granted {
			t.Fatalf("alice's answer %d of %d = %+v, want Granted", i+1, quota, got)
		}
	}
	got := h.reserve1(5*sec, by("alice", srsv("api", 1, 0, ids[2], 1, 1)))
	if got.Status != Busy || got.RetryAfterNanos != 4*sec+SessionIdleNanos-5*sec || !strings.Contains(got.Detail, `owner "alice"`) {
		t.Fatalf("alice's answer %d = %+v, want Busy until her session keeping answers expires (%dns)", quota+1, got, 4*sec+SessionIdleNanos-5*sec)
	}
	if info, _ := h.f.Limit("api"); info.GrantedRequests != quota {
		t.Fatalf("%d granted, want %d: a reserve that could not be recorded was decided", info.GrantedRequests, quota)
	}
	if b := h.reserve1(5*sec, by("bob", srsv("api", 1, 0, bob, 1, 1))); b.Status != Granted {
		t.Fatalf("bob's reserve while alice's share is full = %+v, want Granted", b)
	}
	if got := h.reserve(6*sec, by("alice", srsv("api", 1, 0, ids[1], quota+1, quota+1)), by("alice", srsv("api", 1, 0, ids[2], 1, 1))); got[0].Status != Granted || got[1].Status != Granted {
		t.Fatalf("after alice acknowledges her answers: %+v, want both decided", got)
	}
	// Her oldest session (opened at 0, never used) expires: she may open
	// again.
	if r := h.openAs(SessionIdleNanos, alice); r.ID == 0 {
		t.Fatalf("alice's open once her oldest session expired = %+v, want a session", r)
	}
}

func TestOpenSessionEncoding(t *testing.T) {
	for _, o := range []OpenSession{{}, {Owner: "alice"}, {PerOwner: 1}, {Owner: strings.Repeat("o", MaxOwnerLen), PerOwner: MaxSessions}} {
		b, err := AppendOpenSessionAs(nil, at(5), o)
		if err != nil {
			t.Fatalf("AppendOpenSessionAs(%+v): %v", o, err)
		}
		e, err := Decode(b)
		if err != nil || e.Type != CmdOpenSession || e.OpenSession != o {
			t.Fatalf("Decode(AppendOpenSessionAs(%+v)) = %+v, %v", o, e.OpenSession, err)
		}
	}
	if b, _ := AppendOpenSessionAs(nil, at(5), OpenSession{}); !bytes.Equal(b, AppendOpenSession(nil, at(5))) {
		t.Fatalf("an open without owner or quota encodes differently from AppendOpenSession")
	}
	for _, tc := range []struct {
		o    OpenSession
		want string
	}{
		{OpenSession{Owner: strings.Repeat("o", MaxOwnerLen+1)}, "129 bytes"},
		{OpenSession{PerOwner: MaxSessions + 1}, "65537 sessions per owner"},
		{OpenSession{PerOwner: -1}, "-1 sessions per owner"},
	} {
		if _, err := AppendOpenSessionAs(nil, at(5), tc.o); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AppendOpenSessionAs(%+v) = %v, want ErrInvalidCommand containing %q", tc.o, err, tc.want)
		}
	}
	// The empty payload spelled out is not canonical.
	if _, err := Decode(append(AppendOpenSession(nil, at(5)), 0, 0)); !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "carries nothing") {
		t.Errorf("an open with an explicit empty owner and quota decoded: %v", err)
	}
}
