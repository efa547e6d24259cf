package bucket

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Binary layouts. Every encoding starts with a version byte and the
// algorithm byte, and is a fixed sequence of big-endian fields after that,
// so that identical values encode to identical bytes on every architecture.
//
// Config (configEncodedLen bytes):
//
//	version(1)=1 algorithm(1)
//	Spec: Rate(8, float64 bits) Per(8) MaxReserved(8) Expiry(8)
//	      MaxBurstSeconds(8, bits) Warmup(8) ColdFactor(8, bits)
//	      BurstRatio(8, bits) Strictness(8, bits)
//	compiled: IntervalNanos(8) ExpiryNanos(8) MaxStoredNanos(8)
//	      ThresholdNanos(8) ColdIntervalNanos(8) ActiveNanos(8) BurstNanos(8)
//	      CompensationShift(1)
//
// Pacer state: version(1)=1 algorithm(1) flags(1) then the algorithm's
// int64 fields (see each pacer's AppendState).
const (
	// ConfigEncodingVersion is the version byte of Config.AppendBinary.
	ConfigEncodingVersion = 1
	// StateEncodingVersion is the version byte of Pacer.AppendState.
	StateEncodingVersion = 1

	configEncodedLen = 2 + 9*8 + 7*8 + 1
	stateHeaderLen   = 3
	flagStarted      = 1 << 0
)

// AppendBinary appends the encoding of c to b. It fails, appending nothing,
// when c is not what Compile makes of c.Spec.
func (c Config) AppendBinary(b []byte) ([]byte, error) {
	if err := c.validate(); err != nil {
		return b, err
	}
	b = append(b, ConfigEncodingVersion, byte(c.Spec.Algorithm))
	s := c.Spec
	for _, v := range [...]uint64{
		math.Float64bits(s.Rate), uint64(s.Per), uint64(s.MaxReserved), uint64(s.Expiry),
		math.Float64bits(s.MaxBurstSeconds), uint64(s.Warmup), math.Float64bits(s.ColdFactor),
		math.Float64bits(s.BurstRatio), math.Float64bits(s.Strictness),
		uint64(c.IntervalNanos), uint64(c.ExpiryNanos), uint64(c.MaxStoredNanos),
		uint64(c.ThresholdNanos), uint64(c.ColdIntervalNanos), uint64(c.ActiveNanos), uint64(c.BurstNanos),
	} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return append(b, c.CompensationShift), nil
}

// DecodeConfig decodes what Config.AppendBinary encoded. It validates the
// length and the version, then recompiles the decoded Spec and requires the
// compiled fields to equal the decoded ones, so that a Config it returns is
// always one Compile would return. Errors wrap ErrCorruptState, or the
// Compile error of an invalid Spec.
func DecodeConfig(b []byte) (Config, error) {
	if len(b) != configEncodedLen {
		return Config{}, fmt.Errorf("bucket: config encoding of %d bytes: %w (want exactly %d)", len(b), ErrCorruptState, configEncodedLen)
	}
	if b[0] != ConfigEncodingVersion {
		return Config{}, fmt.Errorf("bucket: config encoding version %d: %w (want %d)", b[0], ErrCorruptState, ConfigEncodingVersion)
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[2+8*i:]) }
	i64 := func(i int) int64 { return int64(u(i)) }
	f64 := func(i int) float64 { return math.Float64frombits(u(i)) }
	c := Config{
		Spec: Spec{
			Algorithm:       Algorithm(b[1]),
			Rate:            f64(0),
			Per:             time.Duration(i64(1)),
			MaxReserved:     i64(2),
			Expiry:          time.Duration(i64(3)),
			MaxBurstSeconds: f64(4),
			Warmup:          time.Duration(i64(5)),
			ColdFactor:      f64(6),
			BurstRatio:      f64(7),
			Strictness:      f64(8),
		},
		IntervalNanos:     i64(9),
		ExpiryNanos:       i64(10),
		MaxStoredNanos:    i64(11),
		ThresholdNanos:    i64(12),
		ColdIntervalNanos: i64(13),
		ActiveNanos:       i64(14),
		BurstNanos:        i64(15),
		CompensationShift: b[configEncodedLen-1],
	}
	want, err := Compile(c.Spec)
	if err != nil {
		return Config{}, fmt.Errorf("bucket: decoded config: %w", err)
	}
	// Compare bit patterns of the floats too: -0 and +0 are == but encode
	// differently, and Compile never yields -0 for an option.
	if want != c || !sameFloatBits(want.Spec, c.Spec) {
		return Config{}, fmt.Errorf("bucket: decoded config of %s: %w (its compiled fields differ from what Compile derives from its Spec)", c.Spec.Algorithm, ErrCorruptState)
	}
	return c, nil
}

func sameFloatBits(a, b Spec) bool {
	return math.Float64bits(a.Rate) == math.Float64bits(b.Rate) &&
		math.Float64bits(a.MaxBurstSeconds) == math.Float64bits(b.MaxBurstSeconds) &&
		math.Float64bits(a.ColdFactor) == math.Float64bits(b.ColdFactor) &&
		math.Float64bits(a.BurstRatio) == math.Float64bits(b.BurstRatio) &&
		math.Float64bits(a.Strictness) == math.Float64bits(b.Strictness)
}

// appendStateHeader appends the version, algorithm and flags bytes. The
// flags byte is always flagStarted: every pacer's timeline starts at its
// origin (New); the byte is kept so that the layout stays what it was.
func appendStateHeader(b []byte, a Algorithm) []byte {
	return append(b, StateEncodingVersion, byte(a), flagStarted)
}

// appendInt64s appends vs big-endian.
func appendInt64s(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// decodeState checks the header and length of an encoded state with
// len(out) int64 fields and decodes them into out.
func decodeState(b []byte, a Algorithm, out []int64) error {
	want := stateHeaderLen + 8*len(out)
	if len(b) != want {
		return fmt.Errorf("bucket: %s state of %d bytes: %w (want exactly %d)", a, len(b), ErrCorruptState, want)
	}
	if b[0] != StateEncodingVersion {
		return fmt.Errorf("bucket: %s state version %d: %w (want %d)", a, b[0], ErrCorruptState, StateEncodingVersion)
	}
	if Algorithm(b[1]) != a {
		return fmt.Errorf("bucket: state of algorithm %s given to a %s pacer: %w", Algorithm(b[1]), a, ErrCorruptState)
	}
	if b[2] != flagStarted {
		return fmt.Errorf("bucket: %s state flags %#x: %w (allowed: %#x)", a, b[2], ErrCorruptState, flagStarted)
	}
	for i := range out {
		out[i] = int64(binary.BigEndian.Uint64(b[stateHeaderLen+8*i:]))
	}
	return nil
}

// checkPermits validates a permit count: 1 <= n <= c.MaxPermits().
func checkPermits(c *Config, n int64) error {
	if n <= 0 {
		return fmt.Errorf("bucket: %d permits: %w (allowed: 1 to %d)", n, ErrInvalidPermits, c.MaxPermits())
	}
	if m := c.MaxPermits(); n > m {
		return fmt.Errorf("bucket: %d permits: %w (this %s limit grants at most %d at once)", n, ErrTooManyPermits, c.Spec.Algorithm, m)
	}
	return nil
}

// checkMaxWait validates the maxWait of a Reserve: >= 0.
func checkMaxWait(maxWaitNanos int64) error {
	if maxWaitNanos < 0 {
		return fmt.Errorf("bucket: maxWait %d ns: %w (allowed: >= 0)", maxWaitNanos, ErrInvalidDuration)
	}
	return nil
}

// checkReconfigure validates the config given to Reconfigure.
func checkReconfigure(old Algorithm, c Config) error {
	if c.Spec.Algorithm != old {
		return fmt.Errorf("bucket: reconfigure a %s pacer with a %s config: %w (the algorithm cannot change; create a new pacer)", old, c.Spec.Algorithm, ErrInvalidAlgorithm)
	}
	return c.validate()
}
