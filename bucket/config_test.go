package bucket

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestCompileValid(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want Config
	}{
		{
			name: "strict 1 per 6s, default expiry half an interval",
			spec: Spec{Algorithm: Strict, Rate: 1, Per: 6 * time.Second},
			want: Config{Spec: Spec{Algorithm: Strict, Rate: 1, Per: 6 * time.Second, Expiry: 3 * time.Second},
				IntervalNanos: 6 * sec, ExpiryNanos: 3 * sec},
		},
		{
			name: "strict per 0 is one second, ceil of 1e9/3",
			spec: Spec{Algorithm: Strict, Rate: 3, MaxReserved: 4, Expiry: time.Millisecond},
			want: Config{Spec: Spec{Algorithm: Strict, Rate: 3, Per: time.Second, MaxReserved: 4, Expiry: time.Millisecond},
				IntervalNanos: 333333334, ExpiryNanos: 1e6},
		},
		{
			name: "strict 1 per ns, expiry at least 1 ns",
			spec: Spec{Algorithm: Strict, Rate: 1e9},
			want: Config{Spec: Spec{Algorithm: Strict, Rate: 1e9, Per: time.Second, Expiry: 1},
				IntervalNanos: 1, ExpiryNanos: 1},
		},
		{
			name: "bursty defaults",
			spec: Spec{Algorithm: Bursty, Rate: 5},
			want: Config{Spec: Spec{Algorithm: Bursty, Rate: 5, Per: time.Second, MaxBurstSeconds: 1},
				IntervalNanos: 2e8, MaxStoredNanos: 1e9},
		},
		{
			name: "bursty infinite rate",
			spec: Spec{Algorithm: Bursty, Rate: math.Inf(1), MaxBurstSeconds: 2.5},
			want: Config{Spec: Spec{Algorithm: Bursty, Rate: math.Inf(1), Per: time.Second, MaxBurstSeconds: 2.5},
				IntervalNanos: 0, MaxStoredNanos: 25e8},
		},
		{
			name: "warmup: stable 1s, cold 3, warmup 5s",
			spec: Spec{Algorithm: WarmingUp, Rate: 1, Warmup: 5 * time.Second},
			want: Config{Spec: Spec{Algorithm: WarmingUp, Rate: 1, Per: time.Second, Warmup: 5 * time.Second, ColdFactor: 3},
				IntervalNanos: sec, ColdIntervalNanos: 3 * sec,
				ThresholdNanos: 25e8, // 2.5 permits of 1 s
				MaxStoredNanos: 5e9,  // 2.5 + 2*5/(1+3) = 5 permits
			},
		},
		{
			name: "hybrid 1 op/s ratio 1.1: the 1e9 + 1e8 = 1.1e9 ns pool",
			spec: Spec{Algorithm: Hybrid, Rate: 1},
			want: Config{Spec: Spec{Algorithm: Hybrid, Rate: 1, Per: time.Second, BurstRatio: 1.1},
				IntervalNanos: sec, ActiveNanos: 1e9, BurstNanos: 1e8},
		},
		{
			name: "hybrid 1000 op/s: active pool 1 ms",
			spec: Spec{Algorithm: Hybrid, Rate: 1000, BurstRatio: 1.1},
			want: Config{Spec: Spec{Algorithm: Hybrid, Rate: 1000, Per: time.Second, BurstRatio: 1.1},
				IntervalNanos: 1e6, ActiveNanos: 1e6, BurstNanos: 1e5},
		},
		{
			name: "hybrid 1e6 op/s: pool of 1000 ops",
			spec: Spec{Algorithm: Hybrid, Rate: 1e6, Strictness: 1},
			want: Config{Spec: Spec{Algorithm: Hybrid, Rate: 1e6, Per: time.Second, BurstRatio: 1, Strictness: 1},
				IntervalNanos: 1e3, ActiveNanos: 1e6, BurstNanos: 0},
		},
		{
			name: "hybrid strictness above 1 is the burst ratio",
			spec: Spec{Algorithm: Hybrid, Rate: 1, Strictness: 1.5},
			want: Config{Spec: Spec{Algorithm: Hybrid, Rate: 1, Per: time.Second, BurstRatio: 1.5, Strictness: 1.5},
				IntervalNanos: sec, ActiveNanos: 1e9, BurstNanos: 5e8},
		},
		{
			name: "hybrid burst compensation 1/32",
			spec: Spec{Algorithm: Hybrid, Rate: 1, Strictness: 1.0 / 32},
			want: Config{Spec: Spec{Algorithm: Hybrid, Rate: 1, Per: time.Second, BurstRatio: 1.1, Strictness: 1.0 / 32},
				IntervalNanos: sec, ActiveNanos: 1e9, BurstNanos: 1e8, CompensationShift: 5},
		},
		{
			name: "concurrency default hold TTL 60s, no rate",
			spec: Spec{Algorithm: Concurrency, MaxInFlight: 3},
			want: Config{Spec: Spec{Algorithm: Concurrency, MaxInFlight: 3, HoldTTL: 60 * time.Second}},
		},
		{
			name: "concurrency at its limits, -0 rate normalized",
			spec: Spec{Algorithm: Concurrency, Rate: math.Copysign(0, -1), MaxInFlight: 1 << 20, HoldTTL: 24 * time.Hour},
			want: Config{Spec: Spec{Algorithm: Concurrency, MaxInFlight: MaxInFlightLimit, HoldTTL: MaxHoldTTL}},
		},
		{
			name: "concurrency 1 ns hold",
			spec: Spec{Algorithm: Concurrency, MaxInFlight: 1, HoldTTL: 1},
			want: Config{Spec: Spec{Algorithm: Concurrency, MaxInFlight: 1, HoldTTL: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustCompile(t, tt.spec)
			if got != tt.want || !sameFloatBits(got.Spec, tt.want.Spec) {
				t.Fatalf("Compile(%+v)\n got %+v\nwant %+v", tt.spec, got, tt.want)
			}
			again := mustCompile(t, got.Spec)
			if again != got {
				t.Fatalf("Compile is not idempotent:\n got %+v\nthen %+v", got, again)
			}
		})
	}
}

func TestHybridPoolExampleOfDocument000(t *testing.T) {
	// Document 000: "ratio 1.1, active pool 1E9 nanos, burst pool 1E8,
	// combined 1100000000 ns". The sizing rule max(op, 1 ms) gives an
	// active pool of one second exactly when one op is one second.
	c := mustCompile(t, Spec{Algorithm: Hybrid, Rate: 1, BurstRatio: 1.1})
	if got := c.ActiveNanos + c.BurstNanos; got != 1_100_000_000 {
		t.Fatalf("combined pool %d, want 1100000000", got)
	}
	// The document's 1000 ops/s with 1.1 has the same 1:0.1 proportion.
	c = mustCompile(t, Spec{Algorithm: Hybrid, Rate: 1000, BurstRatio: 1.1})
	if c.BurstNanos*10 != c.ActiveNanos {
		t.Fatalf("burst %d is not a tenth of active %d", c.BurstNanos, c.ActiveNanos)
	}
}

func TestCompileInvalid(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name string
		spec Spec
		want error
		text string // a fragment the message must contain
	}{
		{"no algorithm", Spec{Rate: 1}, ErrInvalidAlgorithm, "allowed"},
		{"unknown algorithm", Spec{Algorithm: 9, Rate: 1}, ErrInvalidAlgorithm, "unknown(9)"},
		{"rate 0", Spec{Algorithm: Strict}, ErrInvalidRate, "> 0"},
		{"rate negative", Spec{Algorithm: Strict, Rate: -1}, ErrInvalidRate, "> 0"},
		{"rate NaN", Spec{Algorithm: Bursty, Rate: math.NaN()}, ErrInvalidRate, "NaN"},
		{"rate -Inf", Spec{Algorithm: Bursty, Rate: math.Inf(-1)}, ErrInvalidRate, "> 0"},
		{"rate +Inf strict", Spec{Algorithm: Strict, Rate: inf}, ErrInvalidRate, "bursty only"},
		{"rate +Inf warmup", Spec{Algorithm: WarmingUp, Rate: inf, Warmup: 1}, ErrInvalidRate, "bursty only"},
		{"rate +Inf hybrid", Spec{Algorithm: Hybrid, Rate: inf}, ErrInvalidRate, "bursty only"},
		{"rate above 1 per ns", Spec{Algorithm: Strict, Rate: 2e9}, ErrInvalidRate, "maximum is one permit per nanosecond, i.e. 1000000000 per 1s"},
		{"rate above 1 per ns per minute", Spec{Algorithm: Strict, Rate: 1e11, Per: time.Minute}, ErrInvalidRate, "60000000000 per 1m0s"},
		{"interval above MaxInt64", Spec{Algorithm: Strict, Rate: 1e-10}, ErrInvalidRate, "at most"},
		{"per negative", Spec{Algorithm: Strict, Rate: 1, Per: -1}, ErrInvalidDuration, "> 0"},
		{"strict MaxReserved negative", Spec{Algorithm: Strict, Rate: 1, MaxReserved: -1}, ErrInvalidOption, "MaxReserved"},
		{"strict MaxReserved MaxInt64", Spec{Algorithm: Strict, Rate: 1, MaxReserved: math.MaxInt64}, ErrInvalidOption, "MaxReserved"},
		{"strict expiry negative", Spec{Algorithm: Strict, Rate: 1, Expiry: -1}, ErrInvalidDuration, "Expiry"},
		{"strict with MaxBurstSeconds", Spec{Algorithm: Strict, Rate: 1, MaxBurstSeconds: 1}, ErrInvalidOption, "MaxBurstSeconds belongs to algorithm bursty"},
		{"strict with BurstRatio", Spec{Algorithm: Strict, Rate: 1, BurstRatio: 1.1}, ErrInvalidOption, "BurstRatio belongs to algorithm hybrid"},
		{"bursty with Warmup", Spec{Algorithm: Bursty, Rate: 1, Warmup: time.Second}, ErrInvalidOption, "Warmup belongs to algorithm warmup"},
		{"bursty with NaN ColdFactor", Spec{Algorithm: Bursty, Rate: 1, ColdFactor: math.NaN()}, ErrInvalidOption, "ColdFactor belongs to algorithm warmup"},
		{"warmup with MaxReserved", Spec{Algorithm: WarmingUp, Rate: 1, Warmup: 1, MaxReserved: 1}, ErrInvalidOption, "MaxReserved belongs to algorithm strict"},
		{"hybrid with Expiry", Spec{Algorithm: Hybrid, Rate: 1, Expiry: 1}, ErrInvalidOption, "Expiry belongs to algorithm strict"},
		{"hybrid with Strictness on warmup", Spec{Algorithm: WarmingUp, Rate: 1, Warmup: 1, Strictness: 1}, ErrInvalidOption, "Strictness belongs to algorithm hybrid"},
		{"bursty MaxBurstSeconds negative", Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: -1}, ErrInvalidOption, "MaxBurstSeconds"},
		{"bursty MaxBurstSeconds NaN", Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: math.NaN()}, ErrInvalidOption, "MaxBurstSeconds"},
		{"bursty MaxBurstSeconds Inf", Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: inf}, ErrInvalidOption, "MaxBurstSeconds"},
		{"bursty MaxBurstSeconds overflow", Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: 1e10}, ErrOverflow, "at most"},
		{"warmup zero", Spec{Algorithm: WarmingUp, Rate: 1}, ErrInvalidDuration, "Warmup"},
		{"warmup negative", Spec{Algorithm: WarmingUp, Rate: 1, Warmup: -1}, ErrInvalidDuration, "Warmup"},
		{"warmup cold factor below 1", Spec{Algorithm: WarmingUp, Rate: 1, Warmup: 1, ColdFactor: 0.5}, ErrInvalidOption, ">= 1"},
		{"warmup cold factor Inf", Spec{Algorithm: WarmingUp, Rate: 1, Warmup: 1, ColdFactor: inf}, ErrInvalidOption, ">= 1"},
		{"warmup cold interval overflow", Spec{Algorithm: WarmingUp, Rate: 1, Per: time.Hour, Warmup: 1, ColdFactor: 1e10}, ErrOverflow, "coldFactor"},
		{"hybrid ratio below 1", Spec{Algorithm: Hybrid, Rate: 1, BurstRatio: 0.9}, ErrInvalidOption, "BurstRatio"},
		{"hybrid ratio NaN", Spec{Algorithm: Hybrid, Rate: 1, BurstRatio: math.NaN()}, ErrInvalidOption, "BurstRatio"},
		{"hybrid ratio overflow", Spec{Algorithm: Hybrid, Rate: 1, BurstRatio: 1e300}, ErrOverflow, "fit"},
		{"hybrid strictness negative", Spec{Algorithm: Hybrid, Rate: 1, Strictness: -1}, ErrInvalidOption, "Strictness"},
		{"hybrid strictness not a power of two", Spec{Algorithm: Hybrid, Rate: 1, Strictness: 0.3}, ErrInvalidOption, "1/2^k"},
		{"hybrid strictness too small", Spec{Algorithm: Hybrid, Rate: 1, Strictness: math.Ldexp(1, -63)}, ErrInvalidOption, "1/2^k"},
		{"hybrid strict with ratio", Spec{Algorithm: Hybrid, Rate: 1, Strictness: 1, BurstRatio: 1.2}, ErrInvalidOption, "must be 0 or 1"},
		{"hybrid strictness and other ratio", Spec{Algorithm: Hybrid, Rate: 1, Strictness: 1.2, BurstRatio: 1.3}, ErrInvalidOption, "equal"},
		{"unknown algorithm lists concurrency", Spec{Algorithm: 6, MaxInFlight: 1}, ErrInvalidAlgorithm, "allowed: strict, bursty, warmup, hybrid, concurrency"},
		{"concurrency with rate", Spec{Algorithm: Concurrency, Rate: 1, MaxInFlight: 1}, ErrInvalidRate, "a concurrency limit has no rate; allowed: 0"},
		{"concurrency with rate NaN", Spec{Algorithm: Concurrency, Rate: math.NaN(), MaxInFlight: 1}, ErrInvalidRate, "no rate"},
		{"concurrency with rate +Inf", Spec{Algorithm: Concurrency, Rate: inf, MaxInFlight: 1}, ErrInvalidRate, "no rate"},
		{"concurrency with per", Spec{Algorithm: Concurrency, Per: time.Second, MaxInFlight: 1}, ErrInvalidDuration, "allowed: 0"},
		{"concurrency MaxInFlight 0", Spec{Algorithm: Concurrency}, ErrInvalidOption, "MaxInFlight 0"},
		{"concurrency MaxInFlight negative", Spec{Algorithm: Concurrency, MaxInFlight: -1}, ErrInvalidOption, "allowed: 1 to 1048576"},
		{"concurrency MaxInFlight above limit", Spec{Algorithm: Concurrency, MaxInFlight: 1<<20 + 1}, ErrInvalidOption, "allowed: 1 to 1048576"},
		{"concurrency HoldTTL negative", Spec{Algorithm: Concurrency, MaxInFlight: 1, HoldTTL: -1}, ErrInvalidDuration, "HoldTTL"},
		{"concurrency HoldTTL above 24h", Spec{Algorithm: Concurrency, MaxInFlight: 1, HoldTTL: 24*time.Hour + 1}, ErrInvalidDuration, "at most 24h0m0s"},
		{"concurrency with Expiry", Spec{Algorithm: Concurrency, MaxInFlight: 1, Expiry: 1}, ErrInvalidOption, "Expiry belongs to algorithm strict"},
		{"concurrency with BurstRatio", Spec{Algorithm: Concurrency, MaxInFlight: 1, BurstRatio: 1.1}, ErrInvalidOption, "BurstRatio belongs to algorithm hybrid"},
		{"strict with MaxInFlight", Spec{Algorithm: Strict, Rate: 1, MaxInFlight: 1}, ErrInvalidOption, "MaxInFlight belongs to algorithm concurrency"},
		{"hybrid with HoldTTL", Spec{Algorithm: Hybrid, Rate: 1, HoldTTL: time.Second}, ErrInvalidOption, "HoldTTL belongs to algorithm concurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(tt.spec)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Compile(%+v) = %+v, %v; want %v", tt.spec, c, err, tt.want)
			}
			if c != (Config{}) {
				t.Fatalf("Compile returned a non-zero config with an error: %+v", c)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "bucket: ") || !strings.Contains(msg, tt.text) {
				t.Fatalf("error %q: want prefix %q and fragment %q", msg, "bucket: ", tt.text)
			}
			if _, err := New(Config{Spec: tt.spec}, 0); err == nil {
				t.Fatalf("New accepted an invalid spec")
			}
		})
	}
}

func TestNewRejectsForgedConfig(t *testing.T) {
	c := mustCompile(t, Spec{Algorithm: Strict, Rate: 1})
	for _, forge := range []func(*Config){
		func(c *Config) { c.IntervalNanos = 1 },
		func(c *Config) { c.ExpiryNanos++ },
		func(c *Config) { c.ActiveNanos = 5 },
		func(c *Config) { c.Spec.Per = 0 }, // not normalized
	} {
		f := c
		forge(&f)
		if _, err := New(f, 0); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New(%+v): %v, want ErrInvalidOption", f, err)
		}
		if _, err := f.AppendBinary(nil); err == nil {
			t.Errorf("AppendBinary(%+v) accepted a forged config", f)
		}
	}
	if _, err := New(Config{}, 0); !errors.Is(err, ErrInvalidAlgorithm) {
		t.Errorf("New(Config{}): %v, want ErrInvalidAlgorithm", err)
	}
}

func TestMaxPermits(t *testing.T) {
	tests := []struct {
		spec Spec
		want int64
	}{
		{Spec{Algorithm: Strict, Rate: 1}, 1},
		{Spec{Algorithm: Strict, Rate: 1, MaxReserved: 9}, 10},
		{Spec{Algorithm: Bursty, Rate: 1}, math.MaxInt64 / int64(1e9)},
		{Spec{Algorithm: Bursty, Rate: math.Inf(1)}, math.MaxInt64},
		{Spec{Algorithm: WarmingUp, Rate: 1e9, Warmup: 1}, math.MaxInt64},
		{Spec{Algorithm: Hybrid, Rate: 1000}, 1},
		{Spec{Algorithm: Hybrid, Rate: 1e6}, 1100},
		{Spec{Algorithm: Hybrid, Rate: 1e6, Strictness: 1}, 1000},
		{Spec{Algorithm: Concurrency, MaxInFlight: 7}, 7},
		{Spec{Algorithm: Concurrency, MaxInFlight: MaxInFlightLimit}, MaxInFlightLimit},
	}
	for _, tt := range tests {
		if got := mustCompile(t, tt.spec).MaxPermits(); got != tt.want {
			t.Errorf("MaxPermits(%+v) = %d, want %d", tt.spec, got, tt.want)
		}
	}
	if got := (Config{}).MaxPermits(); got != 0 {
		t.Errorf("zero Config MaxPermits = %d, want 0", got)
	}
}

// validSpecs is a small corpus of valid specs of every algorithm.
var validSpecs = []Spec{
	{Algorithm: Strict, Rate: 1, Per: 6 * time.Second},
	{Algorithm: Strict, Rate: 1000, MaxReserved: 5, Expiry: time.Millisecond},
	{Algorithm: Bursty, Rate: 5},
	{Algorithm: Bursty, Rate: 3, MaxBurstSeconds: 2.5},
	{Algorithm: Bursty, Rate: math.Inf(1)},
	{Algorithm: WarmingUp, Rate: 2, Warmup: 4 * time.Second},
	{Algorithm: WarmingUp, Rate: 7, Warmup: 3 * time.Second, ColdFactor: 5.5},
	{Algorithm: Hybrid, Rate: 1},
	{Algorithm: Hybrid, Rate: 12000, BurstRatio: 1.25},
	{Algorithm: Hybrid, Rate: 500, Strictness: 0.125},
	{Algorithm: Hybrid, Rate: 500, Strictness: 1},
	{Algorithm: Concurrency, MaxInFlight: 3},
	{Algorithm: Concurrency, MaxInFlight: 100, HoldTTL: 250 * time.Millisecond},
}

func TestConfigEncodingRoundTrip(t *testing.T) {
	for _, s := range validSpecs {
		c := mustCompile(t, s)
		b, err := c.AppendBinary([]byte{0xAA})
		if err != nil {
			t.Fatalf("AppendBinary(%+v): %v", c, err)
		}
		wantLen, wantVersion := configEncodedLen, byte(ConfigEncodingVersion)
		if s.Algorithm == Concurrency {
			wantLen, wantVersion = configEncodedLenV2, ConfigEncodingVersion2
		}
		if b[0] != 0xAA || len(b) != 1+wantLen || b[1] != wantVersion {
			t.Fatalf("AppendBinary did not append %d bytes of version %d: %x", wantLen, wantVersion, b)
		}
		d, err := DecodeConfig(b[1:])
		if err != nil {
			t.Fatalf("DecodeConfig(%x): %v", b[1:], err)
		}
		if d != c {
			t.Fatalf("decode(encode(c)) = %+v, want %+v", d, c)
		}
		b2, _ := d.AppendBinary(nil)
		if !bytes.Equal(b2, b[1:]) {
			t.Fatalf("encode(decode(b)) = %x, want %x", b2, b[1:])
		}
	}
}

func TestDecodeConfigRejects(t *testing.T) {
	good, _ := mustCompile(t, validSpecs[0]).AppendBinary(nil)
	mutate := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrCorruptState},
		{"short", good[:len(good)-1], ErrCorruptState},
		{"long", append(append([]byte(nil), good...), 0), ErrCorruptState},
		{"version", mutate(func(b []byte) []byte { b[0] = 2; return b }), ErrCorruptState},
		{"algorithm", mutate(func(b []byte) []byte { b[1] = 7; return b }), ErrInvalidAlgorithm},
		{"interval", mutate(func(b []byte) []byte { b[2+9*8+7]++; return b }), ErrCorruptState},
		{"shift", mutate(func(b []byte) []byte { b[len(b)-1] = 3; return b }), ErrCorruptState},
		{"rate NaN", mutate(func(b []byte) []byte { copy(b[2:], []byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 1}); return b }), ErrInvalidRate},
	}
	for _, tt := range tests {
		if c, err := DecodeConfig(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: DecodeConfig = %+v, %v; want %v", tt.name, c, err, tt.want)
		}
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range validSpecs {
		f.Add(uint8(s.Algorithm), s.Rate, int64(s.Per), s.MaxReserved, int64(s.Expiry), s.MaxBurstSeconds, int64(s.Warmup), s.ColdFactor, s.BurstRatio, s.Strictness, s.MaxInFlight, int64(s.HoldTTL))
	}
	f.Fuzz(func(t *testing.T, alg uint8, rate float64, per, maxRes, expiry int64, mbs float64, warmup int64, cf, ratio, st float64, maxInFlight, holdTTL int64) {
		s := Spec{Algorithm(alg), rate, time.Duration(per), maxRes, time.Duration(expiry), mbs, time.Duration(warmup), cf, ratio, st, maxInFlight, time.Duration(holdTTL)}
		c, err := Compile(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bucket: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		if c2, err := Compile(c.Spec); err != nil || c2 != c {
			t.Fatalf("not idempotent: %+v -> %+v, %v", c, c2, err)
		}
		if c.MaxPermits() < 1 {
			t.Fatalf("MaxPermits %d < 1 for %+v", c.MaxPermits(), c)
		}
		b, err := c.AppendBinary(nil)
		if err != nil {
			t.Fatalf("AppendBinary: %v", err)
		}
		d, err := DecodeConfig(b)
		if err != nil || d != c {
			t.Fatalf("round trip: %+v, %v", d, err)
		}
		p, err := New(c, 0)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		for i := int64(0); i < 4; i++ {
			if _, err := p.Reserve(i*c.IntervalNanos/2, 1, c.IntervalNanos); err != nil {
				t.Fatalf("Reserve: %v", err)
			}
		}
	})
}

func FuzzDecodeConfig(f *testing.F) {
	for _, s := range validSpecs {
		c, _ := Compile(s)
		b, _ := c.AppendBinary(nil)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeConfig(b)
		if err != nil {
			return
		}
		b2, err := c.AppendBinary(nil)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("decode→encode not identical: %x -> %x, %v", b, b2, err)
		}
	})
}

// TestIntervalIsExactCeiling checks IntervalNanos = ceil(Per/Rate) exactly
// (I*rate >= per and (I-1)*rate < per, compared as rationals) for a known
// case a float quotient gets wrong and for random rates and periods over
// the accepted range.
func TestIntervalIsExactCeiling(t *testing.T) {
	check := func(rate float64, per time.Duration) {
		t.Helper()
		c, err := Compile(Spec{Algorithm: Strict, Rate: rate, Per: per})
		if err != nil {
			return
		}
		i := c.IntervalNanos
		r := new(big.Rat).SetFloat64(rate)
		p := new(big.Rat).SetInt64(int64(per))
		atI := new(big.Rat).Mul(r, new(big.Rat).SetInt64(i))
		below := new(big.Rat).Mul(r, new(big.Rat).SetInt64(i-1))
		if atI.Cmp(p) < 0 || below.Cmp(p) >= 0 {
			t.Fatalf("rate %v per %v: interval %d ns is not ceil(per/rate)", rate, per, i)
		}
	}
	// per/rate = 499911756.5...: a float quotient rounds to 499911756.0
	// and its ceiling is one nanosecond short.
	if c := mustCompile(t, Spec{Algorithm: Strict, Rate: 2.0003530383070247, Per: time.Second}); c.IntervalNanos != 499_911_757 {
		t.Fatalf("rate 2.0003530383070247 per 1s: interval %d, want 499911757", c.IntervalNanos)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for range 200_000 {
		check(logUniform(rng, 1e-9, 1e9), time.Duration(logInt(rng, 1, math.MaxInt64)))
	}
}
