package node

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// shutdown.go: stopping a node, gracefully (a leader hands over first) or
// as a crash would.

// Shutdown stops the node gracefully: a leader first transfers leadership
// (bounded by a few seconds), then raft stops and the stores close.
func (n *Node) Shutdown() error {
	var err error
	n.stopOnce.Do(func() {
		if n.raft.State() == raft.Leader && n.voterCount() > 1 {
			if terr := n.raft.LeadershipTransfer().Error(); terr != nil {
				n.log.Warn("leadership transfer on shutdown failed", "error", terr)
			}
		}
		n.stop()
		n.batcher.close()
		n.leases.close()
		if serr := n.raft.Shutdown().Error(); serr != nil {
			err = fmt.Errorf("node: raft shutdown: %w", serr)
		}
		n.fwd.close()
		n.mux.close()
		n.raftNet.Close()
		n.wg.Wait()
		if cerr := n.store.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("node: close raft.db: %w", cerr)
		}
	})
	return err
}

// Kill stops the node abruptly, as a crash would, for tests: no leadership
// transfer. Data on disk is whatever raft had fsynced.
func (n *Node) Kill() {
	n.stopOnce.Do(func() {
		n.stop()
		n.mux.close()
		n.raftNet.Close()
		n.batcher.close()
		n.leases.close()
		n.raft.Shutdown().Error()
		n.fwd.close()
		n.wg.Wait()
		n.store.Close()
	})
}
