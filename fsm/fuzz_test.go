package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// FuzzDecode checks that Decode never panics, that its errors wrap a
// sentinel, and that whatever decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, b := range randomLog(f, 5, 40) {
		f.Add(b)
	}
	for _, b := range leaseEntries(f) {
		f.Add(b)
	}
	f.Add(leaseBatchEntry(f))
	f.Add([]byte{})
	f.Add([]byte{byte(CmdNoop), EncodingVersion})
	f.Add([]byte{byte(CmdReserveBatch), EncodingVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x04})
	for _, b := range reservationEntries(f) {
		f.Add(b)
	}
	if b, err := AppendExpiredGrants(nil, at(3), []ExpiredGrant{{DecidedIndex: 9, Parts: []Part{{"a", 1}, {"b", 2}}}}); err == nil {
		f.Add(b)
	}
	ref := SessionRef{ID: 4, Seq: 2, AckedBelow: 1}
	if b, err := AppendReserveBatch(nil, at(3), []Reserve{{Limit: "a", Permits: 1, Session: ref}, {Limit: "a", Permits: 1, Session: ref, Owner: "alice"}}); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("Decode error %v wraps neither ErrDecode nor ErrInvalidCommand", err)
			}
			return
		}
		if got := reencode(t, e); !bytes.Equal(got, b) {
			t.Fatalf("Decode(%x) = %+v re-encodes to %x", b, e, got)
		}
	})
}

// FuzzRestore checks that Restore never panics, that its errors wrap
// ErrDecode, and that an accepted snapshot is reproduced byte for byte.
func FuzzRestore(f *testing.F) {
	f.Add(snapshotBytes(f, New()))
	f.Add(snapshotBytes(f, richState(f).f))
	f.Add(snapshotBytes(f, leaseState(f).f))
	h := newHarness(f)
	for _, e := range randomLog(f, 9, 100) {
		h.apply(e)
	}
	f.Add(snapshotBytes(f, h.f))
	// Sessions with outcomes of every kind.
	sh := newHarness(f)
	sh.put(0, "api", strict(f, 2, 3))
	a := sh.openSession(0).ID
	b := sh.openSession(sec).ID
	sh.reserve(2*sec, srsv("api", 1, 5*sec, a, 4, 2), srsv("api", 2, 0, b, 1, 1), srsv("nope", 1, 0, b, 7, 1), srsv("api", 9, 0, a, 5, 2))
	f.Add(snapshotBytes(f, sh.f))
	f.Add([]byte("PRMTFSM\x04"))
	f.Add(snapshotBytes(f, reservationState(f).f))
	f.Add(snapshotBytes(f, templatedState(f).f))
	f.Fuzz(func(t *testing.T, b []byte) {
		fsm := New()
		if err := restore(fsm, b); err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("Restore error %v does not wrap ErrDecode", err)
			}
			if fsm.AppliedIndex() != 0 || len(fsm.Limits()) != 0 {
				t.Fatalf("a failed Restore changed the state")
			}
			return
		}
		if got := snapshotBytes(t, fsm); !bytes.Equal(got, b) {
			t.Fatalf("accepted snapshot re-encodes differently")
		}
		if fsm.StateHash() != sha256.Sum256(b) {
			t.Fatalf("StateHash is not the SHA-256 of the snapshot")
		}
	})
}

// reservationEntries are entries of the reservation commands, for seeds:
// tracked reserves (no key, a request id, several limits, an owner, a
// settle window), settlements (with and without actual uses), releases,
// and puts of a concurrency limit and in shadow mode.
func reservationEntries(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	add := func(b []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	add(AppendPut(nil, at(1), PutLimit{Name: "cap", Config: concurrency(t, 4, time.Minute)}))
	add(AppendPut(nil, at(2), PutLimit{Name: "tpm", Config: bursty(t, 1000), Shadow: true}))
	add(AppendPut(nil, at(3), PutLimit{Name: "cap", Config: concurrency(t, bucket.MaxInFlightLimit, bucket.MaxHoldTTL), Shadow: true}))
	add(AppendReserveBatch(nil, at(4), []Reserve{
		{Limit: "rpm", Permits: 1, MaxWaitNanos: sec, Track: true},
		{Limit: "rpm", Permits: 1, MaxWaitNanos: 2 * sec, RequestID: "q", Track: true, Owner: "o",
			Also: []Part{{"tpm", 1500}, {"cap", 1}}, SettleWithinNanos: MaxSettleWindowNanos},
		{Limit: "a", Permits: 2, Track: true, SettleWithinNanos: 1,
			Also: []Part{{"b", 1}, {"c", 1}, {"d", 1}, {"e", 1}, {"f", 1}, {"g", 1 << 62}}, Owner: strings.Repeat("w", MaxOwnerLen)},
		{Limit: "rpm", Permits: 3, RequestID: "plain"},
	}))
	add(AppendSettle(nil, at(5), Settle{Reservation: 1}))
	add(AppendSettle(nil, at(6), Settle{Reservation: math.MaxUint64, RequestID: "s1", Owner: "o",
		Actual: []Part{{"rpm", 0}, {"tpm", math.MaxInt64}, {"cap", 1}}}))
	add(AppendRelease(nil, at(7), Release{Reservation: 2}))
	add(AppendRelease(nil, at(8), Release{Reservation: 1 << 40, Owner: "o"}))
	add(AppendWithdraw(nil, at(9), Withdraw{RequestID: "q"}))
	add(AppendWithdraw(nil, at(10), Withdraw{RequestID: "w.n1.0f", Owner: "o", Force: true}))
	add(AppendWithdraw(nil, at(11), Withdraw{RequestID: "q", Owner: "o", GraceNanos: int64(7 * time.Second)}))
	return out
}

// reservationState returns a harness holding live reservations of every
// kind (settled with refunds and charges, released, on a shadow limit, on
// a deleted limit) and a concurrency limit with several holds.
func reservationState(t testing.TB) *harness {
	t.Helper()
	h := newHarness(t)
	h.put(0, "rpm", strict(t, 10, 5))
	h.put(0, "tpm", bursty(t, 1000))
	h.put(0, "cap", concurrency(t, 4, time.Minute))
	h.put(0, "warm", compile(t, bucket.Spec{Algorithm: bucket.WarmingUp, Rate: 50, Warmup: 3 * time.Second}))
	h.put(0, "hyb", compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: 50}))
	h.putShadow(0, "shadow", bursty(t, 1))
	h.put(0, "gone", bursty(t, 5))
	r1 := h.reserve1(sec, tracked(2*sec, Part{"rpm", 1}, Part{"tpm", 800}, Part{"cap", 2}, Part{"shadow", 3}))
	r2 := h.reserve1(sec, Reserve{Limit: "cap", Permits: 1, Track: true, RequestID: "r2", Owner: "me", SettleWithinNanos: 5 * sec})
	r3 := h.reserve1(sec+1, tracked(10*sec, Part{"hyb", 1}, Part{"warm", 2}, Part{"gone", 1}))
	for _, r := range []ReserveResult{r1, r2, r3} {
		if r.Status != Granted {
			t.Fatalf("reservationState: a reserve was answered %+v", r)
		}
	}
	r4 := h.reserve1(sec+2, tracked(0, Part{"tpm", 10}))
	h.reserve1(sec+3, tracked(0, Part{"cap", 4})) // refused, blocking cap (recorded nowhere)
	h.reserve1(sec+3, Reserve{Limit: "cap", Permits: 4, Track: true, RequestID: "refused"})
	h.reserve1(sec+3, Reserve{Limit: "nope", Permits: 1, Track: true, RequestID: "unknown"})
	h.del(sec+4, "gone")
	h.settleCmd(2*sec, Settle{Reservation: r1.ReservationID, RequestID: "s1", Actual: []Part{{"cap", 1}, {"tpm", 900}}})
	h.releaseCmd(2*sec, Release{Reservation: r2.ReservationID, Owner: "me"})
	h.settleCmd(2*sec+1, Settle{Reservation: r4.ReservationID, Actual: []Part{{"tpm", 3}}})
	h.settleCmd(2*sec+2, Settle{Reservation: r3.ReservationID, RequestID: "s3", Actual: []Part{{"hyb", 0}, {"gone", 7}}})
	if h.f.Reservations() != 4 {
		t.Fatalf("reservationState holds %d reservations, want 4", h.f.Reservations())
	}
	return h
}

// FuzzRestoreBody is FuzzRestore past the checksum: the input is a
// snapshot without its CRC, which the target appends, so that mutations
// reach the decoders of every section (FuzzRestore's mutations almost
// all stop at the checksum).
func FuzzRestoreBody(f *testing.F) {
	body := func(b []byte) []byte { return b[:len(b)-4] }
	f.Add(body(snapshotBytes(f, New())))
	f.Add(body(snapshotBytes(f, richState(f).f)))
	f.Add(body(snapshotBytes(f, leaseState(f).f)))
	f.Add(body(snapshotBytes(f, reservationState(f).f)))
	f.Add(body(snapshotBytes(f, templatedState(f).f)))
	f.Fuzz(func(t *testing.T, b []byte) {
		b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
		fsm := New()
		if err := restore(fsm, b); err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("Restore error %v does not wrap ErrDecode", err)
			}
			return
		}
		if got := snapshotBytes(t, fsm); !bytes.Equal(got, b) {
			t.Fatalf("accepted snapshot re-encodes differently")
		}
		checkNameIndexes(t, fsm)
	})
}

// templatedState is a register with templates and their keys: one key
// made explicit (a bigger plan), keys of a cap template held, and two
// limits sharing one config (one entry of the snapshot's config table).
func templatedState(t testing.TB) *harness {
	h := templateHarness(t)
	h.reserve1(3*sec, tracked(0, Part{Limit: "t:a", Permits: 1}, Part{Limit: "c:b", Permits: 1}))
	h.put(3*sec, "t:old", strict(t, 2, 2))
	h.put(3*sec, "y", strict(t, 1, 0))
	return h
}
