package node

import (
	"context"
	"time"

	"github.com/permitd/permitd/fsm"
)

// waker.go: the leader writes a no-op at each instant a waiting reserve is
// due (fsm/waiters.go): when a hold lapses on a cap a reserve waits on, or
// a reserve's deadline comes. The entry decides what fell due before its
// time, each at its own instant, and its decisions reach the goroutines
// that hold the answers (waiters.go). Without it, a reserve granted by a
// lapse would be answered only when the next command came, and one past
// its deadline would keep its client waiting.
//
// A due instant that an ordinary entry reaches first costs nothing: the
// waker looks at the queue again after every applied entry (pokeWaker) and
// writes a no-op only if the next due instant is still ahead of the last
// applied time when its timeline reaches it.

// wakerRetry is how long the waker waits after a failed no-op.
const wakerRetry = 10 * time.Millisecond

// pokeWaker tells the waker that the queue or the applied time changed.
func (n *Node) pokeWaker() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// runWaker writes the no-ops while this node leads, until it stops.
func (n *Node) runWaker() {
	for {
		select {
		case <-n.stopCh:
			return
		case <-n.timeline.readyCh():
		}
		if done, ok := n.timeline.activeDone(); ok {
			n.wakeWhileLeading(done)
		}
	}
}

// wakeWhileLeading is runWaker for one period of leadership, which ends
// when done is closed.
func (n *Node) wakeWhileLeading(done <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var wait <-chan time.Time
		if next, ok := n.fsm.NextWaiterEventNanos(); ok {
			now, _, _, active := n.timeline.stamp()
			if !active {
				return
			}
			if now >= next {
				if !n.writeNoop(done) {
					return
				}
				continue
			}
			timer.Reset(time.Duration(next - now))
			wait = timer.C
		}
		select {
		case <-n.stopCh:
			return
		case <-done:
			return
		case <-n.wake:
		case <-wait:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// writeNoop applies a no-op at the timeline's time; after a failure it
// waits wakerRetry. It reports false once leadership or the node ended.
func (n *Node) writeNoop(done <-chan struct{}) bool {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	if _, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendNoop(nil, st), nil }); err != nil {
		n.log.Debug("waker: writing a no-op for the waiting reserves failed", "error", err)
		t := time.NewTimer(wakerRetry)
		defer t.Stop()
		select {
		case <-n.stopCh:
			return false
		case <-done:
			return false
		case <-t.C:
		}
	}
	return true
}
