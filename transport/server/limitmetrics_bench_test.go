package server

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkLimitMetricsPerLimit measures the heap the per-limit metrics
// keep for each limit a node saw a grant on (the wait histogram kept
// since the node started; the names themselves are the register's):
//
//	go test ./transport/server -run '^$' -bench LimitMetricsPerLimit -benchtime 1x
func BenchmarkLimitMetricsPerLimit(b *testing.B) {
	const n = 100_000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("tenant:%08d", i)
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := NewLimitMetrics(-1)
		for _, name := range names {
			m.GrantedWait(name, "", 1000)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(m)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/limit")
	}
}
