package bucket

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func concurrencyPacer(t testing.TB, s Spec) *ConcurrencyPacer {
	t.Helper()
	return mustNew(t, s).(*ConcurrencyPacer)
}

// TestConfigEncodingVersion1Unchanged pins the version-1 bytes of configs
// of the first four algorithms, as the package encoded them before
// Concurrency and version 2 existed.
func TestConfigEncodingVersion1Unchanged(t *testing.T) {
	golden := []struct {
		spec Spec
		hex  string
	}{
		{Spec{Algorithm: Strict, Rate: 1, Per: 6 * time.Second},
			"01013ff00000000000000000000165a0bc00000000000000000000000000b2d05e00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000165a0bc0000000000b2d05e000000000000000000000000000000000000000000000000000000000000000000000000000000000000"},
		{Spec{Algorithm: Strict, Rate: 1000, MaxReserved: 5, Expiry: time.Millisecond},
			"0101408f400000000000000000003b9aca00000000000000000500000000000f42400000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000f424000000000000f42400000000000000000000000000000000000000000000000000000000000000000000000000000000000"},
		{Spec{Algorithm: Bursty, Rate: 5},
			"01024014000000000000000000003b9aca00000000000000000000000000000000003ff00000000000000000000000000000000000000000000000000000000000000000000000000000000000000bebc2000000000000000000000000003b9aca00000000000000000000000000000000000000000000000000000000000000000000"},
		{Spec{Algorithm: Bursty, Rate: math.Inf(1)},
			"01027ff0000000000000000000003b9aca00000000000000000000000000000000003ff0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000003b9aca00000000000000000000000000000000000000000000000000000000000000000000"},
		{Spec{Algorithm: WarmingUp, Rate: 7, Warmup: 3 * time.Second, ColdFactor: 5.5},
			"0103401c000000000000000000003b9aca0000000000000000000000000000000000000000000000000000000000b2d05e00401600000000000000000000000000000000000000000000000000000883d3b7000000000000000000000000906d383a0000000059682f00000000002ed50c6f0000000000000000000000000000000000"},
		{Spec{Algorithm: Hybrid, Rate: 500, Strictness: 0.125},
			"0104407f400000000000000000003b9aca00000000000000000000000000000000000000000000000000000000000000000000000000000000003ff199999999999a3fc000000000000000000000001e8480000000000000000000000000000000000000000000000000000000000000000000000000001e84800000000000030d4003"},
	}
	for _, g := range golden {
		b, err := mustCompile(t, g.spec).AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != g.hex {
			t.Errorf("%+v encodes to\n%s\nwant\n%s", g.spec, got, g.hex)
		}
		want, _ := hex.DecodeString(g.hex)
		if c, err := DecodeConfig(want); err != nil || c != mustCompile(t, g.spec) {
			t.Errorf("DecodeConfig(%s) = %+v, %v", g.hex, c, err)
		}
	}
}

// TestConcurrencyConfigEncoding checks the version-2 layout: the
// version-1 fields (all zero but the algorithm) then MaxInFlight and
// HoldTTL.
func TestConcurrencyConfigEncoding(t *testing.T) {
	c := mustCompile(t, Spec{Algorithm: Concurrency, MaxInFlight: 100, HoldTTL: 250 * time.Millisecond})
	b, err := c.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 147)
	want[0], want[1] = ConfigEncodingVersion2, byte(Concurrency)
	binary.BigEndian.PutUint64(want[131:], 100)
	binary.BigEndian.PutUint64(want[139:], uint64(250*time.Millisecond))
	if !bytes.Equal(b, want) {
		t.Fatalf("encoding\n%x\nwant\n%x", b, want)
	}
	d, err := DecodeConfig(b)
	if err != nil || d != c {
		t.Fatalf("DecodeConfig = %+v, %v; want %+v", d, err, c)
	}
	// The default hold TTL is encoded filled in.
	b, _ = mustCompile(t, Spec{Algorithm: Concurrency, MaxInFlight: 1}).AppendBinary(nil)
	if got := int64(binary.BigEndian.Uint64(b[139:])); got != int64(DefaultHoldTTL) {
		t.Fatalf("default hold TTL encoded as %d", got)
	}
}

// TestDecodeConfigVersionMismatch checks that version 1 holds only the
// first four algorithms (131 bytes) and version 2 only Concurrency (147
// bytes), and that a version-2 config is canonical.
func TestDecodeConfigVersionMismatch(t *testing.T) {
	strict, _ := mustCompile(t, validSpecs[0]).AppendBinary(nil)
	conc, _ := mustCompile(t, Spec{Algorithm: Concurrency, MaxInFlight: 4, HoldTTL: time.Second}).AppendBinary(nil)
	edit := func(b []byte, f func(b []byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	tests := []struct {
		name string
		b    []byte
		want error
		text string
	}{
		{"one byte", conc[:1], ErrCorruptState, "want exactly 131 for version 1, 147 for version 2"},
		{"version 3", edit(conc, func(b []byte) []byte { b[0] = 3; return b }), ErrCorruptState, "version 3"},
		{"version 0", edit(strict, func(b []byte) []byte { b[0] = 0; return b }), ErrCorruptState, "version 0"},
		{"strict as version 2", edit(strict, func(b []byte) []byte { b[0] = 2; return b }), ErrCorruptState, "a concurrency config is version 2"},
		{"strict as version 2, 147 bytes", edit(strict, func(b []byte) []byte { b[0] = 2; return append(b, make([]byte, 16)...) }), ErrCorruptState, "a concurrency config is version 2"},
		{"concurrency as version 1", edit(conc, func(b []byte) []byte { b[0] = 1; return b }), ErrCorruptState, "any other algorithm's is version 1"},
		{"concurrency as version 1, 131 bytes", edit(conc, func(b []byte) []byte { b[0] = 1; return b[:131] }), ErrCorruptState, "version 1 of algorithm concurrency"},
		{"concurrency truncated", conc[:146], ErrCorruptState, "want exactly 147"},
		{"concurrency of 131 bytes", conc[:131], ErrCorruptState, "want exactly 147"},
		{"concurrency long", append(append([]byte(nil), conc...), 0), ErrCorruptState, "want exactly 147"},
		{"concurrency MaxInFlight 0", edit(conc, func(b []byte) []byte { clear(b[131:139]); return b }), ErrInvalidOption, "MaxInFlight 0"},
		{"concurrency HoldTTL 0 (not canonical)", edit(conc, func(b []byte) []byte { clear(b[139:]); return b }), ErrCorruptState, "differ"},
		{"concurrency HoldTTL negative", edit(conc, func(b []byte) []byte { b[139] = 0x80; return b }), ErrInvalidDuration, "HoldTTL"},
		{"concurrency with rate -0", edit(conc, func(b []byte) []byte { b[2] = 0x80; return b }), ErrCorruptState, "differ"},
		{"concurrency with rate", edit(conc, func(b []byte) []byte { b[2] = 0x3f; b[3] = 0xf0; return b }), ErrInvalidRate, "no rate"},
		{"concurrency with interval", edit(conc, func(b []byte) []byte { b[2+9*8+7] = 1; return b }), ErrCorruptState, "differ"},
		{"concurrency with MaxReserved", edit(conc, func(b []byte) []byte { b[2+2*8+7] = 1; return b }), ErrInvalidOption, "MaxReserved belongs to algorithm strict"},
		{"concurrency with shift", edit(conc, func(b []byte) []byte { b[130] = 1; return b }), ErrCorruptState, "differ"},
	}
	for _, tt := range tests {
		c, err := DecodeConfig(tt.b)
		if !errors.Is(err, tt.want) || c != (Config{}) {
			t.Errorf("%s: DecodeConfig = %+v, %v; want %v", tt.name, c, err, tt.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "bucket: ") || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: error %q lacks %q", tt.name, err, tt.text)
		}
	}
}

// TestConcurrencyWorkedExample replays the worked example of
// ConcurrencyPacer's doc comment.
func TestConcurrencyWorkedExample(t *testing.T) {
	p := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: 2, HoldTTL: 10 * time.Second})
	type step struct {
		now, n, maxWait int64
		release         int64 // > 0: release n permits of the hold expiring here
		want            Decision
		released        int64
		inflight        int64 // InFlight(now) before the call
	}
	steps := []step{
		{now: 0, n: 1, want: Decision{true, 0, 10 * sec, 0}, inflight: 0},
		{now: 2 * sec, n: 1, want: Decision{true, 2 * sec, 12 * sec, 0}, inflight: 1},
		{now: 3 * sec, n: 1, want: Decision{false, 10 * sec, 0, 0}, inflight: 2},
		{now: 4 * sec, n: 1, release: 12 * sec, released: 1, inflight: 2},
		{now: 4 * sec, n: 1, want: Decision{true, 4 * sec, 14 * sec, 0}, inflight: 1},
		{now: 5 * sec, n: 2, want: Decision{false, 14 * sec, 0, 0}, inflight: 2},
		{now: 5 * sec, n: 2, maxWait: 9 * sec, want: Decision{true, 14 * sec, 24 * sec, 0}, inflight: 2},
		{now: 11 * sec, n: 1, want: Decision{false, 24 * sec, 0, 0}, inflight: 3},
		{now: 30 * sec, n: 2, release: 24 * sec, released: 0, inflight: 0},
	}
	for i, st := range steps {
		if got := p.InFlight(st.now); got != st.inflight {
			t.Errorf("step %d: InFlight(%d) = %d, want %d", i, st.now, got, st.inflight)
		}
		if st.release != 0 {
			if got := p.Release(st.now, st.release, st.n); got != st.released {
				t.Errorf("step %d: Release(%d, %d, %d) = %d, want %d", i, st.now, st.release, st.n, got, st.released)
			}
			continue
		}
		q, err := p.Query(st.now, st.n)
		if err != nil {
			t.Fatal(err)
		}
		if got := mustReserve(t, p, st.now, st.n, st.maxWait); got != st.want {
			t.Errorf("step %d: Reserve(%d, %d, %d) = %+v, want %+v", i, st.now, st.n, st.maxWait, got, st.want)
		}
		if q != st.want.AtNanos {
			t.Errorf("step %d: Query = %d, want %d", i, q, st.want.AtNanos)
		}
	}
}

func TestConcurrencyRelease(t *testing.T) {
	p := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: 10, HoldTTL: 10 * time.Second})
	a := mustReserve(t, p, 0, 3, 0)     // hold 10s:3
	b := mustReserve(t, p, 0, 2, 0)     // merged: 10s:5
	c := mustReserve(t, p, 1*sec, 4, 0) // 11s:4
	if a.ExpiresAtNanos != b.ExpiresAtNanos || a.ExpiresAtNanos != 10*sec || c.ExpiresAtNanos != 11*sec {
		t.Fatalf("grants %+v %+v %+v", a, b, c)
	}
	if got := p.InFlight(1 * sec); got != 9 {
		t.Fatalf("InFlight = %d, want 9", got)
	}
	unchanged := func(name string, f func() int64) {
		t.Helper()
		before := p.AppendState(nil)
		if got := f(); got != 0 {
			t.Errorf("%s released %d, want 0", name, got)
		}
		if !bytes.Equal(p.AppendState(nil), before) {
			t.Errorf("%s changed the state", name)
		}
	}
	unchanged("unknown expiry", func() int64 { return p.Release(2*sec, 12*sec, 1) })
	unchanged("n 0", func() int64 { return p.Release(2*sec, 10*sec, 0) })
	unchanged("n negative", func() int64 { return p.Release(2*sec, 10*sec, -1) })
	// Partial release of the merged hold: b gives back its 2 permits.
	if got := p.Release(2*sec, 10*sec, 2); got != 2 {
		t.Fatalf("partial release removed %d, want 2", got)
	}
	if got := p.InFlight(2 * sec); got != 7 {
		t.Fatalf("InFlight after partial release = %d, want 7", got)
	}
	// Releasing more than the hold holds removes what it holds.
	if got := p.Release(3*sec, 11*sec, 9); got != 4 {
		t.Fatalf("over-release removed %d, want 4", got)
	}
	if got := p.Release(3*sec, 11*sec, 1); got != 0 {
		t.Fatalf("release of an emptied hold removed %d", got)
	}
	// An expired hold: the release changes nothing, not even the clock.
	unchanged("expired at its expiry", func() int64 { return p.Release(10*sec, 10*sec, 3) })
	unchanged("expired", func() int64 { return p.Release(15*sec, 10*sec, 3) })
	// A smaller now counts as the largest seen (3 s), at which 10s is alive.
	if got := p.Release(0, 10*sec, 1); got != 1 {
		t.Fatalf("release with an old now removed %d, want 1", got)
	}
	// A release that removes permits drops the holds lapsed at now.
	d := mustReserve(t, p, 4*sec, 1, 0) // 14s:1
	e := mustReserve(t, p, 5*sec, 1, 0) // 15s:1
	if got := p.Release(12*sec, e.ExpiresAtNanos, 1); got != 1 {
		t.Fatalf("release removed %d", got)
	}
	want := appendInt64s(appendStateHeader(nil, Concurrency), 12*sec, 1, d.ExpiresAtNanos, 1)
	if got := p.AppendState(nil); !bytes.Equal(got, want) {
		t.Fatalf("state %x, want %x", got, want)
	}
	// A hold granted ahead of its time can be released before it is served.
	q := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: 1, HoldTTL: 10 * time.Second})
	mustReserve(t, q, 0, 1, 0)
	f := mustReserve(t, q, 1*sec, 1, 9*sec) // at 10s, hold 20s
	if f != (Decision{true, 10 * sec, 20 * sec, 0}) {
		t.Fatalf("future grant %+v", f)
	}
	if got := q.Release(2*sec, 20*sec, 1); got != 1 {
		t.Fatalf("release of a future hold removed %d", got)
	}
	if at, _ := q.Query(2*sec, 1); at != 10*sec {
		t.Fatalf("Query after releasing the future hold = %d, want 10s", at)
	}
}

func TestConcurrencyReserveAtAndCharge(t *testing.T) {
	p := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: 2, HoldTTL: 10 * time.Second})
	var s Scheduler = p
	if d, err := s.ReserveAt(0, 2, 3*sec); err != nil || d != (Decision{true, 3 * sec, 13 * sec, 0}) {
		t.Fatalf("ReserveAt(0, 2, 3s) = %+v, %v", d, err)
	}
	// The hold counts from its decision: nothing fits before 13s.
	before := p.AppendState(nil)
	for _, at := range []int64{0, sec, 3 * sec, 13*sec - 1} {
		if d, err := s.ReserveAt(sec, 1, at); err != nil || d != (Decision{AtNanos: 13 * sec}) {
			t.Fatalf("ReserveAt(1s, 1, %d) = %+v, %v; want refused at 13s", at, d, err)
		}
	}
	if !bytes.Equal(p.AppendState(nil), before) {
		t.Fatalf("a refused ReserveAt changed the state")
	}
	if d, err := s.ReserveAt(sec, 1, 20*sec); err != nil || d != (Decision{true, 20 * sec, 30 * sec, 0}) {
		t.Fatalf("ReserveAt(1s, 1, 20s) = %+v, %v", d, err)
	}
	// The clock stays at 1s: a request at 2s is served at 13s (the 30s
	// hold and one more permit fit from 13s on).
	if d := mustReserve(t, p, 2*sec, 1, time.Hour.Nanoseconds()); d != (Decision{true, 13 * sec, 23 * sec, 0}) {
		t.Fatalf("Reserve after ReserveAt = %+v", d)
	}
	if _, err := s.ReserveAt(0, 3, 100*sec); !errors.Is(err, ErrTooManyPermits) {
		t.Fatalf("ReserveAt of 3 > max: %v", err)
	}
	if _, err := s.ReserveAt(0, 0, 100*sec); !errors.Is(err, ErrInvalidPermits) {
		t.Fatalf("ReserveAt of 0: %v", err)
	}
	before = p.AppendState(nil)
	err := s.Charge(5*sec, 1)
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "a concurrency limit cannot be charged for an overrun (allowed: release held permits)") {
		t.Fatalf("Charge: %v", err)
	}
	if !bytes.Equal(p.AppendState(nil), before) {
		t.Fatalf("a failed Charge changed the state")
	}
}

// TestConcurrencyRepresentationLimits checks the two refusals that keep
// the state representable: a hold that would lapse at the end of the
// timeline, and holds of more than MaxInFlightLimit permits in all.
func TestConcurrencyRepresentationLimits(t *testing.T) {
	p := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: 1, HoldTTL: time.Second})
	end := int64(math.MaxInt64) - sec
	if d := mustReserve(t, p, end, 1, 0); d != (Decision{AtNanos: end}) {
		t.Fatalf("grant lapsing at MaxInt64: %+v", d)
	}
	if d := mustReserve(t, p, end-1, 1, 0); d != (Decision{true, end - 1, math.MaxInt64 - 1, 0}) {
		t.Fatalf("grant lapsing just before MaxInt64: %+v", d)
	}
	if d := mustReserve(t, p, math.MaxInt64, 1, 0); d.Granted || d.AtNanos != math.MaxInt64 {
		t.Fatalf("grant at MaxInt64: %+v", d)
	}

	q := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: MaxInFlightLimit, HoldTTL: time.Second})
	state := appendInt64s(appendStateHeader(nil, Concurrency), 0, 1, 10*sec, MaxInFlightLimit)
	if err := q.RestoreState(state); err != nil {
		t.Fatal(err)
	}
	// One permit fits at 10s; granting it now for then would make the
	// holds carry MaxInFlightLimit+1 permits.
	if d := mustReserve(t, q, 0, 1, time.Hour.Nanoseconds()); d != (Decision{AtNanos: 10 * sec}) {
		t.Fatalf("grant beyond the total limit: %+v", d)
	}
	if d, _ := q.ReserveAt(0, 1, 10*sec); d != (Decision{AtNanos: 10 * sec}) {
		t.Fatalf("ReserveAt beyond the total limit: %+v", d)
	}
	if d := mustReserve(t, q, 10*sec, 1, 0); d != (Decision{true, 10 * sec, 11 * sec, 0}) {
		t.Fatalf("grant once the hold lapsed: %+v", d)
	}
}

func TestConcurrencyReconfigure(t *testing.T) {
	p := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: 4, HoldTTL: 10 * time.Second})
	mustReserve(t, p, 0, 2, 0)   // 10s:2
	mustReserve(t, p, sec, 2, 0) // 11s:2
	if err := p.Reconfigure(2*sec, mustCompile(t, Spec{Algorithm: Concurrency, MaxInFlight: 2, HoldTTL: 5 * time.Second})); err != nil {
		t.Fatal(err)
	}
	// 4 in flight above the new max of 2: one permit waits for 3 to lapse.
	if at, _ := p.Query(2*sec, 1); at != 11*sec {
		t.Fatalf("Query after lowering the max = %d, want 11s", at)
	}
	if d := mustReserve(t, p, 2*sec, 2, 9*sec); d != (Decision{true, 11 * sec, 16 * sec, 0}) {
		t.Fatalf("grant after reconfigure: %+v (the new TTL applies)", d)
	}
	if _, err := p.Reserve(2*sec, 3, 0); !errors.Is(err, ErrTooManyPermits) {
		t.Fatalf("Reserve of 3 > new max: %v", err)
	}
	if err := p.Reconfigure(3*sec, mustCompile(t, validSpecs[0])); !errors.Is(err, ErrInvalidAlgorithm) {
		t.Fatalf("Reconfigure to strict: %v", err)
	}
	forged := mustCompile(t, Spec{Algorithm: Concurrency, MaxInFlight: 2})
	forged.IntervalNanos = 1
	if err := p.Reconfigure(3*sec, forged); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Reconfigure with a forged config: %v", err)
	}
	// Reconfigure drops the holds lapsed at now and moves the clock.
	if err := p.Reconfigure(10*sec, mustCompile(t, Spec{Algorithm: Concurrency, MaxInFlight: 8})); err != nil {
		t.Fatal(err)
	}
	want := appendInt64s(appendStateHeader(nil, Concurrency), 10*sec, 2, 11*sec, 2, 16*sec, 2)
	if got := p.AppendState(nil); !bytes.Equal(got, want) {
		t.Fatalf("state %x, want %x", got, want)
	}
}

func TestConcurrencyStateRoundTripAndRejects(t *testing.T) {
	p := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: 5, HoldTTL: 10 * time.Second})
	fresh := p.AppendState(nil)
	if want := appendInt64s(appendStateHeader(nil, Concurrency), 0, 0); !bytes.Equal(fresh, want) {
		t.Fatalf("fresh state %x, want %x", fresh, want)
	}
	mustReserve(t, p, sec, 2, 0)
	mustReserve(t, p, 2*sec, 3, 0)
	good := p.AppendState(nil)
	want := appendInt64s(appendStateHeader(nil, Concurrency), 2*sec, 2, 11*sec, 2, 12*sec, 3)
	if !bytes.Equal(good, want) {
		t.Fatalf("state %x, want %x", good, want)
	}
	checkStateRoundTrip(t, p)
	q := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: 5, HoldTTL: 10 * time.Second})
	if err := q.RestoreState(good); err != nil || q.InFlight(2*sec) != 5 {
		t.Fatalf("RestoreState: %v, in flight %d", err, q.InFlight(2*sec))
	}

	hdr := appendStateHeader(nil, Concurrency)
	st := func(vs ...int64) []byte { return appendInt64s(slices.Clone(hdr), vs...) }
	bad := []struct {
		name string
		b    []byte
		text string
	}{
		{"empty", nil, "at least 19"},
		{"header only", hdr, "at least 19"},
		{"no count", st(0), "at least 19"},
		{"negative count", st(0, -1), "allowed: 0 to 1048576"},
		{"count above the limit", st(0, MaxInFlightLimit+1), "allowed: 0 to 1048576"},
		{"huge count", st(0, math.MaxInt64), "allowed: 0 to 1048576"},
		{"count without holds", st(0, 1), "want exactly 35"},
		{"half a hold", st(0, 1, 5)[:31], "want exactly 35"},
		{"extra bytes", append(st(0, 1, 5, 1), 0), "want exactly 35"},
		{"equal expiries", st(0, 2, 5, 1, 5, 1), "strictly ascending"},
		{"descending expiries", st(0, 2, 6, 1, 5, 1), "strictly ascending"},
		{"zero permits", st(0, 1, 5, 0), "at least 1"},
		{"negative permits", st(0, 2, 5, 1, 6, -1), "at least 1"},
		{"sum overflow", st(0, 2, 5, math.MaxInt64, 6, math.MaxInt64), "in all"},
		{"sum above the limit", st(0, 2, 5, MaxInFlightLimit, 6, 1), "in all"},
		{"version", append([]byte{9}, good[1:]...), "version 9"},
		{"algorithm", append([]byte{1, byte(Strict)}, good[2:]...), "given to a concurrency pacer"},
		{"flags", append([]byte{1, byte(Concurrency), 0}, good[3:]...), "flags"},
	}
	for _, tt := range bad {
		err := q.RestoreState(tt.b)
		if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: RestoreState(%x) = %v; want ErrCorruptState with %q", tt.name, tt.b, err, tt.text)
		}
		if !bytes.Equal(q.AppendState(nil), good) {
			t.Fatalf("%s: a rejected RestoreState changed the state", tt.name)
		}
	}
	// At the limits: MaxInFlightLimit permits in all, expiries at the int64 bounds.
	edge := st(math.MinInt64, 2, math.MinInt64, MaxInFlightLimit-1, math.MaxInt64, 1)
	if err := q.RestoreState(edge); err != nil || !bytes.Equal(q.AppendState(nil), edge) {
		t.Fatalf("RestoreState(edge): %v", err)
	}
}

// cgrant is one grant recorded by TestConcurrencyRandomBound.
type cgrant struct {
	seq      int   // decision order
	at, exp  int64 // served at, hold lapses at
	n        int64
	max      int64 // MaxInFlight in force at the decision
	released []crelease
}

type crelease struct{ at, n int64 }

// heldAt returns the permits of g held at s: served by s, not lapsed,
// minus those released at or before s.
func (g *cgrant) heldAt(s int64) int64 {
	if g.at > s || g.exp <= s {
		return 0
	}
	h := g.n
	for _, r := range g.released {
		if r.at <= s {
			h -= r.n
		}
	}
	return h
}

// remaining returns the permits of g not released (whenever).
func (g *cgrant) remaining() int64 {
	h := g.n
	for _, r := range g.released {
		h -= r.n
	}
	return h
}

// TestConcurrencyRandomBound drives a ConcurrencyPacer with random
// Reserve, ReserveAt, Release, Reconfigure and time jumps, and checks
// every decision against a model computed from the record of grants and
// releases, the in-flight bound (see ConcurrencyPacer, # Bound) at every
// decision instant, and that the state round-trips to identical bytes
// after every step.
func TestConcurrencyRandomBound(t *testing.T) {
	ttls := []time.Duration{0, time.Second, 3 * time.Second, 10 * time.Second}
	full := 0 // instants at which the bound is reached
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 5))
		spec := Spec{Algorithm: Concurrency, MaxInFlight: 1 + rng.Int64N(6), HoldTTL: ttls[1+rng.IntN(3)]}
		origin := rng.Int64N(100) * sec
		p := mustNewAt(t, spec, origin).(*ConcurrencyPacer)
		now := origin
		var grants []*cgrant
		instants := []int64{now}
		// inflight(x): the model's count of what the pacer holds.
		inflight := func(x int64) int64 {
			var sum int64
			for _, g := range grants {
				if g.exp > x {
					sum += g.remaining()
				}
			}
			return sum
		}
		query := func(n int64) int64 {
			max := p.Config().Spec.MaxInFlight
			if inflight(now)+n <= max {
				return now
			}
			var exps []int64
			for _, g := range grants {
				if g.exp > now {
					exps = append(exps, g.exp)
				}
			}
			slices.Sort(exps)
			for _, e := range exps {
				if inflight(e)+n <= max {
					return e
				}
			}
			t.Fatalf("seed %d: no time fits %d permits", seed, n)
			return 0
		}
		for step := range 300 {
			cfg := p.Config()
			ttl := int64(cfg.Spec.HoldTTL)
			max := cfg.Spec.MaxInFlight
			before := p.AppendState(nil)
			record := func(d Decision, n int64) {
				grants = append(grants, &cgrant{seq: len(grants), at: d.AtNanos, exp: d.ExpiresAtNanos, n: n, max: max})
				instants = append(instants, d.AtNanos)
			}
			switch op := rng.IntN(10); {
			case op < 4: // Reserve
				n := 1 + rng.Int64N(max)
				maxWait := []int64{0, rng.Int64N(5) * sec / 2, 30 * sec}[rng.IntN(3)]
				want := query(n)
				d := mustReserve(t, p, now, n, maxWait)
				if d.AtNanos != want {
					t.Fatalf("seed %d step %d: Reserve(%d, %d, %d) = %+v, model time %d", seed, step, now, n, maxWait, d, want)
				}
				if d.Granted != (want-now <= maxWait) {
					t.Fatalf("seed %d step %d: Reserve(%d, %d, %d) = %+v, wait %d", seed, step, now, n, maxWait, d, want-now)
				}
				if d.Granted {
					if d.ExpiresAtNanos != d.AtNanos+ttl || d.SpacingNanos != 0 {
						t.Fatalf("seed %d step %d: grant %+v with TTL %d", seed, step, d, ttl)
					}
					record(d, n)
				} else if !bytes.Equal(p.AppendState(nil), before) || d.ExpiresAtNanos != 0 {
					t.Fatalf("seed %d step %d: a refusal %+v changed the state", seed, step, d)
				}
			case op < 6: // ReserveAt
				n := 1 + rng.Int64N(max)
				q := query(n)
				if got, _ := p.Query(now, n); got != q {
					t.Fatalf("seed %d step %d: Query(%d, %d) = %d, model %d", seed, step, now, n, got, q)
				}
				at := []int64{q, q + rng.Int64N(20)*sec/2, q - 1 - rng.Int64N(3*sec)}[rng.IntN(3)]
				d, err := p.ReserveAt(now, n, at)
				if err != nil {
					t.Fatal(err)
				}
				if d.Granted != (at >= q) || (d.Granted && (d.AtNanos != at || d.ExpiresAtNanos != at+ttl)) || (!d.Granted && d.AtNanos != q) {
					t.Fatalf("seed %d step %d: ReserveAt(%d, %d, %d) = %+v, model time %d", seed, step, now, n, at, d, q)
				}
				if d.Granted {
					record(d, n)
				} else if !bytes.Equal(p.AppendState(nil), before) {
					t.Fatalf("seed %d step %d: a refused ReserveAt changed the state", seed, step)
				}
			case op < 8 && len(grants) > 0: // Release part of a grant (maybe lapsed)
				g := grants[rng.IntN(len(grants))]
				r := g.remaining()
				if r == 0 {
					break
				}
				k := 1 + rng.Int64N(r)
				got := p.Release(now, g.exp, k)
				switch {
				case g.exp <= now:
					if got != 0 || !bytes.Equal(p.AppendState(nil), before) {
						t.Fatalf("seed %d step %d: release of a lapsed hold removed %d", seed, step, got)
					}
				case got != k:
					t.Fatalf("seed %d step %d: Release(%d, %d, %d) = %d", seed, step, now, g.exp, k, got)
				default:
					g.released = append(g.released, crelease{now, k})
				}
			case op < 8: // nothing granted yet: release an unknown hold
				if got := p.Release(now, now+sec, 1); got != 0 {
					t.Fatalf("seed %d step %d: release of nothing removed %d", seed, step, got)
				}
			case op == 8: // Reconfigure
				s := Spec{Algorithm: Concurrency, MaxInFlight: 1 + rng.Int64N(6), HoldTTL: ttls[rng.IntN(len(ttls))]}
				if err := p.Reconfigure(now, mustCompile(t, s)); err != nil {
					t.Fatal(err)
				}
			default: // time jump
				now += []int64{0, rng.Int64N(3 * sec), rng.Int64N(4) * sec / 2, rng.Int64N(25) * sec}[rng.IntN(4)]
				instants = append(instants, now)
			}
			if got, want := p.InFlight(now), inflight(now); got != want {
				t.Fatalf("seed %d step %d: InFlight(%d) = %d, model %d", seed, step, now, got, want)
			}
			checkStateRoundTrip(t, p)
		}
		// The bound at every decision instant.
		checked := 0
		for _, s := range instants {
			var sum int64
			last := -1
			for _, g := range grants {
				if h := g.heldAt(s); h > 0 {
					sum += h
					last = g.seq
				}
			}
			if last < 0 {
				continue
			}
			checked++
			if sum > grants[last].max {
				t.Fatalf("seed %d: %d permits held at %d, above the MaxInFlight %d of the last decision", seed, sum, s, grants[last].max)
			}
			if sum == grants[last].max {
				full++
			}
		}
		if checked < 10 {
			t.Fatalf("seed %d: weak test: the bound was checked at %d instants", seed, checked)
		}
	}
	t.Logf("bound reached at %d instants", full)
	if full < 500 {
		t.Fatalf("weak test: the bound was reached at only %d instants", full)
	}
}

// TestConcurrencyCarry: a hold carried over from an earlier pacer counts
// as that pacer's grant did (it merges with a hold of the same expiry, it
// delays later grants, a release takes it back), a lapsed or empty one is
// ignored, and the representation limit holds.
func TestConcurrencyCarry(t *testing.T) {
	p := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: 2, HoldTTL: 10 * time.Second})
	steps := []struct {
		now, expiresAt, n int64
		inFlight          int64 // InFlight(now) after the carry
	}{
		{1 * sec, 8 * sec, 1, 1},  // carried: 8s:1
		{1 * sec, 8 * sec, 1, 2},  // merged: 8s:2
		{1 * sec, 1 * sec, 5, 2},  // lapsed at now: ignored
		{1 * sec, 9 * sec, 0, 2},  // nothing to carry
		{2 * sec, 12 * sec, 1, 3}, // above the cap: later grants wait
	}
	for i, s := range steps {
		if err := p.Carry(s.now, s.expiresAt, s.n); err != nil {
			t.Fatalf("step %d: Carry(%v, %v, %d) = %v", i, s.now, s.expiresAt, s.n, err)
		}
		if got := p.InFlight(s.now); got != s.inFlight {
			t.Fatalf("step %d: Carry(%v, %v, %d): InFlight = %d, want %d", i, s.now, s.expiresAt, s.n, got, s.inFlight)
		}
	}
	if d := mustReserve(t, p, 2*sec, 1, 0); d.Granted || d.AtNanos != 8*sec {
		t.Fatalf("Reserve over carried holds = %+v, want refused until 8s (3 held, 2 of them lapse then)", d)
	}
	if got := p.Release(3*sec, 8*sec, 2); got != 2 {
		t.Fatalf("Release of the carried hold removed %d, want 2", got)
	}
	if d := mustReserve(t, p, 3*sec, 1, 0); !d.Granted {
		t.Fatalf("Reserve after releasing the carried hold = %+v, want granted", d)
	}
	q := concurrencyPacer(t, Spec{Algorithm: Concurrency, MaxInFlight: MaxInFlightLimit, HoldTTL: time.Second})
	if err := q.Carry(0, sec, MaxInFlightLimit); err != nil {
		t.Fatal(err)
	}
	before := q.AppendState(nil)
	if err := q.Carry(0, 2*sec, 1); !errors.Is(err, ErrTooManyPermits) {
		t.Fatalf("Carry beyond MaxInFlightLimit = %v, want ErrTooManyPermits", err)
	}
	if !bytes.Equal(q.AppendState(nil), before) {
		t.Fatal("a refused Carry changed the state")
	}
}
