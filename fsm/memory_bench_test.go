package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/permitd/permitd/bucket"
)

// BenchmarkMemoryPerKey measures the heap one idempotency key costs the
// register: a request ID of the Go client's old form (32 hex characters) in
// the reserve table, and an outcome kept by a session (sessions of 8 192
// unacknowledged outcomes each). It reports bytes/key; the README's memory
// figures come from it:
//
//	go test ./fsm -run '^$' -bench MemoryPerKey -benchtime 1x
func BenchmarkMemoryPerKey(b *testing.B) {
	const n, batch = 98_304, 1024
	measure := func(b *testing.B, key func(h *harness, k int) Reserve) {
		b.Helper()
		for b.Loop() {
			h := newHarness(b)
			h.put(0, "api", strict(b, 1e9, 0))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rs := make([]Reserve, batch)
			for i := range n / batch {
				for j := range rs {
					rs[j] = key(h, i*batch+j)
				}
				h.reserve(int64(i), rs...)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/key")
			runtime.KeepAlive(h)
		}
	}
	b.Run("request-id", func(b *testing.B) {
		measure(b, func(_ *harness, k int) Reserve { return rsv("api", 1, 0, fmt.Sprintf("%032x", k)) })
	})
	b.Run("session-outcome", func(b *testing.B) {
		const perSession = 8192
		var session uint64
		measure(b, func(h *harness, k int) Reserve {
			if k%perSession == 0 {
				// Opened between batches: k is a multiple of the batch size.
				session = h.openSession(int64(k)).ID
			}
			return Reserve{Limit: "api", Permits: 1, Session: SessionRef{ID: session, Seq: uint64(k%perSession) + 1, AckedBelow: 1}}
		})
	})
}

// limitKinds are the algorithms BenchmarkMemoryPerLimit and
// BenchmarkSnapshotLimits measure, as a templated key of issue 41 would
// use them.
var limitKinds = []struct {
	name string
	spec bucket.Spec
}{
	{"strict", bucket.Spec{Algorithm: bucket.Strict, Rate: 100, Per: time.Minute, MaxReserved: 10}},
	{"bursty", bucket.Spec{Algorithm: bucket.Bursty, Rate: 100, Per: time.Minute}},
	{"hybrid", bucket.Spec{Algorithm: bucket.Hybrid, Rate: 100, Per: time.Minute}},
}

// limitName is the name of the i-th benchmark limit: a templated key of
// issue 41's form, {prefix}:{key}.
func limitName(i int) string { return fmt.Sprintf("tenant:%08d", i) }

// putLimits puts n limits of spec's algorithm on h (one entry each, at
// time 0), then reserves one permit on each (reserveEach), so that every
// pacer has state.
func putLimits(t testing.TB, h *harness, spec bucket.Spec, n int) {
	t.Helper()
	cfg := compile(t, spec)
	for i := range n {
		h.put(0, limitName(i), cfg)
	}
	reserveEach(t, h, n)
}

// reserveEach reserves one permit on each of the n benchmark limits, in
// entries of 1024 reserves, at time 1 s.
func reserveEach(t testing.TB, h *harness, n int) {
	t.Helper()
	const batch = 1024
	rs := make([]Reserve, 0, batch)
	for i := 0; i < n; i += batch {
		rs = rs[:0]
		for j := i; j < min(n, i+batch); j++ {
			rs = append(rs, rsv(limitName(j), 1, sec, ""))
		}
		for k, r := range h.reserve(sec, rs...) {
			if r.Status != Granted {
				t.Fatalf("reserve on %s: %+v", rs[k].Limit, r)
			}
		}
	}
}

// BenchmarkMemoryPerLimit measures the heap one limit costs the register:
// n limits of one algorithm (named tenant:%08d) are put, one permit is
// reserved on each, and the live heap is compared with the empty FSM's.
// It reports bytes/limit:
//
//	go test ./fsm -run '^$' -bench MemoryPerLimit -benchtime 1x
func BenchmarkMemoryPerLimit(b *testing.B) {
	const n = 100_000
	for _, k := range limitKinds {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				h := newHarness(b)
				putLimits(b, h, k.spec, n)
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/limit")
				runtime.KeepAlive(h)
			}
		})
	}
	// Keys a template created on their first reserve (a hybrid template
	// has no burst pool: one with a burst pool never rests).
	for _, k := range limitKinds {
		b.Run("templated-"+k.name, func(b *testing.B) {
			spec := k.spec
			if spec.Algorithm == bucket.Hybrid {
				spec.Strictness = 1
			}
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				h := newHarness(b)
				templateKeys(b, h, spec, n)
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/limit")
				runtime.KeepAlive(h)
			}
		})
	}
}

// templateKeys puts the template "tenant" of spec's algorithm on h, then
// creates n keys of it (tenant:%08d) by reserving one permit on each
// (reserveEach).
func templateKeys(t testing.TB, h *harness, spec bucket.Spec, n int) {
	t.Helper()
	h.apply(mustEntry(AppendPutTemplate(nil, at(0), PutTemplate{Prefix: "tenant", Config: compile(t, spec), IdleNanos: MaxTemplateIdleNanos, MaxKeys: MaxTemplatedKeys})))
	reserveEach(t, h, n)
}

// BenchmarkSnapshotLimits measures a snapshot of n strict limits (each
// reserved once): its size per limit, how long encoding it takes
// (FSM.Snapshot then Persist, sub-benchmark snapshot, with lock-ms the
// part Snapshot takes, while Apply waits) and how long Restore takes
// (restore), with the heap Restore allocates per limit, the peak of the
// live heap during Restore above what was live before (the snapshot's
// bytes included), and the heap the restored state keeps:
//
//	go test ./fsm -run '^$' -bench SnapshotLimits -benchtime 1x
func BenchmarkSnapshotLimits(b *testing.B) { atScale(b, benchSnapshotLimits) }

func benchSnapshotLimits(b *testing.B, h *harness, n int) {
	data := snapshotBytes(b, h.f)
	b.Run("snapshot", func(b *testing.B) {
		var locked time.Duration
		for b.Loop() {
			var snap raft.FSMSnapshot
			var err error
			locked += elapsed(func() { snap, err = h.f.Snapshot() })
			if err != nil {
				b.Fatal(err)
			}
			sink := &memSink{}
			if err := snap.Persist(sink); err != nil {
				b.Fatal(err)
			}
			snap.Release()
			data = sink.Bytes()
		}
		b.ReportMetric(float64(len(data))/float64(n), "snapshot-bytes/limit")
		b.ReportMetric(float64(locked.Microseconds())/1e3/float64(b.N), "lock-ms")
	})
	b.Run("restore", func(b *testing.B) {
		var f *FSM
		var before, after runtime.MemStats
		var peak, kept uint64
		for b.Loop() {
			f = nil
			base := heapObjects()
			runtime.ReadMemStats(&before)
			stop := heapPeak()
			f = New()
			if err := restore(f, data); err != nil {
				b.Fatal(err)
			}
			peak += stop() - base
			runtime.ReadMemStats(&after)
			kept += heapObjects() - base
		}
		if got, want := f.StateHash(), h.f.StateHash(); got != want {
			b.Fatalf("restored state hash %x, want %x", got, want)
		}
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n), "alloc-bytes/limit")
		b.ReportMetric(float64(peak)/float64(b.N)/(1<<20), "peak-MiB")
		b.ReportMetric(float64(kept)/float64(b.N)/(1<<20), "kept-MiB")
	})
}

// BenchmarkLimitsAtScale measures, with n strict limits (each reserved
// once), the work that grows with the number of limits: Limits (every
// limit's view; GET /v1/limits answers at most a page of them, the
// shadow metrics read ShadowLimits), and creating a limit whose
// name sorts first (BenchmarkKeyChurn measures its creation and drop):
//
//	go test ./fsm -run '^$' -bench LimitsAtScale -benchtime 20x
func BenchmarkLimitsAtScale(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		h := newHarness(b)
		putLimits(b, h, limitKinds[0].spec, n)
		b.Run(fmt.Sprintf("limits=%d/Limits", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := len(h.f.Limits()); got < n {
					b.Fatalf("Limits: %d, want %d", got, n)
				}
			}
		})
		b.Run(fmt.Sprintf("limits=%d/put-first", n), func(b *testing.B) {
			cfg := compile(b, limitKinds[0].spec)
			i := 0
			for b.Loop() {
				h.put(2*sec, fmt.Sprintf("a:%08d", i), cfg)
				i++
			}
		})
	}
}

// maxBytesPerLimit bounds the heap a strict limit of a template-like
// fleet (one config, reserved once) costs the register: issue 41's
// million keys then take about 250 MB of live heap.
const maxBytesPerLimit = 320

// TestMemoryPerLimit: 20 000 strict limits of one config, each reserved
// once, take at most maxBytesPerLimit bytes of heap each
// (BenchmarkMemoryPerLimit measures all algorithms).
func TestMemoryPerLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap of 20 000 limits")
	}
	const n = 20_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := newHarness(t)
	putLimits(t, h, bucket.Spec{Algorithm: bucket.Strict, Rate: 100, Per: time.Minute, MaxReserved: 10}, n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(h)
	if got := int64(after.HeapAlloc-before.HeapAlloc) / n; got > maxBytesPerLimit {
		t.Errorf("%d strict limits take %d bytes of heap each, want at most %d", n, got, maxBytesPerLimit)
	}
}
