package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// inflight.go: permitd bench --mode inflight, the occupancy of an
// in-flight cap under contention. --concurrency callers share a cap of
// --max-in-flight permits (hold TTL --ttl): each reserves --permits on it
// (POST /v1/reserve, max_wait --max-wait, through the Go client), waits
// for the grant's time, holds the permits for --hold, releases them and
// asks again at once; a refusal is asked again at once too, so demand
// always exceeds the cap when --concurrency x --permits > --max-in-flight.
//
// Occupancy is the time the callers held permits (from receiving a grant,
// or its time if later, to sending its release), in permit-seconds, over
// what the cap offers in the measured window, --max-in-flight x
// --duration: the share of the cap's slots in use. The holds are clipped
// to the window; the warm-up is not measured. The reserves counted are
// those sent in the window, each once when its answer comes (the run
// waits for it), as granted, refused or an error.

// InflightResult is the report of --mode inflight.
type InflightResult struct {
	Mode        string  `json:"mode"`
	Servers     string  `json:"servers"`
	Limit       string  `json:"limit"`
	Concurrency int     `json:"concurrency"`
	MaxInFlight int64   `json:"max_in_flight"`
	Permits     int64   `json:"permits"`
	TTLMs       float64 `json:"ttl_ms"`
	HoldMs      float64 `json:"hold_ms"`
	MaxWaitMs   float64 `json:"max_wait_ms"`
	DurationSec float64 `json:"duration_s"`
	// Reserves counts the reserves sent in the window; Granted, Refused
	// and Errors (failed reserve calls) split them.
	Reserves int64 `json:"reserves"`
	Granted  int64 `json:"granted"`
	Refused  int64 `json:"refused"`
	Errors   int64 `json:"errors"`
	// HoldErrors counts failures while holding a grant of the window:
	// waiting for its time, or releasing it (not reserves).
	HoldErrors int64 `json:"hold_errors"`
	// Occupancy is the share of the cap's permit-seconds held by callers.
	Occupancy float64 `json:"occupancy"`
	// GrantP50Ms and GrantP99Ms are the time from sending a reserve to
	// being able to use its grant (answer plus the grant's wait).
	GrantP50Ms float64 `json:"grant_p50_ms"`
	GrantP99Ms float64 `json:"grant_p99_ms"`
	FirstError string  `json:"first_error,omitempty"`
}

// inflightRecorder collects the callers' measurements.
type inflightRecorder struct {
	mu                                             sync.Mutex
	from, to                                       time.Time
	reserves, granted, refused, errors, holdErrors int64
	heldNanos                                      float64
	grantLat                                       []time.Duration
	firstErr                                       string
}

// measured reports whether a reserve sent at sent is measured: sent in
// the window (from the warm-up's end).
func (r *inflightRecorder) measured(sent time.Time) bool {
	return !sent.Before(r.from)
}

// fail counts a measured reserve that failed (reserve true), or a failure
// while holding a grant of the window.
func (r *inflightRecorder) fail(err error, reserve bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reserve {
		r.reserves++
		r.errors++
	} else {
		r.holdErrors++
	}
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// answered counts a measured reserve's answer (granted or not), and its
// latency to a usable grant.
func (r *inflightRecorder) answered(granted bool, lat time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reserves++
	if granted {
		r.granted++
		r.grantLat = append(r.grantLat, lat)
	} else {
		r.refused++
	}
}

// held counts permits held from start to end, clipped to the window.
func (r *inflightRecorder) held(start, end time.Time, permits int64) {
	start, end = maxTime(start, r.from), minTime(end, r.to)
	if !end.After(start) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heldNanos += float64(end.Sub(start)) * float64(permits)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Inflight runs --mode inflight.
func Inflight(ctx context.Context, b Config) (InflightResult, error) {
	var opts []client.Option
	if b.Token != "" {
		opts = append(opts, client.WithToken(b.Token))
	}
	if b.TLS != nil {
		opts = append(opts, client.WithTLS(b.TLS))
	}
	cl, err := client.New(b.Servers, opts...)
	if err != nil {
		return InflightResult{}, fmt.Errorf("--servers %q: %w", strings.Join(b.Servers, ","), err)
	}
	defer cl.Close()
	if b.Create {
		spec := client.LimitSpec{Algorithm: "concurrency", MaxInFlight: &b.MaxInFlight, TTL: &b.HoldTTL}
		if _, err := cl.PutLimit(ctx, b.Limit, spec); err != nil {
			return InflightResult{}, fmt.Errorf("creating in-flight cap %q: %w", b.Limit, err)
		}
	}
	start := time.Now()
	rec := &inflightRecorder{from: start.Add(b.Warmup), to: start.Add(b.Warmup + b.Duration)}
	runCtx, cancel := context.WithDeadline(ctx, rec.to)
	defer cancel()
	var wg sync.WaitGroup
	for range b.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inflightCaller(ctx, runCtx, cl, b, rec)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return InflightResult{}, err
	}
	return rec.result(b), nil
}

// inflightCaller reserves, holds and releases until runCtx ends. A
// reserve sent before then is answered, whenever that is (ctx, the
// command's, ends it early), and counted when it is measured.
func inflightCaller(ctx, runCtx context.Context, cl *client.Client, b Config, rec *inflightRecorder) {
	want := []client.Want{{Limit: b.Limit, Permits: b.Permits}}
	for runCtx.Err() == nil {
		sent := time.Now()
		measured := rec.measured(sent)
		r, err := cl.ReserveMany(ctx, want, client.ReserveOptions{MaxWait: b.MaxWait})
		if err != nil {
			if measured {
				rec.fail(fmt.Errorf("reserve: %w", err), true)
			}
			continue
		}
		if !r.Granted {
			if measured {
				rec.answered(false, 0)
			}
			continue
		}
		if err := r.Wait(runCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && measured {
			rec.fail(fmt.Errorf("waiting for a grant: %w", err), false)
		}
		got := time.Now()
		if measured {
			rec.answered(true, got.Sub(sent))
		}
		t := time.NewTimer(b.Hold)
		select {
		case <-t.C:
		case <-runCtx.Done():
			t.Stop()
		}
		end := time.Now()
		rec.held(got, end, b.Permits)
		// The release outlives the run's deadline: a slot left held would
		// only lapse at the TTL.
		relCtx, relCancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := cl.Release(relCtx, r.ID); err != nil && measured {
			rec.fail(fmt.Errorf("release: %w", err), false)
		}
		relCancel()
	}
}

// result summarises the run.
func (r *inflightRecorder) result(b Config) InflightResult {
	slices.Sort(r.grantLat)
	pct := func(p float64) float64 {
		if len(r.grantLat) == 0 {
			return 0
		}
		i := max(0, min(int(p*float64(len(r.grantLat))+0.5)-1, len(r.grantLat)-1))
		return float64(r.grantLat[i]) / 1e6
	}
	offered := float64(b.MaxInFlight) * float64(b.Duration)
	return InflightResult{
		Mode: b.Mode, Servers: strings.Join(b.Servers, ","), Limit: b.Limit, Concurrency: b.Concurrency, MaxInFlight: b.MaxInFlight,
		Permits: b.Permits, TTLMs: float64(b.HoldTTL) / 1e6, HoldMs: float64(b.Hold) / 1e6, MaxWaitMs: float64(b.MaxWait) / 1e6,
		DurationSec: b.Duration.Seconds(),
		Reserves:    r.reserves, Granted: r.granted, Refused: r.refused, Errors: r.errors, HoldErrors: r.holdErrors,
		Occupancy:  r.heldNanos / offered,
		GrantP50Ms: pct(0.5), GrantP99Ms: pct(0.99), FirstError: r.firstErr,
	}
}

// PrintInflight prints an InflightResult as text.
func PrintInflight(w io.Writer, r InflightResult) {
	fmt.Fprintf(w, "mode=inflight servers=%s limit=%s max_in_flight=%d ttl=%.0fms callers=%d permits=%d hold=%.0fms max_wait=%.0fms duration=%.1fs\n",
		r.Servers, r.Limit, r.MaxInFlight, r.TTLMs, r.Concurrency, r.Permits, r.HoldMs, r.MaxWaitMs, r.DurationSec)
	fmt.Fprintf(w, "reserves=%d granted=%d refused=%d errors=%d hold_errors=%d\n", r.Reserves, r.Granted, r.Refused, r.Errors, r.HoldErrors)
	fmt.Fprintf(w, "occupancy=%.1f%% of %d slots  time to a usable grant p50=%.1fms p99=%.1fms\n", 100*r.Occupancy, r.MaxInFlight, r.GrantP50Ms, r.GrantP99Ms)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
}
