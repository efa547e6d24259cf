package worker

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestWireRoundTrip(t *testing.T) {
	m := meta{Group: "A", Name: "w-1", StealAddr: ""}
	if got, err := decodeMeta(m.append(nil)); err != nil || got != m {
		t.Fatalf("meta: got %+v, %v; want %+v", got, err, m)
	}
	q := stealRequest{ID: 1 << 40, Limit: "api", From: "w-1", Group: "A", Want: 12345}
	if got, err := decodeStealRequest(q.append(nil)); err != nil || got != q {
		t.Fatalf("request: got %+v, %v; want %+v", got, err, q)
	}
	r := stealReply{ID: 7, Limit: "api", From: "w-2", Permits: 9, ValidForNanos: 123456789, LeaseID: 3, Epoch: 44}
	if got, err := decodeStealReply(r.append(nil)); err != nil || got != r {
		t.Fatalf("reply: got %+v, %v; want %+v", got, err, r)
	}
	if k := messageKind(q.append(nil)); k != kindSteal {
		t.Errorf("messageKind(request) = %d", k)
	}
	if k := messageKind([]byte{1, 2, 3}); k != 0 {
		t.Errorf("messageKind(garbage) = %d", k)
	}
}

func TestWireRejectsMalformed(t *testing.T) {
	req := stealRequest{ID: 1, Limit: "api", From: "w-1", Group: "A", Want: 1}.append(nil)
	rep := stealReply{ID: 1, Limit: "api", From: "w-1", Permits: 1, ValidForNanos: 1}.append(nil)
	long := strings.Repeat("x", 129)
	tests := []struct {
		name   string
		decode func([]byte) error
		b      []byte
		want   string
	}{
		{"empty", reqErr, nil, "0 bytes"},
		{"bad magic", reqErr, append([]byte{0x71}, req[1:]...), "header"},
		{"bad version", reqErr, append([]byte{wireMagic, 9}, req[2:]...), "header"},
		{"reply as request", reqErr, rep, "kind 3"},
		{"trailing byte", reqErr, append(bytes.Clone(req), 0), "1 trailing bytes"},
		{"truncated", reqErr, req[:len(req)-1], "bad varint"},
		{"want 0", reqErr, stealRequest{ID: 1, Limit: "api", From: "w", Group: "A", Want: 0}.append(nil), "want 0 permits"},
		{"empty limit", reqErr, stealRequest{ID: 1, Limit: "", From: "w", Group: "A", Want: 1}.append(nil), "limit: length 0"},
		{"long name", reqErr, stealRequest{ID: 1, Limit: "api", From: long, Group: "A", Want: 1}.append(nil), "from: length 129"},
		{"negative permits", repErr, stealReply{ID: 1, Limit: "api", From: "w", Permits: -1}.append(nil), "-1 permits"},
		{"negative validity", repErr, stealReply{ID: 1, Limit: "api", From: "w", Permits: 1, ValidForNanos: -5}.append(nil), "valid for -5"},
		{"meta without name", metaErr, meta{Group: "A"}.append(nil), "name: length 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode(tc.b)
			if !errors.Is(err, errWire) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an errWire mentioning %q", err, tc.want)
			}
		})
	}
}

func reqErr(b []byte) error  { _, err := decodeStealRequest(b); return err }
func repErr(b []byte) error  { _, err := decodeStealReply(b); return err }
func metaErr(b []byte) error { _, err := decodeMeta(b); return err }

// FuzzWireDecoders: gossip messages are network input (from any process
// that can reach the gossip port, or, with a key, any group member). No
// input panics a decoder; every rejection is an errWire; whatever decodes
// re-encodes to a message that decodes to the same value (varints may
// arrive in a longer form than the encoder writes: same value, so
// accepted); and the decoders' own bounds hold (a steal asks for at least
// one permit; a reply gives none or more, valid for a non-negative time).
// What a reply may claim beyond that is the taker's to limit
// (handleStealReply cuts its validity to a TTL).
func FuzzWireDecoders(f *testing.F) {
	f.Add(meta{Group: "A", Name: "w-1", StealAddr: "127.0.0.1:7946"}.append(nil))
	f.Add(stealRequest{ID: 1 << 40, Limit: "api", From: "w-1", Group: "A", Want: 12345}.append(nil))
	f.Add(stealReply{ID: 7, Limit: "api", From: "w-2", Permits: 9, ValidForNanos: 123456789, LeaseID: 3, Epoch: 44}.append(nil))
	f.Add([]byte{wireMagic})
	f.Fuzz(func(t *testing.T, b []byte) {
		notWire := func(what string, err error) bool {
			t.Helper()
			if err != nil && !errors.Is(err, errWire) {
				t.Fatalf("%s: %v is not an errWire", what, err)
			}
			return err != nil
		}
		if m, err := decodeMeta(b); !notWire("meta", err) {
			if again, err := decodeMeta(m.append(nil)); err != nil || again != m {
				t.Fatalf("meta %+v re-encoded decodes to %+v, %v", m, again, err)
			}
		}
		if q, err := decodeStealRequest(b); !notWire("steal request", err) {
			if q.Want < 1 {
				t.Fatalf("a steal request for %d permits decoded", q.Want)
			}
			if again, err := decodeStealRequest(q.append(nil)); err != nil || again != q {
				t.Fatalf("request %+v re-encoded decodes to %+v, %v", q, again, err)
			}
		}
		if r, err := decodeStealReply(b); !notWire("steal reply", err) {
			if r.Permits < 0 || r.ValidForNanos < 0 {
				t.Fatalf("a reply of %d permits valid for %d ns decoded", r.Permits, r.ValidForNanos)
			}
			if again, err := decodeStealReply(r.append(nil)); err != nil || again != r {
				t.Fatalf("reply %+v re-encoded decodes to %+v, %v", r, again, err)
			}
		}
	})
}
