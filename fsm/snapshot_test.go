package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
)

// randomLog returns n encoded entries drawn from seed: puts (strict and
// bursty), deletes, reserve batches with repeated request ids, noops, with
// times that mostly advance and sometimes go back.
func randomLog(t testing.TB, seed uint64, n int) [][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	names := []string{"a", "b", "c.d", "e:f"}
	var log [][]byte
	now := int64(0)
	for range n {
		switch {
		case rng.IntN(10) == 0:
			now -= rng.Int64N(sec)
		default:
			now += rng.Int64N(sec / 2)
		}
		if rng.IntN(50) == 0 {
			now += DedupWindowNanos / 2
		}
		var b []byte
		var err error
		switch k := rng.IntN(20); {
		case k < 2:
			rate := float64(1 + rng.IntN(20))
			var cfg bucket.Config
			switch rng.IntN(5) {
			case 0:
				cfg = bursty(t, rate)
			case 1:
				cfg = compile(t, bucket.Spec{Algorithm: bucket.WarmingUp, Rate: rate, Warmup: 3 * time.Second})
			case 2:
				cfg = compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: rate})
			default:
				cfg = strict(t, rate, rng.Int64N(4))
			}
			b, err = AppendPut(nil, at(now), PutLimit{Name: names[rng.IntN(len(names))], Config: cfg})
		case k < 3:
			b, err = AppendDelete(nil, at(now), DeleteLimit{Name: names[rng.IntN(len(names))]})
		case k < 4:
			b = AppendNoop(nil, at(now))
		default:
			rs := make([]Reserve, 1+rng.IntN(8))
			for i := range rs {
				id := ""
				if rng.IntN(2) == 0 {
					id = string(rune('A' + rng.IntN(40)))
				}
				rs[i] = rsv(names[rng.IntN(len(names))]+[]string{"", "", "", "x"}[rng.IntN(4)], 1+rng.Int64N(4),
					[]int64{0, sec / 10, sec, 10 * sec}[rng.IntN(4)], id)
			}
			b, err = AppendReserveBatch(nil, at(now), rs)
		}
		if err != nil {
			t.Fatalf("randomLog: %v", err)
		}
		log = append(log, b)
	}
	return log
}

// snapshotBytes takes a snapshot of f and persists it into memory.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer s.Release()
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("Persist: closed %v cancelled %v, want closed only", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func restore(f *FSM, b []byte) error { return f.Restore(io.NopCloser(bytes.NewReader(b))) }

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	failWrite         bool
	closed, cancelled bool
}

func (s *memSink) Write(p []byte) (int, error) {
	if s.failWrite {
		return 0, errors.New("disk full")
	}
	return s.Buffer.Write(p)
}
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

var _ raft.SnapshotSink = (*memSink)(nil)

// richState returns a harness whose state has limits of two algorithms and
// dedup records of every status.
func richState(t testing.TB) *harness {
	h := newHarness(t)
	h.put(0, "api", strict(t, 1, 2))
	h.put(0, "zeta", bursty(t, 5))
	h.put(0, "mid", strict(t, 100, 0))
	h.del(0, "mid")
	h.put(0, "warm", compile(t, bucket.Spec{Algorithm: bucket.WarmingUp, Rate: 10, Warmup: time.Second}))
	h.put(0, "hyb", compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: 1000, BurstRatio: 1.5}))
	h.put(0, "inf", compile(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: math.Inf(1)}))
	h.reserve(sec,
		rsv("api", 1, 0, "granted"),
		rsv("api", 1, 5*sec, "granted-waiting"),
		rsv("api", 1, 0, "refused"),
		rsv("nope", 1, 0, "unknown"),
		rsv("api", 1<<40, 0, "invalid"),
		rsv("zeta", 2, 0, ""),
		rsv("warm", 3, sec, ""),
		rsv("hyb", 5, sec, ""),
		rsv("inf", 1<<40, 0, ""),
	)
	h.noop(2 * sec)
	return h
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := richState(t)
	snap := snapshotBytes(t, h.f)
	if !bytes.HasPrefix(snap, []byte("PRMTFSM\x0b")) {
		t.Fatalf("snapshot starts with %q, want the magic and version", snap[:8])
	}
	if got := h.f.StateHash(); got != sha256.Sum256(snap) {
		t.Fatalf("StateHash is not the SHA-256 of the snapshot")
	}
	g := restoreByteIdentical(t, h.f, snap)
	if !reflect.DeepEqual(g.Limits(), h.f.Limits()) || g.AppliedIndex() != h.f.AppliedIndex() ||
		g.LastNowNanos() != h.f.LastNowNanos() || g.DedupEntries() != 5 {
		t.Fatalf("restored state differs: %+v vs %+v", g.Limits(), h.f.Limits())
	}
	// Both continue identically.
	hg := &harness{t: t, f: g, index: h.index}
	for _, b := range randomLog(t, 3, 200) {
		if r1, r2 := h.apply(b), hg.apply(b); !reflect.DeepEqual(r1, r2) {
			t.Fatalf("index %d: original %+v, restored %+v", h.index, r1, r2)
		}
	}
	if h.f.StateHash() != g.StateHash() {
		t.Fatalf("original and restored FSMs diverged")
	}
}

// TestReplicasAgree feeds the same log to two FSMs, and to a third that
// restores the first's snapshot half way, and checks they agree byte for
// byte.
func TestReplicasAgree(t *testing.T) {
	for seed := range uint64(4) {
		log := randomLog(t, seed, 600)
		a, b, c := newHarness(t), newHarness(t), newHarness(t)
		for i, e := range log {
			ra, rb := a.apply(e), b.apply(e)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("seed %d entry %d: results differ: %+v vs %+v", seed, i, ra, rb)
			}
			if i == len(log)/2 {
				if err := restore(c.f, snapshotBytes(t, a.f)); err != nil {
					t.Fatal(err)
				}
				c.index = a.index
			} else if i > len(log)/2 {
				if rc := c.apply(e); !reflect.DeepEqual(ra, rc) {
					t.Fatalf("seed %d entry %d: restored replica result %+v, want %+v", seed, i, rc, ra)
				}
			}
		}
		if a.f.StateHash() != b.f.StateHash() || a.f.StateHash() != c.f.StateHash() {
			t.Fatalf("seed %d: replicas disagree", seed)
		}
		if len(a.f.Limits()) == 0 || a.f.DedupEntries() == 0 {
			t.Fatalf("seed %d: weak test, final state has %d limits, %d ids", seed, len(a.f.Limits()), a.f.DedupEntries())
		}
	}
}

// withCRC replaces the checksum of a (modified) snapshot.
func withCRC(b []byte) []byte {
	b = bytes.Clone(b)
	body := b[:len(b)-4]
	binary.BigEndian.PutUint32(b[len(body):], crc32.Checksum(body, castagnoli))
	return b
}

func TestRestoreRejects(t *testing.T) {
	h := richState(t)
	snap := snapshotBytes(t, h.f)
	empty := snapshotBytes(t, New())
	// Offsets into the empty snapshot: header (24 bytes), template count,
	// config count, limit count, dedup count.
	tests := []struct {
		desc string
		b    []byte
		want string
	}{
		{"nil", nil, "too short"},
		{"short", snap[:10], "too short"},
		{"magic", append([]byte("XRMTFSM"), snap[7:]...), "bad magic"},
		{"version 1", withCRC(append(append([]byte("PRMTFSM"), 1), snap[8:]...)), "format version 1"},
		{"version 2", withCRC(append(append([]byte("PRMTFSM"), 2), snap[8:]...)), "format version 2"},
		{"version 3", withCRC(append(append([]byte("PRMTFSM"), 3), snap[8:]...)), "format version 3"},
		{"version 5", withCRC(append(append([]byte("PRMTFSM"), 5), snap[8:]...)), "format version 5"},
		{"version 6", withCRC(append(append([]byte("PRMTFSM"), 6), snap[8:]...)), "format version 6"},
		{"version 7", withCRC(append(append([]byte("PRMTFSM"), 7), snap[8:]...)), "format version 7"},
		{"version 8", withCRC(append(append([]byte("PRMTFSM"), 8), snap[8:]...)), "format version 8"},
		{"version 9", withCRC(append(append([]byte("PRMTFSM"), 9), snap[8:]...)), "format version 9"},
		{"version 10", withCRC(append(append([]byte("PRMTFSM"), 10), snap[8:]...)), "format version 10 is not supported (supported: 11)"},
		{"checksum", append(bytes.Clone(snap[:len(snap)-1]), snap[len(snap)-1]^1), "checksum mismatch"},
		{"truncated", withCRC(snap[:len(snap)-5]), "truncated"},
		{"trailing", withCRC(append(bytes.Clone(snap[:len(snap)-4]), 0, 0, 0, 0, 0)), "trailing"},
		{"negative now", withCRC(append(append([]byte("PRMTFSM\x0b"), 0xff, 0, 0, 0, 0, 0, 0, 0), empty[16:]...)), "negative"},
		{"huge template count", withCRC(append(append(bytes.Clone(empty[:24]), 0xff, 0x7f), empty[25:]...)), "template count: 16383"},
		{"huge config count", withCRC(append(append(bytes.Clone(empty[:25]), 0xff, 0x7f), empty[26:]...)), "claims 16383 configs"},
		{"huge limit count", withCRC(append(append(bytes.Clone(empty[:26]), 0xff, 0x7f), empty[27:]...)), "claims 16383 limits"},
		{"huge dedup count", withCRC(append(append(bytes.Clone(empty[:27]), 0xff, 0x7f), empty[28:]...)), "claims 16383 reserve request ids"},
		{"huge lease id count", withCRC(append(append(bytes.Clone(empty[:28]), 0xff, 0x7f), empty[29:]...)), "claims 16383 lease request ids"},
		{"huge session count", withCRC(append(append(bytes.Clone(empty[:29]), 0xff, 0x7f), empty[30:]...)), "claims 16383 sessions"},
	}
	for _, tt := range tests {
		f := New()
		err := restore(f, tt.b)
		if err == nil || !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Restore error %v, want ErrDecode containing %q", tt.desc, err, tt.want)
		}
	}
}

// TestRestoreMutations flips every bit of a snapshot's body (fixing the
// checksum): Restore must reject the result or accept exactly its bytes.
func TestRestoreMutations(t *testing.T) {
	restoreMutations(t, snapshotBytes(t, richState(t).f), func(*FSM) {})
}

// restoreMutations restores every single-bit mutation of snap's body (its
// checksum fixed): each must be rejected with an error wrapping ErrDecode,
// or accepted as exactly its bytes, and then checked by accepted.
func restoreMutations(t *testing.T, snap []byte, accepted func(f *FSM)) {
	t.Helper()
	valid := 0
	for i := range len(snap) - 4 {
		for bit := range 8 {
			m := bytes.Clone(snap)
			m[i] ^= 1 << bit
			m = withCRC(m)
			f := New()
			if err := restore(f, m); err != nil {
				if !errors.Is(err, ErrDecode) {
					t.Fatalf("byte %d bit %d: error %v does not wrap ErrDecode", i, bit, err)
				}
				continue
			}
			valid++
			if got := snapshotBytes(t, f); !bytes.Equal(got, m) {
				t.Fatalf("byte %d bit %d: accepted snapshot re-encodes differently", i, bit)
			}
			accepted(f)
		}
	}
	t.Logf("%d of %d single-bit mutations were valid snapshots", valid, (len(snap)-4)*8)
}

func TestRestoreFailureKeepsState(t *testing.T) {
	h := richState(t)
	before := snapshotBytes(t, h.f)
	if err := restore(h.f, []byte("garbage")); err == nil {
		t.Fatal("Restore(garbage) succeeded")
	}
	if err := h.f.Restore(io.NopCloser(iotestErrReader{})); err == nil || !strings.Contains(err.Error(), "fsm: reading snapshot") {
		t.Fatalf("Restore of a failing reader = %v", err)
	}
	if after := snapshotBytes(t, h.f); !bytes.Equal(after, before) {
		t.Fatal("a failed Restore changed the state")
	}
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestRestoreReplacesState(t *testing.T) {
	h := richState(t)
	other := newHarness(t)
	other.put(0, "only", strict(t, 1, 0))
	if err := restore(h.f, snapshotBytes(t, other.f)); err != nil {
		t.Fatal(err)
	}
	if ls := h.f.Limits(); len(ls) != 1 || ls[0].Name != "only" || h.f.DedupEntries() != 0 || h.f.AppliedIndex() != 1 {
		t.Fatalf("after Restore: limits %+v, %d ids, index %d; want only the snapshot's state", ls, h.f.DedupEntries(), h.f.AppliedIndex())
	}
	if h.f.StateHash() != other.f.StateHash() {
		t.Fatal("restored state differs from the snapshot's")
	}
}

func TestPersistCancelsOnWriteError(t *testing.T) {
	s, err := New().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{failWrite: true}
	if err := s.Persist(sink); err == nil || !sink.cancelled || sink.closed {
		t.Fatalf("Persist = %v, cancelled %v closed %v; want an error and Cancel", err, sink.cancelled, sink.closed)
	}
	s.Release()
}

// TestConcurrentReads runs the read API against Apply and Snapshot (run with
// -race).
func TestConcurrentReads(t *testing.T) {
	h := newHarness(t)
	log := randomLog(t, 11, 400)
	stop := readConcurrently(3, func() {
		for _, l := range h.f.Limits() {
			h.f.Limit(l.Name)
		}
		_ = h.f.AppliedIndex() + uint64(h.f.LastNowNanos()) + uint64(h.f.DedupEntries())
		_ = h.f.StateHash()
	})
	for i, e := range log {
		h.apply(e)
		if i%100 == 0 {
			snapshotBytes(t, h.f)
		}
	}
	stop()
}

// restoreByteIdentical checks that f, whose snapshot is snap, snapshots
// to snap again, and that a new FSM restored from snap snapshots to snap
// too; it returns that FSM.
func restoreByteIdentical(t *testing.T, f *FSM, snap []byte) *FSM {
	t.Helper()
	if again := snapshotBytes(t, f); !bytes.Equal(again, snap) {
		t.Fatalf("two snapshots of the same state differ")
	}
	g := New()
	if err := restore(g, snap); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if again := snapshotBytes(t, g); !bytes.Equal(again, snap) {
		t.Fatalf("snapshot -> restore -> snapshot is not byte-identical")
	}
	return g
}

// readConcurrently starts n goroutines that call read over and over
// until the returned stop is called; stop waits for them to end.
func readConcurrently(n int, read func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				read()
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}
