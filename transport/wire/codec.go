package wire

import (
	"encoding/binary"
	"fmt"
)

// MaxString bounds every string and byte field of a payload.
const MaxString = 1 << 16

// Enc appends payload fields to B.
type Enc struct{ B []byte }

// U8 appends one byte.
func (w *Enc) U8(v byte) { w.B = append(w.B, v) }

// Uvar appends an unsigned varint.
func (w *Enc) Uvar(v uint64) { w.B = binary.AppendUvarint(w.B, v) }

// Svar appends a signed (zig-zag) varint.
func (w *Enc) Svar(v int64) { w.B = binary.AppendVarint(w.B, v) }

// Str appends a length-prefixed string.
func (w *Enc) Str(s string) { w.Uvar(uint64(len(s))); w.B = append(w.B, s...) }

// Bytes appends a length-prefixed byte string.
func (w *Enc) Bytes(p []byte) { w.Uvar(uint64(len(p))); w.B = append(w.B, p...) }

// Bool appends a boolean as one byte, 0 or 1.
func (w *Enc) Bool(v bool) {
	if v {
		w.U8(1)
	} else {
		w.U8(0)
	}
}

// Dec reads payload fields from B. The first failure sticks: later reads
// return zero values and Done reports it.
type Dec struct {
	B   []byte
	err error
}

// Fail records a malformed payload (the first failure wins).
func (r *Dec) Fail() {
	if r.err == nil {
		r.err = ErrMalformed
	}
}

// U8 reads one byte.
func (r *Dec) U8() byte {
	if r.err != nil || len(r.B) < 1 {
		r.Fail()
		return 0
	}
	v := r.B[0]
	r.B = r.B[1:]
	return v
}

// Uvar reads an unsigned varint.
func (r *Dec) Uvar() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Svar reads a signed varint.
func (r *Dec) Svar() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Bytes reads a length-prefixed byte string of at most MaxString bytes;
// the result aliases the payload.
func (r *Dec) Bytes() []byte {
	n := r.Uvar()
	if r.err != nil || n > MaxString || n > uint64(len(r.B)) {
		r.Fail()
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// Str reads a length-prefixed string.
func (r *Dec) Str() string { return string(r.Bytes()) }

// Bool reads a boolean written by Enc.Bool; any byte other than 0 or 1 is
// malformed.
func (r *Dec) Bool() bool {
	switch r.U8() {
	case 0:
		return false
	case 1:
		return true
	}
	r.Fail()
	return false
}

// Done reports the first failure, or trailing bytes after the last field.
func (r *Dec) Done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.B) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.B))
	}
	return nil
}

// Err reports the first failure so far (nil while every read succeeded).
func (r *Dec) Err() error { return r.err }
