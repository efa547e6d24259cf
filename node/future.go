package node

import "github.com/hashicorp/raft"

// future.go: waiting for raft futures.
//
// hashicorp/raft answers an Apply or Barrier future when its entry has been
// applied, or fails it when leadership is lost. A future whose entry was
// committed but still queued for the FSM when raft shut down is never
// answered. Every wait on a raft future goes through awaitFuture, which
// gives up when this node stops: the outcome is then unknown (the entry
// may have been applied), as for any lost leadership.

// awaitFuture waits for f, or for the node to stop (then it returns
// raft.ErrRaftShutdown, which mapRaftErr reports as an unknown outcome).
func (n *Node) awaitFuture(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.stopCh:
		select {
		case err := <-done: // answered as the node stopped
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}
