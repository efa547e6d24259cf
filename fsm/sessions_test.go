package fsm

import (
	"bytes"
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
