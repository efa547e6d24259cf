package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// maxRequestsPerWorker bounds a worker's loop by count as well as by time:
// far more than any run on loopback can reach (a decision takes microseconds).
const maxRequestsPerWorker = 1 << 28

// decideFunc makes one decision (one round trip to the server) for worker
// (0..concurrency-1), whose seq-th request this is. It reports whether the
// decision was granted; an error means no decision was made.
type decideFunc func(ctx context.Context, worker, seq int) (granted bool, err error)

// runSample is one measured run of one side at one concurrency.
type runSample struct {
	Side        string  `json:"side"`
	Concurrency int     `json:"concurrency"`
	Round       int     `json:"round"`
	Seconds     float64 `json:"seconds"`
	Granted     int64   `json:"granted"`
	Refused     int64   `json:"refused"`
	Errors      int64   `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	// CPU seconds used during the measured window by the side's server
	// processes (redis-server, or the 3 agents together) and by this
	// process (the load generator); null when not measured.
	ServerCPUSec maybeFloat `json:"server_cpu_s"`
	ClientCPUSec maybeFloat `json:"client_cpu_s"`

	latencies []time.Duration // of the decisions (granted or refused) only
}

// closedLoop is a closed-loop run's shape: how many workers, and how long
// it warms up and then measures.
type closedLoop struct {
	concurrency      int
	warmup, duration time.Duration
}

// runClosedLoop runs concurrency workers, each sending its next request as
// soon as the last one returns, for warmup+duration. Only requests that
// complete inside the measured window [start+warmup, start+warmup+duration]
// count; latency is measured per request from send to answer. A request cut
// short by the end of the window is dropped, not counted as an error. When
// meter is not nil, it measures CPU time from the start of the window to the
// end of the run. It fails only when ctx ends first (the whole comparison is
// being stopped).
func runClosedLoop(ctx context.Context, loop closedLoop, decide decideFunc, meter *cpuMeter) (runSample, error) {
	concurrency, warmup, duration := loop.concurrency, loop.warmup, loop.duration
	if concurrency < 1 || warmup < 0 || duration <= 0 {
		return runSample{}, fmt.Errorf("compare-redis: closed loop: concurrency %d, warmup %v, duration %v: want >= 1, >= 0, > 0", concurrency, warmup, duration)
	}
	start := time.Now()
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(duration)
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	meterStarted := make(chan struct{})
	go func() {
		defer close(meterStarted)
		t := time.NewTimer(warmup)
		defer t.Stop()
		select {
		case <-t.C:
			if meter != nil {
				meter.start()
			}
		case <-runCtx.Done():
		}
	}()

	tally := &loopTally{decide: decide, measureFrom: measureFrom, end: end}
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tally.work(runCtx, w)
		}()
	}
	wg.Wait()
	<-meterStarted
	if err := ctx.Err(); err != nil {
		return runSample{}, fmt.Errorf("compare-redis: run stopped: %w", err)
	}
	if time.Now().Before(end) {
		return runSample{}, errors.New("compare-redis: every worker stopped before the end of the measured window")
	}
	s := runSample{
		Concurrency: concurrency,
		Seconds:     duration.Seconds(),
		Granted:     tally.granted.Load(),
		Refused:     tally.refused.Load(),
		Errors:      tally.errs.Load(),
		latencies:   tally.all,
	}
	s.ServerCPUSec, s.ClientCPUSec = maybeFloat(math.NaN()), maybeFloat(math.NaN())
	if meter != nil {
		server, client := meter.stop()
		s.ServerCPUSec, s.ClientCPUSec = maybeFloat(server), maybeFloat(client)
	}
	if p := tally.firstErr.Load(); p != nil {
		s.FirstError = *p
	}
	return s, nil
}

// loopTally is what a closed loop's workers count in the measured window
// [measureFrom, end].
type loopTally struct {
	decide           decideFunc
	measureFrom, end time.Time

	granted, refused, errs atomic.Int64
	firstErr               atomic.Pointer[string]
	mu                     sync.Mutex
	all                    []time.Duration
}

// work is worker w's loop: its next request as soon as the last one
// returns, until ctx ends.
func (t *loopTally) work(ctx context.Context, w int) {
	lats := make([]time.Duration, 0, 1024)
	for seq := 0; seq < maxRequestsPerWorker && ctx.Err() == nil; seq++ {
		sent := time.Now()
		ok, err := t.decide(ctx, w, seq)
		done := time.Now()
		if done.Before(t.measureFrom) || done.After(t.end) || ctx.Err() != nil {
			continue
		}
		if err != nil {
			t.errs.Add(1)
			msg := err.Error()
			t.firstErr.CompareAndSwap(nil, &msg)
			continue
		}
		if ok {
			t.granted.Add(1)
		} else {
			t.refused.Add(1)
		}
		lats = append(lats, done.Sub(sent))
	}
	t.mu.Lock()
	t.all = append(t.all, lats...)
	t.mu.Unlock()
}
