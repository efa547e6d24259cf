package node

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// wire.go: the little binary codec used by request forwarding. Every value
// is bounded when read, and a short or malformed frame is an error, never a
// panic: frames cross the network.

var errShortFrame = errors.New("node: malformed forwarding frame")

const maxWireString = 1 << 16

type wbuf struct{ b []byte }

func (w *wbuf) u8(v byte)      { w.b = append(w.b, v) }
func (w *wbuf) uvar(v uint64)  { w.b = binary.AppendUvarint(w.b, v) }
func (w *wbuf) svar(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *wbuf) str(s string)   { w.uvar(uint64(len(s))); w.b = append(w.b, s...) }
func (w *wbuf) bytes(p []byte) { w.uvar(uint64(len(p))); w.b = append(w.b, p...) }

type rbuf struct {
	b   []byte
	err error
}

func (r *rbuf) fail() {
	if r.err == nil {
		r.err = errShortFrame
	}
}

func (r *rbuf) u8() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *rbuf) uvar() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rbuf) svar() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rbuf) bytes() []byte {
	n := r.uvar()
	if r.err != nil || n > maxWireString || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *rbuf) str() string { return string(r.bytes()) }

func (r *rbuf) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errShortFrame, len(r.b))
	}
	return nil
}
