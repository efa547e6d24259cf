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
	// The header is built in the buffer's free space (an array of its
	// own would escape to the heap through the writer: an allocation
	// per frame); with less room than a header, it takes one.
	hdr := w.AvailableBuffer()
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(9+len(f.Payload)))
	hdr = binary.BigEndian.AppendUint64(hdr, f.ID)
	hdr = append(hdr, f.Kind)
	if _, err := w.Write(hdr); err != nil {
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
	var hdr []byte
	if br, ok := r.(*bufio.Reader); ok {
		// Read in place: an array of its own would escape to the heap
		// through the reader, an allocation per frame.
		h, err := br.Peek(headerBytes)
		if err != nil {
			if len(h) > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF // as io.ReadFull reports a partial header
			}
			return Frame{}, err
		}
		hdr = h
		_, _ = br.Discard(headerBytes) // h stays valid until the next read
	} else {
		var a [headerBytes]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return Frame{}, err
		}
		hdr = a[:]
	}
	maxLen = min(maxLen, MaxFrame)
	n, id, kind := binary.BigEndian.Uint32(hdr[0:4]), binary.BigEndian.Uint64(hdr[4:12]), hdr[12] // before the payload's read moves the buffer
	if n < 9 || n > maxLen {
		return Frame{}, fmt.Errorf("%w: frame of %d bytes: allowed 9..%d", ErrMalformed, n, maxLen)
	}
	payload := make([]byte, n-9)
	if _, err := io.ReadFull(r, payload); err != nil {
		return Frame{}, err
	}
	return Frame{ID: id, Kind: kind, Payload: payload}, nil
}
