package node

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// stuckFuture is a raft future that is never answered, as raft leaves a
// future still queued for the FSM when it shuts down.
type stuckFuture struct{ answer chan error }

func (f stuckFuture) Error() error { return <-f.answer }

func TestAwaitFutureGivesUpWhenTheNodeStops(t *testing.T) {
	n := &Node{stopCh: make(chan struct{})}
	f := stuckFuture{answer: make(chan error)}
	done := make(chan error, 1)
	go func() { done <- n.awaitFuture(f) }()
	select {
	case err := <-done:
		t.Fatalf("awaitFuture returned %v before the future was answered or the node stopped", err)
	default:
	}
	close(n.stopCh)
	select {
	case err := <-done:
		if !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatalf("err = %v, want raft.ErrRaftShutdown", err)
		}
		if !errors.Is(mapRaftErr(err), ErrNoLeader) {
			t.Fatalf("mapRaftErr(%v) does not report an unknown outcome (ErrNoLeader)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("awaitFuture did not return after the node stopped")
	}
}

func TestAwaitFutureReturnsTheAnswer(t *testing.T) {
	n := &Node{stopCh: make(chan struct{})}
	f := stuckFuture{answer: make(chan error, 1)}
	want := errors.New("boom")
	f.answer <- want
	if err := n.awaitFuture(f); err != want {
		t.Fatalf("err = %v, want %v", err, want)
	}
}
