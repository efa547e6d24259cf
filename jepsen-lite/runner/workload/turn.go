package workload

import (
	"context"
	"sync"
	"time"
)

// turn is the strict workload's multi-permit turn. A strict grant of n
// permits needs ceil(wait/I) − 1 + n <= max_reserved: with many workers
// each holding a slot reserved ahead, the register is nearly always too
// full for n > 1, and such reserves are almost always refused. A worker
// that drew n > 1 therefore takes the turn (one worker at a time): while
// it holds it, the other workers send no new reserve (they finish using
// the permits they hold, so the register's queue drains), and it retries
// its refused reserve when the queue should have drained enough (see
// fitDelay). It releases the turn when granted, on any other outcome, or
// at the latest after the turn's bound, so the others never wait longer.
// After a turn ends, none is given for a cooldown as long as a turn's
// bound, so that single-permit reserves keep at least half the time; a
// worker that draws n > 1 then sends its reserve as any other (most such
// reserves are then refused, and it draws again).
type turn struct {
	mu    sync.Mutex
	owner int           // -1: no turn
	done  chan struct{} // closed when the current turn ends
	ended time.Time     // when the last turn ended
}

func newTurn() *turn { return &turn{owner: -1} }

// take makes worker id the owner for at most bound and returns the
// release function (idempotent) and a channel closed when the turn ends
// (released or bound passed), or nils when another worker holds the turn
// or the last one ended less than bound ago.
func (t *turn) take(id int, bound time.Duration) (func(), <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owner >= 0 || time.Since(t.ended) < bound {
		return nil, nil
	}
	t.owner = id
	done := make(chan struct{})
	t.done = done
	var once sync.Once
	release := func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.owner, t.ended = -1, time.Now()
			close(done)
		})
	}
	time.AfterFunc(bound, release)
	return release, done
}

// wait blocks while a worker other than id holds the turn, or until ctx
// ends.
func (t *turn) wait(ctx context.Context, id int) {
	for ctx.Err() == nil {
		t.mu.Lock()
		owner, done := t.owner, t.done
		t.mu.Unlock()
		if owner < 0 || owner == id {
			return
		}
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
}

// fitDelay is how long to wait after a strict refusal of n permits with
// retry_after (the wait to the register's next free slot) before the same
// reserve fits: it fits once that wait is at most (max_reserved − n + 1)
// intervals. At least 2 ms.
func fitDelay(retryAfter, interval time.Duration, maxReserved, n int64) time.Duration {
	fits := time.Duration(maxReserved-n+1) * interval
	return max(retryAfter-fits+2*time.Millisecond, 2*time.Millisecond)
}
