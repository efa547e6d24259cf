package bucket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzRestoreState feeds arbitrary bytes to every pacer's RestoreState: it
// must never panic, must reject what it cannot use with ErrCorruptState, and
// what it accepts must encode back to the same bytes.
func FuzzRestoreState(f *testing.F) {
	for _, s := range validSpecs {
		p := mustNew(f, s)
		f.Add(uint8(s.Algorithm), p.AppendState(nil))
		_, _ = p.Reserve(12345, 1, 0)
		f.Add(uint8(s.Algorithm), p.AppendState(nil))
	}
	f.Add(uint8(0), []byte{})
	// Concurrency states with several holds, one partly released, one
	// granted ahead of its time.
	for i, s := range validSpecs {
		if s.Algorithm != Concurrency {
			continue
		}
		p := mustNew(f, s).(*ConcurrencyPacer)
		d1, _ := p.Reserve(10, 1, 0)
		_, _ = p.ReserveAt(20, 1, 30)
		_, _ = p.Reserve(40, 1, math.MaxInt64)
		p.Release(41, d1.ExpiresAtNanos, 1)
		f.Add(uint8(i), p.AppendState(nil))
	}
	f.Fuzz(func(t *testing.T, pick uint8, b []byte) {
		s := validSpecs[int(pick)%len(validSpecs)]
		p := mustNew(t, s)
		before := p.AppendState(nil)
		if err := p.RestoreState(b); err != nil {
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("RestoreState error %v does not wrap ErrCorruptState", err)
			}
			if !bytes.Equal(p.AppendState(nil), before) {
				t.Fatalf("a rejected RestoreState changed the state")
			}
			return
		}
		if got := p.AppendState(nil); !bytes.Equal(got, b) {
			t.Fatalf("restore→encode %x, want %x", got, b)
		}
		// Whatever was restored, calls must not panic.
		for _, now := range []int64{math.MinInt64, 0, math.MaxInt64} {
			_, _ = p.Reserve(now, 1, math.MaxInt64)
			_, _ = p.Query(now, 1)
		}
	})
}

// FuzzPacerExtremes drives every algorithm with arbitrary int64 times,
// counts and waits: no panic, no grant before now or beyond maxWait.
func FuzzPacerExtremes(f *testing.F) {
	f.Add(uint8(0), []byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(4), []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, pick uint8, b []byte) {
		s := validSpecs[int(pick)%len(validSpecs)]
		p := mustNew(t, s)
		// A smaller now counts as the largest seen, and the timeline starts
		// at the origin (0 for mustNew): a now before it counts as the origin.
		seen := int64(0)
		for len(b) >= 24 {
			now := max(int64(binary.BigEndian.Uint64(b)), seen)
			n := int64(binary.BigEndian.Uint64(b[8:]))
			maxWait := int64(binary.BigEndian.Uint64(b[16:]))
			b = b[24:]
			switch {
			case n&3 == 3 && n > 0:
				c := mustCompile(t, validSpecs[int(n>>2)%len(validSpecs)])
				err := p.Reconfigure(now, c)
				if (err == nil) != (c.Spec.Algorithm == s.Algorithm) {
					t.Fatalf("Reconfigure %s→%s: %v", s.Algorithm, c.Spec.Algorithm, err)
				}
				if err == nil {
					seen = now
				}
				continue
			case n&1 == 1:
				n = n&15 + 1 // mostly small counts
			}
			d, err := p.Reserve(now, n, maxWait)
			if err != nil {
				if n > 0 && n <= p.Config().MaxPermits() && maxWait >= 0 {
					t.Fatalf("Reserve(%d, %d, %d) on %s: %v", now, n, maxWait, s.Algorithm, err)
				}
				continue
			}
			if d.Granted && (d.AtNanos < now || satSub(d.AtNanos, now) > maxWait) {
				t.Fatalf("Reserve(%d, %d, %d) = %+v", now, n, maxWait, d)
			}
			if d.Granted {
				seen = now
			}
			checkStateRoundTrip(t, p)
		}
	})
}

func TestAlgorithmNames(t *testing.T) {
	for _, a := range []Algorithm{Strict, Bursty, WarmingUp, Hybrid, Concurrency} {
		got, err := ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a.String(), got, err)
		}
	}
	if _, err := ParseAlgorithm("leaky"); !errors.Is(err, ErrInvalidAlgorithm) || !strings.Contains(err.Error(), "allowed: strict, bursty, warmup, hybrid, concurrency") {
		t.Errorf("ParseAlgorithm(leaky): %v", err)
	}
	if got := Concurrency.String(); got != "concurrency" {
		t.Errorf("Concurrency.String() = %q", got)
	}
}

// TestStateCorruptionRejected checks the header checks of every pacer.
func TestStateCorruptionRejected(t *testing.T) {
	for _, s := range validSpecs {
		p := mustNew(t, s)
		_, _ = p.Reserve(1, 1, 0)
		good := p.AppendState(nil)
		bad := map[string][]byte{
			"empty":              nil,
			"truncated":          good[:len(good)-1],
			"long":               append(append([]byte(nil), good...), 0),
			"version":            append([]byte{9}, good[1:]...),
			"algorithm":          append([]byte{good[0], good[1] ^ 7}, good[2:]...),
			"flags":              append([]byte{good[0], good[1], 2}, good[3:]...),
			"fresh but not zero": append([]byte{good[0], good[1], 0}, good[3:]...),
		}
		for name, b := range bad {
			if err := p.RestoreState(b); !errors.Is(err, ErrCorruptState) {
				t.Errorf("%s %s: %v", s.Algorithm, name, err)
			}
		}
		if !bytes.Equal(p.AppendState(nil), good) {
			t.Errorf("%s: rejected states changed the state", s.Algorithm)
		}
	}
}

// TestPackageDocExample replays the worked example of doc.go.
func TestPackageDocExample(t *testing.T) {
	strict := mustNewAt(t, Spec{Algorithm: Strict, Rate: 1, Per: 6e9}, 2*sec)
	bursty := mustNewAt(t, Spec{Algorithm: Bursty, Rate: 1, Per: 6e9, MaxBurstSeconds: 6}, 2*sec)
	steps := []struct {
		now            int64
		strict, bursty Decision
	}{
		{2 * sec, Decision{true, 2 * sec, 5 * sec, 6 * sec}, Decision{true, 2 * sec, 0, 0}},
		{8 * sec, Decision{true, 8 * sec, 11 * sec, 6 * sec}, Decision{true, 8 * sec, 0, 0}},
		{13 * sec, Decision{false, 14 * sec, 0, 0}, Decision{false, 14 * sec, 0, 0}},
		{14 * sec, Decision{true, 14 * sec, 17 * sec, 6 * sec}, Decision{true, 14 * sec, 0, 0}},
		{40 * sec, Decision{true, 40 * sec, 43 * sec, 6 * sec}, Decision{true, 40 * sec, 0, 0}},
		{40 * sec, Decision{false, 46 * sec, 0, 0}, Decision{true, 40 * sec, 0, 0}},
	}
	for _, st := range steps {
		if got := mustReserve(t, strict, st.now, 1, 0); got != st.strict {
			t.Errorf("strict at %d: %+v, want %+v", st.now, got, st.strict)
		}
		if got := mustReserve(t, bursty, st.now, 1, 0); got != st.bursty {
			t.Errorf("bursty at %d: %+v, want %+v", st.now, got, st.bursty)
		}
	}
	if at, _ := bursty.Query(40*sec, 1); at != 46*sec {
		t.Errorf("bursty next at %d, want 46s", at)
	}
}
