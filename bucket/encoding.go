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
// Config, version 1 (configEncodedLen = 131 bytes; Strict, Bursty,
// WarmingUp and Hybrid):
//
//	version(1)=1 algorithm(1)
//	Spec: Rate(8, float64 bits) Per(8) MaxReserved(8) Expiry(8)
//	      MaxBurstSeconds(8, bits) Warmup(8) ColdFactor(8, bits)
//	      BurstRatio(8, bits) Strictness(8, bits)
//	compiled: IntervalNanos(8) ExpiryNanos(8) MaxStoredNanos(8)
//	      ThresholdNanos(8) ColdIntervalNanos(8) ActiveNanos(8) BurstNanos(8)
//	      CompensationShift(1)
//
// Config, version 2 (configEncodedLenV2 = 147 bytes; Concurrency only):
// the version-1 layout with version byte 2 (every field of another
// algorithm is zero), followed by
//
//	Spec: MaxInFlight(8) HoldTTL(8)
//
// A config of the first four algorithms is always encoded as version 1, so
// that its bytes are what they were before Concurrency existed.
//
// Pacer state: version(1)=1 algorithm(1) flags(1) then the algorithm's
// int64 fields (see each pacer's AppendState): a fixed number of them, or
// for Concurrency a count followed by that many pairs.
const (
	// ConfigEncodingVersion is the version byte of Config.AppendBinary for
	// the Strict, Bursty, WarmingUp and Hybrid algorithms.
	ConfigEncodingVersion = 1
	// ConfigEncodingVersion2 is the version byte of Config.AppendBinary
	// for Concurrency: the version-1 layout followed by MaxInFlight and
	// HoldTTL.
	ConfigEncodingVersion2 = 2
	// StateEncodingVersion is the version byte of Pacer.AppendState.
	StateEncodingVersion = 1

	configEncodedLen   = 2 + 9*8 + 7*8 + 1
	configEncodedLenV2 = configEncodedLen + 2*8
	stateHeaderLen     = 3
	flagStarted        = 1 << 0
)

// AppendBinary appends the encoding of c to b. It fails, appending nothing,
// when c is not what Compile makes of c.Spec.
func (c Config) AppendBinary(b []byte) ([]byte, error) {
	if err := c.validate(); err != nil {
		return b, err
	}
	version := byte(ConfigEncodingVersion)
	if c.Spec.Algorithm == Concurrency {
		version = ConfigEncodingVersion2
	}
	b = append(b, version, byte(c.Spec.Algorithm))
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
	b = append(b, c.CompensationShift)
	if version == ConfigEncodingVersion2 {
		b = appendInt64s(b, s.MaxInFlight, int64(s.HoldTTL))
	}
	return b, nil
}

// DecodeConfig decodes what Config.AppendBinary encoded. It validates the
// version, the length and that the version is the algorithm's (1 for
// Strict, Bursty, WarmingUp and Hybrid, 131 bytes; 2 for Concurrency, 147
// bytes), then recompiles the decoded Spec and requires the compiled fields
// to equal the decoded ones, so that a Config it returns is always one
// Compile would return. Errors wrap ErrCorruptState, or the Compile error
// of an invalid Spec.
func DecodeConfig(b []byte) (Config, error) {
	if len(b) < 2 {
		return Config{}, fmt.Errorf("bucket: config encoding of %d bytes: %w (want exactly %d for version %d, %d for version %d)",
			len(b), ErrCorruptState, configEncodedLen, ConfigEncodingVersion, configEncodedLenV2, ConfigEncodingVersion2)
	}
	var wantLen int
	switch b[0] {
	case ConfigEncodingVersion:
		wantLen = configEncodedLen
	case ConfigEncodingVersion2:
		wantLen = configEncodedLenV2
	default:
		return Config{}, fmt.Errorf("bucket: config encoding version %d: %w (want %d, or %d for a concurrency config)",
			b[0], ErrCorruptState, ConfigEncodingVersion, ConfigEncodingVersion2)
	}
	if (b[0] == ConfigEncodingVersion2) != (Algorithm(b[1]) == Concurrency) {
		return Config{}, fmt.Errorf("bucket: config encoding version %d of algorithm %s: %w (a concurrency config is version %d, any other algorithm's is version %d)",
			b[0], Algorithm(b[1]), ErrCorruptState, ConfigEncodingVersion2, ConfigEncodingVersion)
	}
	if len(b) != wantLen {
		return Config{}, fmt.Errorf("bucket: version %d config encoding of %d bytes: %w (want exactly %d)", b[0], len(b), ErrCorruptState, wantLen)
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
	if b[0] == ConfigEncodingVersion2 {
		c.Spec.MaxInFlight = int64(binary.BigEndian.Uint64(b[configEncodedLen:]))
		c.Spec.HoldTTL = time.Duration(binary.BigEndian.Uint64(b[configEncodedLen+8:]))
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
	if err := checkStateHeader(b, a); err != nil {
		return err
	}
	for i := range out {
		out[i] = int64(binary.BigEndian.Uint64(b[stateHeaderLen+8*i:]))
	}
	return nil
}

// decodeVarState checks the header of an encoded state of variable length:
// fixed int64 fields, then a count and count records of perRecord int64
// fields each (count at most maxCount). It decodes the fixed fields into
// fixed and returns the count and the record fields, in order.
func decodeVarState(b []byte, a Algorithm, fixed []int64, perRecord int, maxCount int64) (int64, []int64, error) {
	head := stateHeaderLen + 8*(len(fixed)+1)
	if len(b) < head {
		return 0, nil, fmt.Errorf("bucket: %s state of %d bytes: %w (want at least %d)", a, len(b), ErrCorruptState, head)
	}
	if err := checkStateHeader(b, a); err != nil {
		return 0, nil, err
	}
	for i := range fixed {
		fixed[i] = int64(binary.BigEndian.Uint64(b[stateHeaderLen+8*i:]))
	}
	count := int64(binary.BigEndian.Uint64(b[head-8:]))
	if count < 0 || count > maxCount {
		return 0, nil, fmt.Errorf("bucket: %s state with %d records: %w (allowed: 0 to %d)", a, count, ErrCorruptState, maxCount)
	}
	// count <= maxCount keeps the length below 2^63 for the limits used here.
	want := int64(head) + 8*int64(perRecord)*count
	if int64(len(b)) != want {
		return 0, nil, fmt.Errorf("bucket: %s state of %d bytes with %d records: %w (want exactly %d)", a, len(b), count, ErrCorruptState, want)
	}
	recs := make([]int64, int(count)*perRecord)
	for i := range recs {
		recs[i] = int64(binary.BigEndian.Uint64(b[head+8*i:]))
	}
	return count, recs, nil
}

// checkStateHeader checks the version, algorithm and flags bytes of an
// encoded state of at least stateHeaderLen bytes.
func checkStateHeader(b []byte, a Algorithm) error {
	if b[0] != StateEncodingVersion {
		return fmt.Errorf("bucket: %s state version %d: %w (want %d)", a, b[0], ErrCorruptState, StateEncodingVersion)
	}
	if Algorithm(b[1]) != a {
		return fmt.Errorf("bucket: state of algorithm %s given to a %s pacer: %w", Algorithm(b[1]), a, ErrCorruptState)
	}
	if b[2] != flagStarted {
		return fmt.Errorf("bucket: %s state flags %#x: %w (allowed: %#x)", a, b[2], ErrCorruptState, flagStarted)
	}
	return nil
}
