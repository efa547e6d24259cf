package fsm

import (
	"bytes"
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

// TestSessionCapEvictsOldest: the README's promise of at most MaxSessions
// (65 536) sessions. Opening one more through Apply closes the least
// recently active session, only that one: its next reserve is
// SessionExpired and decides nothing, while the next oldest and the newest
// still answer. The full table snapshots and restores byte for byte, and
// the restored copy answers the same.
func TestSessionCapEvictsOldest(t *testing.T) {
	h := newHarness(t)
	h.put(0, "huge", bursty(t, 1e9))
	ids := make([]uint64, MaxSessions+1)
	for i := range ids {
		ids[i] = h.openSession(sec).ID
	}
	if n, outcomes := h.f.SessionCount(); n != MaxSessions || outcomes != 0 {
		t.Fatalf("%d sessions with %d outcomes after opening %d, want %d with 0", n, outcomes, len(ids), MaxSessions)
	}
	twin := restoredTwin(t, h)
	if n, _ := twin.f.SessionCount(); n != MaxSessions {
		t.Fatalf("restored %d sessions, want %d", n, MaxSessions)
	}
	oldest, second, newest := ids[0], ids[1], ids[len(ids)-1]
	for _, c := range []*harness{h, twin} {
		got := c.reserve(2*sec,
			srsv("huge", 1, sec, oldest, 1, 1),
			srsv("huge", 1, sec, second, 1, 1),
			srsv("huge", 1, sec, newest, 1, 1))
		if got[0].Status != SessionExpired || got[0].Duplicate {
			t.Fatalf("reserve of the evicted oldest session %d = %+v, want SessionExpired", oldest, got[0])
		}
		for i, id := range []uint64{second, newest} {
			if r := got[i+1]; r.Status != Granted || r.Duplicate {
				t.Fatalf("reserve of session %d = %+v, want Granted", id, r)
			}
		}
		if info, _ := c.f.Limit("huge"); info.GrantedRequests != 2 {
			t.Fatalf("%d requests granted, want 2 (the evicted session decides nothing)", info.GrantedRequests)
		}
	}
	if a, b := snapshotBytes(t, h.f), snapshotBytes(t, twin.f); !bytes.Equal(a, b) {
		t.Fatalf("the original and its restored copy diverged after the same entry")
	}
}

// TestSessionResultCapEvictsOldest: the README's promise of at most
// MaxSessionResults (2^20) answers kept by all sessions together. With
// the table at exactly that many (1024 unacknowledged answers in each
// session but one), one more answer, recorded by the session
// without answers, closes the least recently active other session, only
// that one, and keeps the new answer. The table snapshots and restores
// byte for byte. MaxSessionResults is a constant, so the test fills the
// real table: about 6-10 s and 1 GB under -race.
func TestSessionResultCapEvictsOldest(t *testing.T) {
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
	// acknowledged. The answers are UnknownLimit, recorded like
	// any other outcome but cheaper to decide (2^20 grants on a pacer take
	// several seconds under -race). The activity order is then ids[full] (no
	// reserve since it opened), ids[0], ids[1], ...: the next answer, in
	// ids[full], makes it the most recently active first, and the one
	// closed to make room must be ids[0].
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

	oldest, second, newest := ids[0], ids[1], ids[full]
	for _, c := range []*harness{h, twin} {
		if r := c.reserve1(3*sec, srsv("huge", 1, sec, newest, 1, 1)); r.Status != Granted || r.Duplicate {
			t.Fatalf("answer %d, in the newest session = %+v, want Granted", MaxSessionResults+1, r)
		}
		n, outcomes := c.f.SessionCount()
		if n != full || outcomes != MaxSessionResults+1-per {
			t.Fatalf("after one answer past the cap: %d sessions keep %d outcomes, want %d keeping %d",
				n, outcomes, full, MaxSessionResults+1-per)
		}
		got := c.reserve(4*sec,
			srsv("huge", 1, sec, oldest, 1, 1),
			srsv("huge", 1, sec, second, 1, 1),
			srsv("huge", 1, sec, newest, 1, 1))
		if got[0].Status != SessionExpired {
			t.Fatalf("reserve of the oldest session %d = %+v, want SessionExpired (evicted)", oldest, got[0])
		}
		if !got[1].Duplicate || got[1].Status != UnknownLimit {
			t.Fatalf("retry in the second oldest session %d = %+v, want its recorded answer", second, got[1])
		}
		if !got[2].Duplicate || got[2].Status != Granted {
			t.Fatalf("retry in the newest session %d = %+v, want its recorded answer (the newest is never evicted)", newest, got[2])
		}
	}
	if a, b := snapshotBytes(t, h.f), snapshotBytes(t, twin.f); !bytes.Equal(a, b) {
		t.Fatalf("the original and its restored copy diverged after the same entries")
	}
}
