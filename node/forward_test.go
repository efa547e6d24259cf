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
