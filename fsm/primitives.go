package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// primitives.go: the byte-level encodings that log entries (encode.go,
// decode.go) and snapshots (snapshot.go) are built of, and the reader that
// decodes them:
//
//   - fixed int64/uint64: 8 bytes big-endian;
//   - uvarint: encoding/binary's unsigned varint, in its shortest form
//     (a longer form of the same value is rejected, so that every value has
//     exactly one encoding);
//   - varint: zig-zag signed varint, shortest form;
//   - bytes/string: uvarint length, then the bytes.

// appendUint64 appends v as 8 bytes big-endian.
func appendUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// appendBytes appends a uvarint length and the bytes of s.
func appendBytes[T ~string | ~[]byte](b []byte, s T) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// uvarintLen is the length of the shortest uvarint encoding of v.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// reader decodes primitives from b with a sticky error: after the first
// failure every read returns zero values, and err says what failed first.
// It never panics and never allocates more than the input justifies.
type reader struct {
	b   []byte
	off int
	err error
	// what names the structure being decoded, for error messages
	// ("log entry", "snapshot").
	what string
	// unit and index name the element being decoded inside it ("reserve",
	// 3), when unit is not empty.
	unit  string
	index int
}

// fail records err (wrapping ErrDecode) unless an error is already recorded.
func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		msg := fmt.Sprintf(format, args...)
		if r.unit != "" {
			msg = fmt.Sprintf("%s %d: %s", r.unit, r.index, msg)
		}
		r.err = fmt.Errorf("%w: %s: %s", ErrDecode, r.what, msg)
	}
}

// failErr records an already formed error unless one is already recorded.
func (r *reader) failErr(err error) {
	if r.err == nil {
		r.err = err
	}
}

// remaining is the number of bytes not yet read.
func (r *reader) remaining() int { return len(r.b) - r.off }

// need reports whether n more bytes are available, recording an error if not.
func (r *reader) need(n int, field string) bool {
	if r.err != nil {
		return false
	}
	if n > r.remaining() {
		r.fail("%s: truncated at byte %d (need %d bytes, have %d)", field, r.off, n, r.remaining())
		return false
	}
	return true
}

func (r *reader) byte1(field string) byte {
	if !r.need(1, field) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

// bool1 reads a byte that must be 0 (false) or 1 (true).
func (r *reader) bool1(field string) bool {
	v := r.byte1(field)
	if r.err == nil && v > 1 {
		r.fail("%s byte %d (allowed: 0, 1)", field, v)
	}
	return v == 1
}

func (r *reader) uint64BE(field string) uint64 {
	if !r.need(8, field) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// uvarint reads a uvarint in its shortest form.
func (r *reader) uvarint(field string) uint64 { return r.uvarintOf(field, "") }

// uvarintOf is uvarint for a field named field+suffix; the name is only
// built on failure, so that decoding does not allocate.
func (r *reader) uvarintOf(field, suffix string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	switch {
	case n == 0:
		r.fail("%s%s: truncated varint at byte %d", field, suffix, r.off)
		return 0
	case n < 0:
		r.fail("%s%s: varint at byte %d overflows 64 bits", field, suffix, r.off)
		return 0
	case n != uvarintLen(v):
		r.fail("%s%s: varint at byte %d is not in shortest form", field, suffix, r.off)
		return 0
	}
	r.off += n
	return v
}

// varint reads a zig-zag varint in its shortest form.
func (r *reader) varint(field string) int64 {
	u := r.uvarint(field)
	return int64(u>>1) ^ -int64(u&1)
}

// uvarintMax reads a uvarint and checks it is at most limit.
func (r *reader) uvarintMax(field string, limit uint64) uint64 {
	v := r.uvarint(field)
	if v > limit {
		r.fail("%s: %d at byte %d is too large (allowed: at most %d)", field, v, r.off, limit)
		return 0
	}
	return v
}

// bytes reads a length-prefixed byte string of at most maxLen bytes and
// returns it as a sub-slice of the input (no copy).
func (r *reader) bytes(field string, maxLen int) []byte {
	start := r.off
	n := r.uvarintOf(field, " length")
	if r.err != nil {
		return nil
	}
	if n > uint64(maxLen) {
		r.fail("%s: length %d at byte %d is too large (allowed: at most %d)", field, n, start, maxLen)
		return nil
	}
	if !r.need(int(n), field) {
		return nil
	}
	v := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return v
}

// end records an error if bytes remain after a complete structure.
func (r *reader) end() {
	if r.err == nil && r.remaining() != 0 {
		r.fail("%d trailing bytes after byte %d", r.remaining(), r.off)
	}
}

// int64Snap reads a uvarint that must fit in int64.
func (r *reader) int64Snap(field string) int64 {
	v := r.uvarint(field)
	if r.err == nil && v > math.MaxInt64 {
		r.fail("%s %d exceeds the int64 range", field, v)
		return 0
	}
	return int64(v)
}

// insertLen inserts, at start, the uvarint length of b[start:], so that
// b[start:] becomes a length-prefixed byte string. It allocates only if b
// must grow.
func insertLen(b []byte, start int) []byte {
	n := len(b) - start
	pl := uvarintLen(uint64(n))
	for range pl {
		b = append(b, 0)
	}
	copy(b[start+pl:], b[start:start+n])
	binary.PutUvarint(b[start:], uint64(n))
	return b
}

// boolByte is 1 for true, 0 for false.
func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
