package fsm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
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
