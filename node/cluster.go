package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/transport/wire"
)

// cluster.go: membership and leadership changes, through the leader.

// membership runs a membership change on the leader: local here, or op
// with payload forwarded.
func (n *Node) membership(ctx context.Context, op byte, payload []byte, local func() error) error {
	_, err := leaderDo(n, ctx, time.Time{}, op, bytesOf(payload),
		func(context.Context) (struct{}, error) { return struct{}{}, local() },
		func([]byte, time.Time) (struct{}, error) { return struct{}{}, nil })
	return err
}

// Join adds a server to the cluster (through the leader) as a non-voter:
// it receives the log but does not vote and counts towards no quorum
// until the leader has seen it caught up over the cluster's network and
// promoted it (promote.go). voter reports whether it votes already (it
// had joined and was promoted). Joining again with the same ID and
// address is a no-op.
func (n *Node) Join(ctx context.Context, id, raftAddr string) (voter bool, err error) {
	if id == "" || raftAddr == "" {
		return false, fmt.Errorf("%w: join needs a non-empty id and raft address", ErrInvalid)
	}
	return leaderDo(n, ctx, time.Time{}, wire.OpJoin, bytesOf(encodeStrings(id, raftAddr)),
		func(context.Context) (bool, error) { return n.joinLocal(id, raftAddr) },
		func(resp []byte, _ time.Time) (bool, error) { return decodeJoined(resp) })
}

// encodeJoined and decodeJoined carry a join's answer between nodes: one
// byte, 1 if the server votes. A leader of a version that added joins as
// voters answers nothing: the server votes.
func encodeJoined(voter bool) []byte {
	if voter {
		return []byte{1}
	}
	return []byte{0}
}

func decodeJoined(b []byte) (bool, error) {
	switch {
	case len(b) == 0:
		return true, nil
	case len(b) == 1 && b[0] <= 1:
		return b[0] == 1, nil
	}
	return false, fmt.Errorf("node: join: the leader answered %d bytes, want a byte 0 or 1", len(b))
}

// joinLocal adds a non-voter on the leader. Joining again with the same ID
// and address is a no-op; an ID that is a member at another address, or
// an address that another member has, is refused (raft would silently
// move that member to the new address, and the leader would then fail to
// reach it, as etcd and Consul refuse too); so is a join while
// MaxPendingJoins non-voters are pending (ErrConflict).
func (n *Node) joinLocal(id, raftAddr string) (voter bool, err error) {
	n.changeMu.Lock()
	defer n.changeMu.Unlock()
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, mapRaftErr(err)
	}
	var pending []string
	for _, s := range f.Configuration().Servers {
		switch {
		case string(s.ID) == id && string(s.Address) == raftAddr:
			return s.Suffrage == raft.Voter, nil
		case string(s.ID) == id:
			return false, userErrorf(ErrInvalid, "server %q is already a member of the cluster at %s, not %s: remove it first (DELETE /v1/cluster/servers/%s), or join with its address",
				id, s.Address, raftAddr, id)
		case string(s.Address) == raftAddr:
			return false, userErrorf(ErrInvalid, "raft address %s is already the address of member %q: give the new server its own address, or remove %q first",
				raftAddr, s.ID, s.ID)
		case s.Suffrage == raft.Nonvoter:
			pending = append(pending, string(s.ID))
		}
	}
	if len(pending) >= n.cfg.MaxPendingJoins {
		return false, userErrorf(ErrConflict, "%d joined servers are not voters yet (%s), the most this cluster allows (--max-pending-joins %d): wait until the leader has promoted one (it does once the server has caught up), or remove one that never will (DELETE /v1/cluster/servers/ID)",
			len(pending), strings.Join(pending, ", "), n.cfg.MaxPendingJoins)
	}
	if err := n.awaitFuture(n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout)); err != nil {
		return false, mapRaftErr(err)
	}
	n.log.Info("server joined as a non-voter; the leader promotes it once it has caught up", "id", id, "raft_addr", raftAddr)
	return false, nil
}

// Remove removes a server from the cluster (through the leader).
func (n *Node) Remove(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: remove needs a non-empty id", ErrInvalid)
	}
	return n.membership(ctx, wire.OpRemove, encodeStrings(id), func() error { return n.removeLocal(id) })
}

func (n *Node) removeLocal(id string) error {
	n.changeMu.Lock()
	defer n.changeMu.Unlock()
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftErr(err)
	}
	found := false
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%w: server %q is not a member", ErrNotFound, id)
	}
	if err := n.awaitFuture(n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout)); err != nil {
		return mapRaftErr(err)
	}
	n.log.Info("server removed", "id", id)
	return nil
}

// TransferLeadership hands the leadership to the voter to (any voter if to
// is empty), through the leader, and waits until raft reports the transfer
// done. ErrNotFound if to is not a voter, ErrInvalid if to is the leader
// itself or the cluster has no other voter.
func (n *Node) TransferLeadership(ctx context.Context, to string) error {
	return n.membership(ctx, wire.OpTransfer, encodeStrings(to), func() error { return n.transferLocal(to) })
}

func (n *Node) transferLocal(to string) error {
	if to == "" {
		if n.voterCount() < 2 {
			return fmt.Errorf("%w: leadership transfer: the cluster has no other voter", ErrInvalid)
		}
		if err := n.awaitFuture(n.raft.LeadershipTransfer()); err != nil {
			return mapRaftErr(err)
		}
		n.log.Info("leadership transferred", "from", n.cfg.ID)
		return nil
	}
	if to == n.cfg.ID {
		return fmt.Errorf("%w: leadership transfer to %q: it already leads", ErrInvalid, to)
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftErr(err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == to && s.Suffrage == raft.Voter {
			if err := n.awaitFuture(n.raft.LeadershipTransferToServer(s.ID, s.Address)); err != nil {
				return mapRaftErr(err)
			}
			n.log.Info("leadership transferred", "from", n.cfg.ID, "to", to)
			return nil
		}
	}
	return fmt.Errorf("%w: leadership transfer to %q: not a voter of the cluster", ErrNotFound, to)
}

// Snapshot makes this replica take a raft snapshot of its state now (and
// compact its log), as it does by itself every SnapshotInterval or
// SnapshotThreshold entries. raft answers an error when nothing was
// applied since the last snapshot.
func (n *Node) Snapshot() error {
	if err := n.awaitFuture(n.raft.Snapshot()); err != nil {
		return fmt.Errorf("node: snapshot: %w", err)
	}
	return nil
}

// A node that was removed from the cluster knows it.
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
	// removedNow mirrors removed (written under mu), for isRemoved: every
	// request asks it, some twice.
	removedNow atomic.Bool
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
	m.removedNow.Store(m.removed)
	return m.removed && !was
}

// isRemoved reports whether the node was removed from the cluster.
func (m *membership) isRemoved() bool {
	return m.removedNow.Load()
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
