package node

import (
	"sync"

	"github.com/hashicorp/raft"
)

// membership.go: a node that was removed from the cluster knows it.
//
// When a server is removed, the leader replicates the configuration entry
// that removes it to it before it stops replicating to it, so the removed
// node's latest configuration no longer lists it. A node whose latest
// configuration lists other servers but not itself, after it was a member
// (or when it starts from a data directory whose configuration already
// left it out), is removed: it serves nothing — reserves and admin
// requests fail at once with ErrRemoved, and it is not ready — instead of
// waiting for a leader that will never talk to it again. If it is added
// back, it serves again. A node that starts empty and waits to be joined
// is not removed: its configuration is empty until it is added.

// membership tracks whether this node is, was, or no longer is a member.
type membership struct {
	mu sync.Mutex
	// wasMember: a configuration seen by this node listed it.
	wasMember bool
	removed   bool
}

// observe updates the state from a configuration; it reports whether the
// node just became removed (to log it once).
func (m *membership) observe(self raft.ServerID, cfg raft.Configuration) (becameRemoved bool) {
	listed := false
	for _, s := range cfg.Servers {
		if s.ID == self {
			listed = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.removed
	if listed {
		m.wasMember, m.removed = true, false
	} else if m.wasMember && len(cfg.Servers) > 0 {
		m.removed = true
	}
	return m.removed && !was
}

// isRemoved reports whether the node was removed from the cluster.
func (m *membership) isRemoved() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removed
}

// checkMembership reads the latest configuration and updates the state.
func (n *Node) checkMembership() {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	if n.members.observe(raft.ServerID(n.cfg.ID), f.Configuration()) {
		n.log.Error("this node was removed from the cluster: it serves nothing; start it again with an empty data directory to join again", "id", n.cfg.ID)
	}
}

// checkRemoved returns ErrRemoved if this node was removed.
func (n *Node) checkRemoved() error {
	if n.members.isRemoved() {
		return userErrorf(ErrRemoved, "node %q was removed from the cluster and serves nothing: use another node", n.cfg.ID)
	}
	return nil
}
