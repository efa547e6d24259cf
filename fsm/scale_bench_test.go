package fsm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// scale_bench_test.go: what issue 41's million keys cost in process: a
// key's creation and drop among n limits, and (memory_bench_test.go) the
// snapshot and restore of n limits.

// scaleSizes are the register sizes the scale benchmarks measure.
var scaleSizes = []int{10_000, 100_000, 1_000_000}

// BenchmarkKeyChurn measures, among n strict limits, putting then
// deleting a limit whose name sorts first (the worst place for an ordered
// index kept as a sorted slice) or in the middle: the index work a
// templated key's creation and drop do inside Apply. ns/op is one put and
// one delete (two entries):
//
//	go test ./fsm -run '^$' -bench KeyChurn -benchtime 2000x
func BenchmarkKeyChurn(b *testing.B) { atScale(b, benchKeyChurn) }

// atScale runs bench once per size of scaleSizes, in a sub-benchmark
// limits=N, on a harness holding that many strict limits (putLimits).
func atScale(b *testing.B, bench func(b *testing.B, h *harness, n int)) {
	for _, n := range scaleSizes {
		b.Run(fmt.Sprintf("limits=%d", n), func(b *testing.B) {
			h := newHarness(b)
			putLimits(b, h, limitKinds[0].spec, n)
			bench(b, h, n)
		})
	}
}

func benchKeyChurn(b *testing.B, h *harness, n int) {
	cfg := compile(b, limitKinds[0].spec)
	for _, where := range []struct{ name, format string }{{"first", "a:%08d"}, {"middle", "tenant:%08d-m"}} {
		b.Run(where.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				name := fmt.Sprintf(where.format, i%n)
				h.put(2*sec, name, cfg)
				h.del(2*sec, name)
				i++
			}
		})
	}
}

// BenchmarkReserveAtScale measures entries of 64 reserves (one permit
// each, on bursty limits of a million permits a second, entries a
// millisecond apart, so that all are granted) on one limit, and on limits drawn at random among n: what a
// reserve costs the state machine on a hot key, and on a random key of a
// million (map lookups and cache misses, no index work). ns/reserve
// excludes nothing (the entry's encoding included, the same in each):
//
//	go test ./fsm -run '^$' -bench ReserveAtScale -benchtime 2000x
func BenchmarkReserveAtScale(b *testing.B) {
	spec := bucket.Spec{Algorithm: bucket.Bursty, Rate: 1e6, Per: time.Second, MaxBurstSeconds: 1}
	for _, n := range append([]int{1}, scaleSizes...) {
		b.Run(fmt.Sprintf("limits=%d", n), func(b *testing.B) {
			h := newHarness(b)
			cfg := compile(b, spec)
			names := make([]string, n)
			for i := range names {
				names[i] = limitName(i)
				h.put(0, names[i], cfg)
			}
			rng := rand.New(rand.NewPCG(41, uint64(n)))
			rs := make([]Reserve, 64)
			now := sec
			for b.Loop() {
				for j := range rs {
					rs[j] = rsv(names[rng.IntN(n)], 1, 0, "")
				}
				for _, r := range h.reserve(now, rs...) {
					if r.Status != Granted {
						b.Fatalf("reserve: %+v", r)
					}
				}
				now += 1e6
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rs)), "ns/reserve")
		})
	}
}

// heapPeak samples the heap's live objects every 200 microseconds until
// stop is called, which returns the highest value seen (bytes).
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done, finished := make(chan struct{}), make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		read()
		return peak.Load()
	}
}

// elapsed returns how long fn takes.
func elapsed(fn func()) time.Duration {
	start := time.Now()
	fn()
	return time.Since(start)
}

// heapObjects returns the bytes of the heap's objects after a GC.
func heapObjects() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
