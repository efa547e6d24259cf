package fsm

import (
	"fmt"
	"runtime"
	"testing"
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
