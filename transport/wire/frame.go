package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxFrame is the largest frame, header excluded (id, code and payload).
const MaxFrame = 4 << 20

// headerBytes is the frame header: length, call id, op or code.
const headerBytes = 13

// ErrMalformed reports a frame or payload that does not decode.
var ErrMalformed = errors.New("wire: malformed frame")

// Frame is one message: a call (Kind is an Op) or its answer (Kind is a
// Code), paired by ID.
type Frame struct {
	ID      uint64
	Kind    byte
	Payload []byte
}

// WriteFrame appends f to w (unflushed).
func WriteFrame(w *bufio.Writer, f Frame) error {
	if len(f.Payload) > MaxFrame-9 {
		return fmt.Errorf("%w: frame of %d bytes: allowed at most %d", ErrMalformed, len(f.Payload)+9, MaxFrame)
	}
	var hdr [headerBytes]byte
	binary.BigEndian.PutUint32(hdr[0:4], uint32(9+len(f.Payload)))
	binary.BigEndian.PutUint64(hdr[4:12], f.ID)
	hdr[12] = f.Kind
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(f.Payload)
	return err
}

// MaxClientFrame bounds the frames a node reads from a client: a reserve
// is a few hundred bytes at most, and a client must not make the node
// allocate megabytes per call.
const MaxClientFrame = 64 << 10

// MaxClientPayload is the largest payload of a client frame: the frame's
// length counts its call id (8 bytes) and its op (1) too.
const MaxClientPayload = MaxClientFrame - 9

// FrameBuffered reports whether br already holds a whole frame, so that
// reading it will not wait for the peer. A malformed length counts as
// whole: reading it fails at once.
func FrameBuffered(br *bufio.Reader) bool {
	if br.Buffered() < 4 {
		return false
	}
	hdr, err := br.Peek(4)
	if err != nil {
		return false
	}
	n := binary.BigEndian.Uint32(hdr)
	return n < 9 || n > MaxFrame || uint64(br.Buffered()) >= 4+uint64(n)
}

// ReadFrame reads one frame of at most MaxFrame bytes. A length outside
// 9..MaxFrame is ErrMalformed; the connection cannot be resynchronised
// after it.
func ReadFrame(r io.Reader) (Frame, error) { return ReadFrameLimit(r, MaxFrame) }

// ReadFrameLimit is ReadFrame with a smaller bound on the length (at most
// MaxFrame).
func ReadFrameLimit(r io.Reader, maxLen uint32) (Frame, error) {
	var hdr [headerBytes]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, err
	}
	maxLen = min(maxLen, MaxFrame)
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n < 9 || n > maxLen {
		return Frame{}, fmt.Errorf("%w: frame of %d bytes: allowed 9..%d", ErrMalformed, n, maxLen)
	}
	payload := make([]byte, n-9)
	if _, err := io.ReadFull(r, payload); err != nil {
		return Frame{}, err
	}
	return Frame{ID: binary.BigEndian.Uint64(hdr[4:12]), Kind: hdr[12], Payload: payload}, nil
}
