package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// recorder.go: what a run measured, counted by its loops as answers come
// and reported as a Result.

// benchRecorder counts a run's requests and answers, and collects the
// latencies of the admitted ones.
//
// A request is measured when it is sent (handed to its connection) at or
// after measureFrom, the warm-up's end, and before the run's end; every
// measured request is then counted once, whenever its answer comes (the
// run waits for them), in exactly one of granted, refused, shed and errs
// (an error: a failed call, an answer that is no decision, or no answer
// at all), so that requests = granted + refused + shed + errs. Requests
// sent during the warm-up are not counted, whenever they are answered.
type benchRecorder struct {
	mu  sync.Mutex
	lat []time.Duration
	// measureFrom is the warm-up's end (zero: measure from the start);
	// maxRequests > 0 stops the run after that many measured requests
	// are sent, sent counting them.
	measureFrom time.Time
	maxRequests int64
	sent        atomic.Int64
	requests    atomic.Int64
	granted     atomic.Int64
	refused     atomic.Int64
	shed        atomic.Int64
	errs        atomic.Int64
	firstErr    atomic.Value
}

// admit is called as a request is about to be sent: measured says
// whether it counts (sent after the warm-up); ok is false, and the
// request must not be sent, once --max-requests measured requests have
// been.
func (r *benchRecorder) admit() (measured, ok bool) {
	if time.Now().Before(r.measureFrom) {
		return false, true
	}
	if r.maxRequests > 0 && r.sent.Add(1) > r.maxRequests {
		return false, false
	}
	return true, true
}

// full reports whether --max-requests measured requests have been sent
// (so that an open loop stops without waiting for a slot first).
func (r *benchRecorder) full() bool {
	return r.maxRequests > 0 && r.sent.Load() >= r.maxRequests
}

// record adds a worker's latencies.
func (r *benchRecorder) record(lat []time.Duration) {
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.mu.Unlock()
}

// fail counts a measured request that failed, remembering the first
// error.
func (r *benchRecorder) fail(err error) {
	r.requests.Add(1)
	r.errs.Add(1)
	r.note(err)
}

// note remembers err as the first error if none is yet, counting
// nothing: a failure that is no request's (a connection that broke with
// none outstanding, an answer to no request).
func (r *benchRecorder) note(err error) {
	r.firstErr.CompareAndSwap(nil, err.Error())
}

// answer counts a measured request's answer: the HTTP status it stands
// for (code), whether the node shed it as overloaded, or the error that
// failed it (fail counts it then). It reports whether the reserve was
// admitted (granted or refused), its latency to be recorded.
func (r *benchRecorder) answer(code int, overloaded bool, err error, fail func(error)) bool {
	switch {
	case err != nil:
		fail(err)
		return false
	case overloaded:
		r.requests.Add(1)
		r.shed.Add(1)
		return false
	case code == 200:
		r.requests.Add(1)
		r.granted.Add(1)
		return true
	case code == 429:
		r.requests.Add(1)
		r.refused.Add(1)
		return true
	}
	fail(fmt.Errorf("HTTP %d", code))
	return false
}

// counts is a snapshot of a recorder's counts.
type counts struct {
	requests, granted, refused, shed, errs int64
}

// snapshot reads the counts once (after the run's requests are all
// counted, so that they add up).
func (r *benchRecorder) snapshot() counts {
	return counts{requests: r.requests.Load(), granted: r.granted.Load(), refused: r.refused.Load(), shed: r.shed.Load(), errs: r.errs.Load()}
}

// mean is the mean of the recorded latencies (0 if none).
func (r *benchRecorder) mean() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lat) == 0 {
		return 0
	}
	var sum time.Duration
	for _, l := range r.lat {
		sum += l
	}
	return sum / time.Duration(len(r.lat))
}

// result is the report of a run that measured for elapsed.
func (r *benchRecorder) result(b Config, elapsed time.Duration) Result {
	c := r.snapshot()
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
		Mode: b.Mode, Protocol: b.Protocol, Concurrency: b.Concurrency, Servers: strings.Join(b.Servers, ","), Limit: b.Limit, Keys: b.Keys,
		DurationSec: elapsed.Seconds(), Requests: c.requests, Granted: c.granted,
		Refused: c.refused, Errors: c.errs, Shed: c.shed,
		RefusedShare: share(c.refused, c.requests),
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
