package fsm

import (
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

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
