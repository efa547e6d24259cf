package bench

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// recorder.go: what a run measured, counted by its loops as answers come
// and reported as a Result.

// benchRecorder counts a run's requests and answers, and collects the
// latencies of the admitted ones; the counts are taken while measuring
// (after the warm-up, before the run's end).
type benchRecorder struct {
	mu        sync.Mutex
	lat       []time.Duration
	measuring atomic.Bool
	requests  atomic.Int64
	granted   atomic.Int64
	refused   atomic.Int64
	shed      atomic.Int64
	errs      atomic.Int64
	firstErr  atomic.Value
}

// record adds a worker's latencies.
func (r *benchRecorder) record(lat []time.Duration) {
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.mu.Unlock()
}

// fail counts a failed request, remembering the first error.
func (r *benchRecorder) fail(err error) {
	r.errs.Add(1)
	r.firstErr.CompareAndSwap(nil, err.Error())
}

// countAnswer counts the answer f, whose request waited lat, while
// measuring and before the run's end; it returns lats with lat appended
// when the request was admitted or refused.
func (rec *benchRecorder) countAnswer(runCtx context.Context, f wire.Frame, lat time.Duration, fail func(error), lats []time.Duration) []time.Duration {
	if !rec.measuring.Load() || runCtx.Err() != nil {
		return lats
	}
	rec.requests.Add(1)
	code, overloaded, err := binaryAnswer(f.Kind, f.Payload)
	switch {
	case err != nil:
		fail(err)
	case overloaded:
		rec.shed.Add(1)
	case code == 200:
		rec.granted.Add(1)
		lats = append(lats, lat)
	default:
		rec.refused.Add(1)
		lats = append(lats, lat)
	}
	return lats
}

// result is the report of a run that measured for elapsed.
func (r *benchRecorder) result(b Config, elapsed time.Duration) Result {
	slices.Sort(r.lat)
	pct := func(p float64) float64 {
		if len(r.lat) == 0 {
			return math.NaN()
		}
		i := int(math.Ceil(p*float64(len(r.lat)))) - 1
		i = max(0, min(i, len(r.lat)-1))
		return float64(r.lat[i]) / 1e6
	}
	res := Result{
		Mode: b.Mode, Protocol: b.Protocol, Concurrency: b.Concurrency, Servers: strings.Join(b.Servers, ","), Limit: b.Limit,
		DurationSec: elapsed.Seconds(), Requests: r.requests.Load(), Granted: r.granted.Load(),
		Refused: r.refused.Load(), Errors: r.errs.Load(), Shed: r.shed.Load(),
		RefusedShare: share(r.refused.Load(), r.requests.Load()),
		P50Ms:        pct(0.50), P90Ms: pct(0.90), P99Ms: pct(0.99), P999Ms: pct(0.999), MaxMs: pct(1),
	}
	if b.Mode == "open" {
		res.OpenRate = b.OpenRate
	}
	res.ThroughputRPS = float64(res.Requests-res.Errors) / elapsed.Seconds()
	res.GoodputRPS = float64(res.Granted+res.Refused) / elapsed.Seconds()
	if v, ok := r.firstErr.Load().(string); ok {
		res.FirstError = v
	}
	return res
}
