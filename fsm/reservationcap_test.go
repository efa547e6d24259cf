package fsm

import (
	"bytes"
	"testing"
)

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
