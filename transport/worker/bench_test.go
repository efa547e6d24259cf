package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// The leased-path benchmark: 8 workers in one group spend permits of one
// leased limit, one caller goroutine per worker, until b.N permits are
// spent in all. The register is the in-process fake (register_fake_test.go:
// a real fsm.FSM applying one encoded log entry per Lease, Renew or Return,
// exactly the entries a raft cluster would commit), so that entries can be
// counted without the cost of a cluster sharing the two cores with the
// workers. Workers renew every TTL/2 = 1 s (the defaults), so the register
// sees about 8 entries per second however many permits are spent.
//
// Reported metrics:
//
//	permits/s              aggregate permits handed out per second
//	entries/1000permits    register log entries (lease, renew, return) per 1 000 permits
//	fraction-of-limit      achieved rate / the limit's rate (a saturated limit: >= 0.98 is the goal; over a
//	                       short run it may exceed 1 by at most the (C + O) term of the over-grant bound)
//
// Run: go test -run '^$' -bench Leased -benchtime 3s ./transport/worker/
func BenchmarkLeased(b *testing.B) {
	for _, c := range []struct {
		name string
		rate float64 // permits per second of the limit
		// chunk is the permits one Acquire call takes.
		chunk int64
	}{
		// Far above what the workers can spend one permit at a time.
		{name: "rate=50M/chunk=1", rate: 50_000_000, chunk: 1},
		// Callers taking 100 permits per call: they saturate even 50M/s.
		{name: "rate=50M/chunk=100", rate: 50_000_000, chunk: 100},
		// Limits the workers saturate.
		{name: "rate=200k/chunk=1", rate: 200_000, chunk: 1},
		{name: "rate=5M/chunk=100", rate: 5_000_000, chunk: 100},
	} {
		var f *benchFleet
		b.Run(c.name, func(b *testing.B) {
			if f == nil {
				f = startBenchFleet(b, c.rate, c.chunk)
			}
			entries0, spent0 := f.reg.entries(), f.spent()
			var budget atomic.Int64
			budget.Store(int64(b.N))
			b.ResetTimer()
			start := time.Now()
			if err := f.spend(time.Time{}, &budget, c.chunk); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			spent := f.spent() - spent0
			entries := f.reg.entries() - entries0
			perSecond := float64(spent) / elapsed.Seconds()
			b.ReportMetric(perSecond, "permits/s")
			b.ReportMetric(1000*float64(entries)/float64(spent), "entries/1000permits")
			b.ReportMetric(perSecond/c.rate, "fraction-of-limit")
		})
		if f != nil {
			f.stop()
		}
	}
}

// benchWorkers is the number of workers of the benchmark fleet.
const benchWorkers = 8

// benchTTL is the workers' lease TTL (renewed every benchTTL/2): short,
// so that the shares settle within the warm-up.
const benchTTL = 400 * time.Millisecond

// benchWarmup is how long a new fleet spends before it is measured: the
// first grants are small (the register's free pool fills at the rate from
// the limit's creation) and a held-back worker doubles its demand once per
// renewal period.
const benchWarmup = 3 * time.Second

// benchFleet is the fleet of one benchmark case, kept across the b.N
// rounds of that case.
type benchFleet struct {
	reg *fakeRegister
	ws  []*Worker
}

// startBenchFleet creates the register, the leased limit (C = O = one
// second of permits, the register's defaults) and benchWorkers workers in
// one group, and warms them up.
func startBenchFleet(b *testing.B, rate float64, chunk int64) *benchFleet {
	f := &benchFleet{reg: newFakeRegister(b, time.Now())}
	perSec := int64(rate)
	f.reg.putLeased(testLimit, rate, perSec, perSec)
	var seed string
	for i := 0; i < benchWorkers; i++ {
		mlc := memberlist.DefaultLocalConfig()
		mlc.BindAddr, mlc.BindPort = "127.0.0.1", 0
		var join []string
		if i > 0 {
			join = []string{seed}
		}
		w, err := New(Config{Name: fmt.Sprintf("w%d", i), Group: "g", Limit: testLimit, Register: f.reg,
			Gossip: mlc, Join: join, TTL: benchTTL})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			seed = w.ml.LocalNode().Address()
		}
		f.ws = append(f.ws, w)
	}
	if err := f.spend(time.Now().Add(benchWarmup), nil, chunk); err != nil {
		f.stop()
		b.Fatal(err)
	}
	return f
}

// spend runs one closed-loop caller per worker, each calling
// Acquire(chunk), until the deadline or, if budget is not nil, until the
// budget of permits is used up (callers claim chunks from it, so every
// worker runs until the end).
func (f *benchFleet) spend(deadline time.Time, budget *atomic.Int64, chunk int64) error {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, len(f.ws))
	for _, w := range f.ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if budget != nil {
					if budget.Add(-chunk) <= -chunk {
						return
					}
				} else if !time.Now().Before(deadline) {
					return
				}
				if err := w.Acquire(ctx, chunk); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// spent returns the permits the fleet has handed out.
func (f *benchFleet) spent() int64 {
	var n int64
	for _, w := range f.ws {
		n += w.Stats().SpentPermits
	}
	return n
}

// stop stops the workers (returning their leases).
func (f *benchFleet) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, w := range f.ws {
		_ = w.Stop(ctx)
	}
}

// entries returns the number of log entries the fake register applied.
func (r *fakeRegister) entries() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.index
}
