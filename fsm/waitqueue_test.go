package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWaiterBounds: a cap's queue holds at most MaxWaitersPerLimit
// waiting reserves, and one owner's share of it MaxWaitersPerOwner: a
// reserve that would wait beyond is answered Busy, naming the bound, with
// the time until one of the waiters it counts against may leave the queue
// without a command (the earliest of their deadlines and the cap's next
// lapse), and changes nothing: no reservation, no limit's state, no
// counter, no record of its request ID (a retry once there is room is
// decided afresh). Reserves without an owner (no tokens) are bounded by
// the limit's bound alone. Run at the real bounds.
func TestWaiterBounds(t *testing.T) {
	const sec = int64(time.Second)
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 1, 10*time.Second))
	if res := h.reserve1(sec, tracked(0, Part{Limit: "cap", Permits: 1})); res.Status != Granted {
		t.Fatalf("the holder: %+v", res)
	}
	waitOn := func(now int64, owner, id string, maxWait time.Duration) ReserveResult {
		t.Helper()
		q := tracked(int64(maxWait), Part{Limit: "cap", Permits: 1})
		q.Owner, q.RequestID = owner, id
		return h.reserve1(now, q)
	}
	// o1 fills its share, with deadlines from 61 s on: the first, 30 s.
	for i := range MaxWaitersPerOwner {
		maxWait := time.Minute + time.Duration(i)*time.Millisecond
		if i == 0 {
			maxWait = 30 * time.Second
		}
		if res := waitOn(sec+1, "o1", fmt.Sprintf("o1-%d", i), maxWait); res.Status != Queued {
			t.Fatalf("o1's reserve %d: %+v, want queued", i, res)
		}
	}
	busy := func(what string, res ReserveResult, wantRetry int64, wantDetail string) {
		t.Helper()
		if res.Status != Busy || res.RetryAfterNanos != wantRetry || !strings.Contains(res.Detail, wantDetail) {
			t.Fatalf("%s: %+v, want Busy, retry after %v, naming %q", what, res, time.Duration(wantRetry), wantDetail)
		}
	}
	// changesNothing checks that a reserve answered Busy left the cap, its
	// counters, the reservations, the queue and the request IDs as they
	// were.
	changesNothing := func(what, id string, do func()) {
		t.Helper()
		pacer, info := h.f.st.limits["cap"].pacer.AppendState(nil), h.f.st.limits["cap"].info(h.f.st.lastNowNanos, h.f.st.reservations.open(h.f.st.lastNowNanos)["cap"])
		lastID, live, waiting, ids := h.f.st.reservations.lastID, h.f.st.reservations.len(), h.f.Waiting(), h.f.st.dedup.len()
		do()
		if !bytes.Equal(h.f.st.limits["cap"].pacer.AppendState(nil), pacer) || h.f.st.limits["cap"].info(h.f.st.lastNowNanos, h.f.st.reservations.open(h.f.st.lastNowNanos)["cap"]) != info {
			t.Fatalf("%s changed the cap's state or counters", what)
		}
		if h.f.st.reservations.lastID != lastID || h.f.st.reservations.len() != live || h.f.Waiting() != waiting || h.f.st.dedup.len() != ids ||
			h.f.st.dedup.lookup(id) != nil {
			t.Fatalf("%s made a reservation, a waiter or a record of its request ID", what)
		}
	}
	// o1's next: over its share. Retry when o1's first waiter's deadline
	// (31 s) comes, unless the hold lapses first (11 s).
	changesNothing("o1 over its share", "o1-over", func() {
		busy("o1 over its share", waitOn(2*sec, "o1", "o1-over", time.Minute), 9*sec,
			fmt.Sprintf(`"o1" has %d reserves waiting in the queue of limit "cap", the most one token may (fsm.MaxWaitersPerOwner, %d of the queue's %d)`,
				MaxWaitersPerOwner, MaxWaitersPerOwner, MaxWaitersPerLimit))
	})
	// The others fill the rest: o2, o3 and anonymous reserves.
	for i := MaxWaitersPerOwner; i < MaxWaitersPerLimit; i++ {
		owner := []string{"o2", "o3", ""}[i%3]
		if res := waitOn(2*sec, owner, fmt.Sprintf("w-%d", i), 2*time.Minute); res.Status != Queued {
			t.Fatalf("reserve %d of %q: %+v, want queued", i, owner, res)
		}
	}
	if n := h.f.Waiting(); n != MaxWaitersPerLimit {
		t.Fatalf("%d waiting, want %d", n, MaxWaitersPerLimit)
	}
	full := fmt.Sprintf(`%d reserves wait in the queue of limit "cap", the most one limit's queue holds (fsm.MaxWaitersPerLimit, %d)`,
		MaxWaitersPerLimit, MaxWaitersPerLimit)
	changesNothing("an anonymous reserve on a full queue", "anon-over", func() {
		busy("an anonymous reserve on a full queue", waitOn(3*sec, "", "anon-over", time.Minute), 8*sec, full)
	})
	changesNothing("o4's first on a full queue", "o4-over", func() {
		busy("o4's first on a full queue", waitOn(3*sec, "o4", "o4-over", time.Minute), 8*sec, full)
	})
	// A replay of a waiting reserve still joins its wait; a reserve that
	// would not wait is not bounded.
	if res := waitOn(3*sec, "o1", "o1-5", time.Minute); res.Status != Queued || !res.Duplicate {
		t.Fatalf("a replay of a waiting reserve on a full queue: %+v, want its wait", res)
	}
	if res := waitOn(3*sec, "o4", "o4-now", 0); res.Status != Refused || res.Blocking != "cap" {
		t.Fatalf("a reserve with no max wait on a full queue: %+v, want refused naming the cap", res)
	}
	// The hold lapses at 11 s: the first waiter is granted, the queue has
	// room again, and the Busy request IDs are decided afresh.
	h.noop(11 * sec)
	if res := waitOn(11*sec+1, "o4", "o4-over", time.Minute); res.Status != Queued || res.Duplicate {
		t.Fatalf("o4's retry after a waiter left: %+v, want queued afresh", res)
	}
	if res := waitOn(11*sec+1, "o1", "o1-over", time.Minute); res.Status != Busy {
		t.Fatalf("o1's retry: %+v, want Busy again (the queue is full again)", res)
	}
}
