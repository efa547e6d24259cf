package node

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCallPoolRunsEveryCallAtOnce: calls run concurrently however many are
// in flight (a call never waits for a free goroutine), a goroutine that
// served a call serves later ones, and idle ones exit when the pool
// stops.
func TestCallPoolRunsEveryCallAtOnce(t *testing.T) {
	stop := make(chan struct{})
	p := newCallPool(stop)
	const n = 50
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	var done sync.WaitGroup
	done.Add(n)
	for range n {
		p.run(func() {
			defer done.Done()
			started.Done()
			<-release // blocks until every call has started: all run at once
		})
	}
	waitDone := make(chan struct{})
	go func() { started.Wait(); close(waitDone) }()
	select {
	case <-waitDone:
	case <-time.After(10 * time.Second):
		t.Fatal("not every call started while the others were running")
	}
	close(release)
	done.Wait()
	// Idle goroutines now take new calls.
	var ran atomic.Int64
	var again sync.WaitGroup
	again.Add(n)
	for range n {
		p.run(func() { ran.Add(1); again.Done() })
	}
	again.Wait()
	if ran.Load() != n {
		t.Fatalf("%d of %d calls ran", ran.Load(), n)
	}
	close(stop)
}

// TestCallPoolRetiresIdleGoroutines: a goroutine that served a call and
// gets no other is retired once idle for the pool's idle period (to twice
// that), and one serving a call when the pool stops exits after it.
func TestCallPoolRetiresIdleGoroutines(t *testing.T) {
	stop := make(chan struct{})
	p := newCallPoolIdle(stop, 20*time.Millisecond)
	var done sync.WaitGroup
	done.Add(3)
	for range 3 {
		p.run(done.Done)
	}
	done.Wait()
	waitWorkers := func(want int64, why string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for p.workers.Load() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d serving goroutines 10s on, want %d (%s)", p.workers.Load(), want, why)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitWorkers(0, "idle ones retired")
	release := make(chan struct{})
	p.run(func() { <-release })
	close(stop)
	close(release)
	waitWorkers(0, "a busy one exits after its call once the pool stops")
}
