package fsm

import (
	"fmt"
	"testing"
	"time"
)

func TestDedupSameBatch(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", strict(t, 1, 5))
	res := h.reserve(0,
		rsv("api", 1, 10*sec, "x"),
		rsv("api", 1, 10*sec, "x"),
		rsv("api", 1, 10*sec, ""),
		rsv("api", 1, 10*sec, ""),
	)
	first, dup := res[0], res[1]
	if first.Duplicate || !dup.Duplicate {
		t.Fatalf("Duplicate flags %v, %v; want false, true", first.Duplicate, dup.Duplicate)
	}
	dup.Duplicate = false
	if dup != first {
		t.Fatalf("duplicate %+v, want the first result %+v", dup, first)
	}
	if res[2].Duplicate || res[3].Duplicate {
		t.Fatalf("reserves without an id were deduplicated: %+v", res[2:])
	}
	if res[2].Status == Granted && res[2].WaitNanos == first.WaitNanos {
		t.Fatalf("the duplicate reserved nothing, so the next reserve must wait longer than the first: %+v", res)
	}
	if info, _ := h.f.Limit("api"); info.GrantedRequests+info.RefusedRequests != 3 {
		t.Fatalf("counters %+v: a duplicate must not be counted", info)
	}
	if h.f.DedupEntries() != 1 {
		t.Fatalf("DedupEntries = %d, want 1", h.f.DedupEntries())
	}
}

func TestDedupLaterEntryRebasesTimes(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", strict(t, 1, 5))
	h.reserve1(0, rsv("api", 1, 0, ""))
	first := h.reserve1(0, rsv("api", 1, 10*sec, "x"))
	if first.Status != Granted || first.WaitNanos <= 0 {
		t.Skipf("the strict pacer did not grant a waiting reserve: %+v", first)
	}
	half := first.WaitNanos / 2
	again := h.reserve1(half, rsv("other-limit-ignored", 9, 0, "x"))
	want := first
	want.Duplicate = true
	want.WaitNanos -= half
	want.NowNanos = half
	if want.ExpiresInNanos != 0 {
		want.ExpiresInNanos -= half
	}
	if again != want {
		t.Fatalf("duplicate at +%dns = %+v, want %+v (same decision, relative to the later time)", half, again, want)
	}
	// Long after the grant and its expiry, within the window: wait 0, expired.
	late := h.reserve1(DedupWindowNanos-1, rsv("api", 1, 0, "x"))
	if !late.Duplicate || late.Status != Granted || late.WaitNanos != 0 ||
		(first.ExpiresInNanos != 0 && late.ExpiresInNanos != -1) {
		t.Fatalf("late duplicate = %+v, want a Granted duplicate, wait 0, ExpiresInNanos -1 if it had an expiry", late)
	}
}

func TestDedupRecordsEveryOutcome(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", strict(t, 1, 0))
	h.reserve1(0, rsv("api", 1, 0, ""))
	refused := h.reserve1(0, rsv("api", 1, 0, "r"))
	unknown := h.reserve1(0, rsv("later", 1, 0, "u"))
	h.put(0, "later", strict(t, 1, 0))
	if refused.Status != Refused || unknown.Status != UnknownLimit {
		t.Fatalf("setup: %+v %+v", refused, unknown)
	}
	if got := h.reserve1(refused.RetryAfterNanos, rsv("api", 1, 0, "r")); !got.Duplicate || got.Status != Refused || got.RetryAfterNanos != 1 {
		t.Fatalf("refused duplicate at its retry time = %+v, want a Refused duplicate with RetryAfterNanos 1", got)
	}
	if got := h.reserve1(refused.RetryAfterNanos, rsv("later", 1, 0, "u")); got != (ReserveResult{Status: UnknownLimit, Duplicate: true, NowNanos: refused.RetryAfterNanos}) {
		t.Fatalf("unknown-limit duplicate = %+v: an id names one decision", got)
	}
}

func TestDedupWindow(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", strict(t, 1000, 0))
	t0 := 5 * sec
	if got := h.reserve1(t0, rsv("api", 1, 0, "x")); got.Status != Granted {
		t.Fatalf("first = %+v", got)
	}
	if got := h.reserve1(t0+DedupWindowNanos-1, rsv("api", 1, 0, "x")); !got.Duplicate {
		t.Fatalf("just inside the window = %+v, want Duplicate", got)
	}
	if h.f.DedupEntries() != 1 {
		t.Fatalf("DedupEntries = %d, want 1", h.f.DedupEntries())
	}
	// A noop at the end of the window evicts the id, driven by entry time only.
	h.noop(t0 + DedupWindowNanos)
	if h.f.DedupEntries() != 0 {
		t.Fatalf("DedupEntries = %d after the window, want 0", h.f.DedupEntries())
	}
	if got := h.reserve1(t0+DedupWindowNanos, rsv("api", 1, 0, "x")); got.Duplicate || got.Status != Granted {
		t.Fatalf("after the window = %+v, want a fresh grant", got)
	}
}

// TestDedupFullTableAnswersBusy: a full table of reserve IDs takes no new
// ID (forgetting one younger than the window would let its late retry be
// decided afresh): a reserve with a new ID is Busy until the oldest ID
// ages out, and every remembered ID is still answered from the table.
func TestDedupFullTableAnswersBusy(t *testing.T) {
	h := &harness{t: t, f: newFSM(DedupWindowNanos, 3)}
	h.put(0, "api", strict(t, 1e6, 0))
	for i, id := range []string{"a", "b", "c"} {
		h.reserve1(int64(i)*sec, rsv("api", 1, 0, id))
	}
	busy := h.reserve1(10*sec, rsv("api", 1, 0, "d"))
	if busy.Status != Busy || busy.RetryAfterNanos != DedupWindowNanos-10*sec || busy.Duplicate {
		t.Fatalf("a new ID in a full table = %+v, want Busy, retry when the oldest ID (recorded at 0) ages out", busy)
	}
	res := h.reserve(10*sec, rsv("api", 1, 0, "c"), rsv("api", 1, 0, "b"), rsv("api", 1, 0, "a"), rsv("api", 1, 0, ""))
	if !res[0].Duplicate || !res[1].Duplicate || !res[2].Duplicate || res[3].Status != Granted {
		t.Fatalf("remembered IDs and a reserve without an ID in a full table: %+v; want three duplicates and a grant", res)
	}
	if info, _ := h.f.Limit("api"); info.GrantedRequests != 4 {
		t.Fatalf("a Busy reserve was counted or granted: %+v", info)
	}
	if got := h.reserve1(DedupWindowNanos, rsv("api", 1, 0, "d")); got.Status != Granted || got.Duplicate {
		t.Fatalf("once the oldest ID aged out = %+v, want a fresh grant", got)
	}
}

// TestDedupTableQueue exercises the queue's compaction and reset with many
// insertions and evictions.
func TestDedupTableQueue(t *testing.T) {
	tab := newDedupTable(100, 50, true)
	for i := range 10000 {
		now := int64(i)
		tab.expire(now)
		id := fmt.Sprint(i)
		tab.add(dedupRecord{id: id, recordedAtNanos: now})
		if rec := tab.lookup(id); rec == nil || rec.id != id {
			t.Fatalf("step %d: lookup(%s) = %+v", i, id, rec)
		}
		if i >= 50 {
			if tab.lookup(fmt.Sprint(i-50)) != nil || tab.lookup(fmt.Sprint(i-49)) == nil {
				t.Fatalf("step %d: wrong records kept", i)
			}
		}
		if tab.len() > 50 || len(tab.seqByID) != tab.len() || cap(tab.queue) > 256 {
			t.Fatalf("step %d: len %d, map %d, cap %d", i, tab.len(), len(tab.seqByID), cap(tab.queue))
		}
	}
	tab.expire(1 << 40)
	if tab.len() != 0 || len(tab.seqByID) != 0 {
		t.Fatalf("after expiring everything: len %d map %d", tab.len(), len(tab.seqByID))
	}
}

// TestShadowGrantReplayExpires: a grant made in shadow mode is answered at
// once and without an expiry, but its replay expires one replay period
// after its time like every replayed grant (issue: shadow strict 1/s,
// reserve X, shadow off, 5 s later a fresh grant at once, and the replay
// of X granted again without expiry: two permits in a 0 s window). The
// same through a session, and for a reserve in the reservation form on a
// shadow in-flight cap alone (no interval: its hold TTL).
func TestShadowGrantReplayExpires(t *testing.T) {
	h := newHarness(t)
	h.putShadow(0, "api", strict(t, 1, 0))
	h.putShadow(0, "cap", concurrency(t, 1, 2*time.Second))
	sess := h.openSession(0)
	first := h.reserve(0, rsv("api", 1, 0, "X"), srsv("api", 1, 0, sess.ID, 1, 1),
		Reserve{Limit: "cap", Permits: 1, Track: true, RequestID: "C"})
	for i, r := range first {
		if r.Status != Granted || r.WaitNanos != 0 || r.ExpiresInNanos != 0 {
			t.Fatalf("shadow reserve %d: %+v, want granted at once, without an expiry (shadow mode refuses nothing)", i, r)
		}
	}
	half := h.reserve(sec/2, rsv("api", 1, 0, "X"), srsv("api", 1, 0, sess.ID, 1, 1),
		Reserve{Limit: "cap", Permits: 1, Track: true, RequestID: "C"})
	for i, want := range []int64{sec / 2, sec / 2, 2*sec - sec/2} {
		if r := half[i]; !r.Duplicate || r.Status != Granted || r.ExpiresInNanos != want {
			t.Errorf("replay %d half a second later: %+v, want a duplicate expiring in %v", i, r, time.Duration(want))
		}
	}
	h.put(sec, "api", strict(t, 1, 0)) // shadow mode off
	if r := h.reserve1(5*sec, rsv("api", 1, 0, "")); r.Status != Granted || r.WaitNanos != 0 {
		t.Fatalf("fresh enforced reserve 5 s later: %+v, want granted at once", r)
	}
	late := h.reserve(5*sec, rsv("api", 1, 0, "X"), srsv("api", 1, 0, sess.ID, 1, 1),
		Reserve{Limit: "cap", Permits: 1, Track: true, RequestID: "C"})
	for i, r := range late {
		if !r.Duplicate || r.Status != Granted || r.ExpiresInNanos != -1 {
			t.Errorf("replay %d after 5 s: %+v, want a duplicate that expired (-1): the enforced limit just granted a permit", i, r)
		}
	}
}
