package worker

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/permitd/permitd/transport/client"
)

// The worker's two small encodings: the node meta it gossips, and the
// steal messages it sends over memberlist's reliable user messages.
//
// Every encoding starts with wireMagic and wireVersion, then a kind byte;
// strings are a uvarint length and bytes (at most client.MaxNameLen);
// integers are uvarints (IDs) or zig-zag varints (counts, durations).
// Decoding rejects anything else, trailing bytes included.
//
//	meta:    magic version kindMeta   group name stealAddr
//	request: magic version kindSteal  id limit from group want
//	reply:   magic version kindGive   id limit from permits validForNanos lease epoch
const (
	wireMagic   = 0x70 // 'p'
	wireVersion = 1

	kindMeta  = 1
	kindSteal = 2
	kindGive  = 3
)

// errWire is wrapped by every decoding error.
var errWire = errors.New("worker: malformed message")

// meta is what a worker tells the others through memberlist: discovery
// only, never a source of truth about permits.
type meta struct {
	Group string
	Name  string
	// StealAddr is where steal requests go; empty means the node's gossip
	// address (memberlist reliable messages), the only transport today.
	StealAddr string
}

// stealRequest asks a peer for up to Want idle permits of Limit.
type stealRequest struct {
	ID    uint64
	Limit string
	From  string
	Group string
	Want  int64
}

// stealReply gives Permits (possibly 0) of Limit to the requester of ID.
// ValidForNanos is how long they stay spendable, measured on the donor's
// clock when it debited them: its grant's local expiry (margin included)
// minus that time. LeaseID and Epoch name the donor's grant they come from
// (informational: for logs and audits).
type stealReply struct {
	ID            uint64
	Limit         string
	From          string
	Permits       int64
	ValidForNanos int64
	LeaseID       uint64
	Epoch         uint64
}

func appendHeader(b []byte, kind byte) []byte { return append(b, wireMagic, wireVersion, kind) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (m meta) append(b []byte) []byte {
	b = appendHeader(b, kindMeta)
	b = appendString(b, m.Group)
	b = appendString(b, m.Name)
	return appendString(b, m.StealAddr)
}

func (q stealRequest) append(b []byte) []byte {
	b = appendHeader(b, kindSteal)
	b = binary.AppendUvarint(b, q.ID)
	b = appendString(b, q.Limit)
	b = appendString(b, q.From)
	b = appendString(b, q.Group)
	return binary.AppendVarint(b, q.Want)
}

func (r stealReply) append(b []byte) []byte {
	b = appendHeader(b, kindGive)
	b = binary.AppendUvarint(b, r.ID)
	b = appendString(b, r.Limit)
	b = appendString(b, r.From)
	b = binary.AppendVarint(b, r.Permits)
	b = binary.AppendVarint(b, r.ValidForNanos)
	b = binary.AppendUvarint(b, r.LeaseID)
	return binary.AppendUvarint(b, r.Epoch)
}

// wireReader decodes fields; the first error sticks.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errWire, fmt.Sprintf(format, args...))
	}
}

func (r *wireReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("%s: bad uvarint", field)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) varint(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("%s: bad varint", field)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) str(field string, minLen int) string {
	n := r.uvarint(field + " length")
	if r.err != nil {
		return ""
	}
	if n < uint64(minLen) || n > client.MaxNameLen || n > uint64(len(r.b)) {
		r.fail("%s: length %d (allowed: %d-%d, within the message)", field, n, minLen, client.MaxNameLen)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// open checks the header and returns a reader past it.
func open(b []byte, kind byte) (*wireReader, error) {
	switch {
	case len(b) < 3:
		return nil, fmt.Errorf("%w: %d bytes (allowed: at least 3)", errWire, len(b))
	case b[0] != wireMagic || b[1] != wireVersion:
		return nil, fmt.Errorf("%w: header %#x %d (allowed: magic %#x, version %d)", errWire, b[0], b[1], wireMagic, wireVersion)
	case b[2] != kind:
		return nil, fmt.Errorf("%w: kind %d (expected %d)", errWire, b[2], kind)
	}
	return &wireReader{b: b[3:]}, nil
}

// close reports the first error, or trailing bytes.
func (r *wireReader) close() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

// messageKind returns the kind byte of a worker message, or 0.
func messageKind(b []byte) byte {
	if len(b) < 3 || b[0] != wireMagic || b[1] != wireVersion {
		return 0
	}
	return b[2]
}

func decodeMeta(b []byte) (meta, error) {
	r, err := open(b, kindMeta)
	if err != nil {
		return meta{}, err
	}
	m := meta{Group: r.str("group", 1), Name: r.str("name", 1), StealAddr: r.str("steal address", 0)}
	return m, r.close()
}

func decodeStealRequest(b []byte) (stealRequest, error) {
	r, err := open(b, kindSteal)
	if err != nil {
		return stealRequest{}, err
	}
	q := stealRequest{ID: r.uvarint("id"), Limit: r.str("limit", 1), From: r.str("from", 1), Group: r.str("group", 1), Want: r.varint("want")}
	if r.err == nil && q.Want < 1 {
		r.fail("want %d permits (allowed: >= 1)", q.Want)
	}
	return q, r.close()
}

func decodeStealReply(b []byte) (stealReply, error) {
	r, err := open(b, kindGive)
	if err != nil {
		return stealReply{}, err
	}
	g := stealReply{ID: r.uvarint("id"), Limit: r.str("limit", 1), From: r.str("from", 1), Permits: r.varint("permits"), ValidForNanos: r.varint("valid for"),
		LeaseID: r.uvarint("lease"), Epoch: r.uvarint("epoch")}
	if r.err == nil && (g.Permits < 0 || g.ValidForNanos < 0) {
		r.fail("%d permits valid for %d ns (allowed: both >= 0)", g.Permits, g.ValidForNanos)
	}
	return g, r.close()
}
