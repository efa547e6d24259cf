package bucket

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzScheduler drives every pacer of validSpecs through ReserveAt,
// Charge, Release, Refund and Admits at extreme and ordinary times and counts:
// nothing panics; a ReserveAt that grants serves at exactly its time, and
// one that refuses, a failed Charge and a Release that frees nothing change
// no state byte; Admits agrees with the ReserveAt that follows it; and the
// state survives AppendState/RestoreState after every step.
func FuzzScheduler(f *testing.F) {
	f.Add(uint8(0), []byte{0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5})
	f.Add(uint8(11), []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 0, 0, 0, 0, 2, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, pick uint8, b []byte) {
		s := validSpecs[int(pick)%len(validSpecs)]
		p := mustNew(t, s)
		sch := p.(Scheduler)
		rel, isHold := p.(Releaser)
		ref, isRefunder := p.(Refunder)
		seen := int64(0)
		for len(b) >= 24 {
			now := max(int64(binary.BigEndian.Uint64(b)), seen)
			n := int64(binary.BigEndian.Uint64(b[8:]))
			x := int64(binary.BigEndian.Uint64(b[16:]))
			b = b[24:]
			before := p.AppendState(nil)
			switch op := n & 3; {
			case op == 0: // ReserveAt at Query + x
				n = n>>2&15 + 1
				q, err := p.Query(now, n)
				if err != nil {
					continue
				}
				at := satAdd(q, max(x, 0)&0xffffffffff)
				admits := false
				if isHold {
					admits = rel.Admits(now, n, at)
				}
				d, err := sch.ReserveAt(now, n, at)
				if err != nil {
					t.Fatalf("ReserveAt(%d, %d, %d) on %s: %v", now, n, at, s.Algorithm, err)
				}
				if isHold && admits != d.Granted {
					t.Fatalf("Admits(%d, %d, %d) = %v, ReserveAt granted %v", now, n, at, admits, d.Granted)
				}
				switch {
				case d.Granted && d.AtNanos != at:
					t.Fatalf("ReserveAt(%d, %d, %d) served at %d", now, n, at, d.AtNanos)
				case d.Granted:
					seen = now
				case !bytes.Equal(before, p.AppendState(nil)):
					t.Fatalf("a refused ReserveAt(%d, %d, %d) changed the state", now, n, at)
				}
			case op == 1: // Charge
				n = n >> 2
				if err := sch.Charge(now, n); err != nil {
					if !bytes.Equal(before, p.AppendState(nil)) {
						t.Fatalf("a failed Charge(%d, %d) changed the state", now, n)
					}
				} else {
					seen = now
				}
			case op == 2 && isRefunder: // Refund, not before the next free time as of now
				k := n >> 2
				q, _ := p.Query(now, 1)
				if got := ref.Refund(now, k, max(x, 0), q); got < 0 || got > max(k, 0) {
					t.Fatalf("Refund(%d, %d, %d, %d) = %d, want 0..%d", now, k, x, q, got, max(k, 0))
				} else if got == 0 && !bytes.Equal(before, p.AppendState(nil)) {
					t.Fatalf("a Refund(%d, %d, %d) that took nothing back changed the state", now, k, x)
				} else if after, _ := p.Query(now, 1); got > 0 && after < q {
					t.Fatalf("a Refund(%d, %d, %d, %d) moved the next free time back to %d", now, k, x, q, after)
				} else if got > 0 {
					seen = now
				}
			case op == 2 && isHold: // Release
				if got := rel.Release(now, x, n>>2); got == 0 && !bytes.Equal(before, p.AppendState(nil)) {
					t.Fatalf("a Release(%d, %d, %d) that freed nothing changed the state", now, x, n>>2)
				} else if got > 0 {
					seen = now
				}
			default: // Reserve
				n = n>>2&15 + 1
				if d, err := p.Reserve(now, n, max(x, 0)); err == nil && d.Granted {
					seen = now
				}
			}
			checkStateRoundTrip(t, p)
		}
	})
}
