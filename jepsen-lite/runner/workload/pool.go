package workload

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
)

// Pool holds the workers' pause switches (the worker pause nemesis:
// workers are goroutines of the runner, so SIGSTOP is emulated by blocking
// them at their pause points: before a reserve, and between a grant's
// ready time and its use, where a real pause would make a client
// oversleep).
type Pool struct {
	n      int
	mu     sync.Mutex
	paused map[int]chan struct{} // closed on resume
}

// NewPool returns the pause switches of n workers, none paused.
func NewPool(n int) *Pool { return &Pool{n: n, paused: map[int]chan struct{}{}} }

// PickHalf returns ceil(n/2) workers chosen by pick, sorted.
func (wp *Pool) PickHalf(pick uint64) []int {
	r := rand.New(rand.NewPCG(pick, 0x776f726b))
	out := r.Perm(wp.n)[:(wp.n+1)/2]
	slices.Sort(out)
	return out
}

// Pause blocks workers ids at their next pause point.
func (wp *Pool) Pause(ids []int) {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for _, id := range ids {
		if _, ok := wp.paused[id]; !ok {
			wp.paused[id] = make(chan struct{})
		}
	}
}

// Resume releases workers ids.
func (wp *Pool) Resume(ids []int) {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for _, id := range ids {
		if ch, ok := wp.paused[id]; ok {
			close(ch)
			delete(wp.paused, id)
		}
	}
}

// ResumeAll releases every worker.
func (wp *Pool) ResumeAll() {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for id, ch := range wp.paused {
		close(ch)
		delete(wp.paused, id)
	}
}

// PausePoint blocks while worker id is paused, or until ctx ends.
func (wp *Pool) PausePoint(ctx context.Context, id int) {
	wp.mu.Lock()
	ch, ok := wp.paused[id]
	wp.mu.Unlock()
	if !ok {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}
