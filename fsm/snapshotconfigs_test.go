package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/permitd/permitd/bucket"
)

// TestSnapshotConfigTable: a snapshot lists each config its limits run
// once, in the order the limits (by name) first run them, and each limit
// refers to its config by its place there; a restored state shares one
// config among the limits that run it. Restore rejects a table with a
// config no limit runs or one listed twice, and a limit that runs a
// config out of that order.
func TestSnapshotConfigTable(t *testing.T) {
	h := newHarness(t)
	a, b := strict(t, 10, 1), bursty(t, 10)
	h.put(0, "c", a)
	h.put(0, "b", b)
	h.put(0, "a", a)
	snap := snapshotBytes(t, h.f)
	rawA, rawB := rawConfig(t, a), rawConfig(t, b)

	// The empty template section (one byte) follows the 24-byte header.
	table := 25
	var want []byte
	want = binary.AppendUvarint(want, 2)
	want = appendBytes(want, rawA) // "a" runs it first
	want = appendBytes(want, rawB)
	if !bytes.Equal(snap[table:table+len(want)], want) {
		t.Fatalf("config table % x, want % x", snap[table:table+len(want)], want)
	}
	// Then the limit count, and "a" (name, version 3) runs config 0,
	// "b" (version 2) config 1, "c" (version 1) config 0.
	limits := table + len(want)
	var recs []byte
	recs = append(recs, 3, 1, 'a', 3, 0)
	if !bytes.Equal(snap[limits:limits+len(recs)], recs) {
		t.Fatalf("limit records start % x, want % x", snap[limits:limits+len(recs)], recs)
	}

	g := New()
	if err := restore(g, snap); err != nil {
		t.Fatal(err)
	}
	if ca, cc := g.st.limits["a"].conf, g.st.limits["c"].conf; ca != cc || ca.refs != 2 || len(g.st.configs) != 2 {
		t.Fatalf("restored limits a and c run %p and %p (refs %d), %d configs: want one shared config of 2 refs, 2 configs", ca, cc, ca.refs, len(g.st.configs))
	}
	checkConfigTable(t, g)

	splice := func(at, drop int, insert []byte) []byte {
		out := append(bytes.Clone(snap[:at]), insert...)
		return withCRC(append(out, snap[at+drop:]...))
	}
	tableWith := func(raws ...string) []byte {
		b := binary.AppendUvarint(nil, uint64(len(raws)))
		for _, r := range raws {
			b = appendBytes(b, r)
		}
		return b
	}
	rawC := rawConfig(t, strict(t, 99, 0))
	for _, tt := range []struct {
		desc string
		b    []byte
		want string
	}{
		{"a config no limit runs", splice(table, len(want), tableWith(rawA, rawB, rawC)), "config 2 is run by no limit"},
		{"a config listed twice", splice(table, len(want), tableWith(rawA, rawB, rawA)), "repeats an earlier config"},
		{"a limit runs a config out of order", splice(limits+4, 1, []byte{1}), "runs config 1 (allowed: one of the 0 configs earlier limits run, or the next one"},
		{"a limit runs a config past the table", splice(limits+4, 1, []byte{7}), "runs config 7"},
	} {
		err := restore(New(), tt.b)
		if err == nil || !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Restore error %v, want ErrDecode containing %q", tt.desc, err, tt.want)
		}
	}
}

// rawConfig returns c's canonical encoding.
func rawConfig(t *testing.T, c bucket.Config) string {
	t.Helper()
	b, err := c.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
