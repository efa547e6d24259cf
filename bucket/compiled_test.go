package bucket

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// forge returns c with one field changed at random: a float option set to
// -0, +0 or another value, an integer moved by one or set to 0. Most
// forgeries are invalid; some (a -0 float where +0 was) differ from c only
// in the bits of a zero.
func forge(rng *rand.Rand, c Config) Config {
	floats := []*float64{&c.Spec.Rate, &c.Spec.MaxBurstSeconds, &c.Spec.ColdFactor, &c.Spec.BurstRatio, &c.Spec.Strictness}
	ints := []*int64{&c.IntervalNanos, &c.ExpiryNanos, &c.MaxStoredNanos, &c.ThresholdNanos,
		&c.ColdIntervalNanos, &c.ActiveNanos, &c.BurstNanos, &c.Spec.MaxReserved, &c.Spec.MaxInFlight}
	durs := []*time.Duration{&c.Spec.Per, &c.Spec.Expiry, &c.Spec.Warmup, &c.Spec.HoldTTL}
	switch k := rng.IntN(len(floats) + len(ints) + len(durs)); {
	case k < len(floats):
		*floats[k] = [...]float64{math.Copysign(0, -1), 0, 1, 1.5, 3}[rng.IntN(5)]
	case k < len(floats)+len(ints):
		*ints[k-len(floats)] += [...]int64{-1, 1, 0}[rng.IntN(3)]
	default:
		*durs[k-len(floats)-len(ints)] += time.Duration([...]int64{-1, 1}[rng.IntN(2)])
	}
	return c
}

// TestAppendBinaryEncodesOnlyWhatDecodes: every Config that AppendBinary
// (and New) accepts, compiled or forged, encodes to bytes DecodeConfig
// accepts and decodes to the same Config, floats to the bit. The
// replicated state machine relies on it: an entry its Append function
// accepts is never rejected on a replica. (A forged -0 option compares
// equal to the +0 Compile makes, and once passed the check while
// DecodeConfig rejected its bytes.)
func TestAppendBinaryEncodesOnlyWhatDecodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 1))
	for i := range 20_000 {
		c := mustCompile(t, validSpecs[i%len(validSpecs)])
		if i >= len(validSpecs) {
			c = forge(rng, c)
		}
		b, err := c.AppendBinary(nil)
		_, newErr := New(c, 0)
		if (err == nil) != (newErr == nil) {
			t.Fatalf("%+v: AppendBinary error %v but New error %v", c, err, newErr)
		}
		if err != nil {
			continue
		}
		d, err := DecodeConfig(b)
		if err != nil || d != c || !sameFloatBits(d.Spec, c.Spec) {
			t.Fatalf("AppendBinary accepted %+v but DecodeConfig(%x) = %+v, %v", c, b, d, err)
		}
	}
}

// TestCompiledIsNewAndReconfigure: a pacer built on a Compiled and
// reconfigured to one goes through exactly the states of one built with
// New and reconfigured with Pacer.Reconfigure, for every pair of valid
// configs of one algorithm, while Compiled.Reconfigure refuses another
// algorithm's pacer and a pacer of another package, changing nothing.
func TestCompiledIsNewAndReconfigure(t *testing.T) {
	for _, s1 := range validSpecs {
		for _, s2 := range validSpecs {
			c1, c2 := mustCompile(t, s1), mustCompile(t, s2)
			b1, _ := c1.AppendBinary(nil)
			b2, _ := c2.AppendBinary(nil)
			k1, err := DecodeCompiled(b1)
			if err != nil || k1.Config() != c1 {
				t.Fatalf("DecodeCompiled(%x) = %+v, %v; want %+v", b1, k1.Config(), err, c1)
			}
			k2, _ := DecodeCompiled(b2)
			p, err := New(c1, sec)
			if err != nil {
				t.Fatal(err)
			}
			q := k1.NewPacer(sec)
			same := func(step string) {
				t.Helper()
				if a, b := p.AppendState(nil), q.AppendState(nil); !bytes.Equal(a, b) || p.Config() != q.Config() {
					t.Fatalf("%s (%s then %s): New's pacer %x, Compiled's %x", step, s1.Algorithm, s2.Algorithm, a, b)
				}
			}
			same("fresh")
			for i := range int64(3) {
				dp, errP := p.Reserve(2*sec+i, 1, sec)
				dq, errQ := q.Reserve(2*sec+i, 1, sec)
				if dp != dq || (errP == nil) != (errQ == nil) {
					t.Fatalf("Reserve: %+v, %v vs %+v, %v", dp, errP, dq, errQ)
				}
			}
			same("after reserves")
			errP := p.Reconfigure(3*sec, c2)
			errQ := k2.Reconfigure(q, 3*sec)
			if same := s1.Algorithm == s2.Algorithm; (errP == nil) != same || (errQ == nil) != same ||
				!same && (!errors.Is(errP, ErrInvalidAlgorithm) || !errors.Is(errQ, ErrInvalidAlgorithm)) {
				t.Fatalf("Reconfigure %s to %s: Pacer.Reconfigure %v, Compiled.Reconfigure %v", s1.Algorithm, s2.Algorithm, errP, errQ)
			}
			same("after reconfigure")
		}
	}
	k, _ := DecodeCompiled(mustBinary(t, mustCompile(t, validSpecs[0])))
	if err := k.Reconfigure(foreignPacer{}, 0); !errors.Is(err, errForeignPacer) {
		t.Fatalf("Reconfigure of a foreign pacer: %v", err)
	}
	if _, err := DecodeCompiled([]byte{1}); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("DecodeCompiled of one byte: %v", err)
	}
}

func mustBinary(t *testing.T, c Config) []byte {
	t.Helper()
	b, err := c.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// foreignPacer is a Pacer of another package, as far as Compiled can tell.
type foreignPacer struct{ Pacer }

func (foreignPacer) Config() Config { return Config{Spec: Spec{Algorithm: Strict}} }

// TestDecodeConfigAcceptsOnlyCanonicalBytes: whatever bytes DecodeConfig
// (and so DecodeCompiled) accepts re-encode to exactly themselves, so the
// replicated state machine, which stores the bytes of a put and decodes
// them once, never needs to encode them again to compare. The bytes are
// valid encodings with one byte changed: the sign bit of a field (a -0
// where +0 was), another value, or one more.
func TestDecodeConfigAcceptsOnlyCanonicalBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 2))
	accepted := 0
	for i := range 50_000 {
		b := mustBinary(t, mustCompile(t, validSpecs[i%len(validSpecs)]))
		switch j := rng.IntN(len(b)); rng.IntN(3) {
		case 0:
			b[2+8*(j/8)%(len(b)-2)] ^= 0x80
		case 1:
			b[j] = byte(rng.IntN(256))
		default:
			b[j]++
		}
		d, err := DecodeConfig(b)
		if err != nil {
			continue
		}
		accepted++
		if again, err := d.AppendBinary(nil); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("DecodeConfig(%x) = %+v, which encodes to %x, %v", b, d, again, err)
		}
	}
	if accepted == 0 {
		t.Fatal("no changed encoding was accepted: the test checks nothing")
	}
}
