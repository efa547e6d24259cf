package node

import (
	"context"
	"fmt"
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

// Join adds a voter to the cluster (through the leader). Joining again with
// the same ID and address is a no-op.
func (n *Node) Join(ctx context.Context, id, raftAddr string) error {
	if id == "" || raftAddr == "" {
		return fmt.Errorf("%w: join needs a non-empty id and raft address", ErrInvalid)
	}
	return n.membership(ctx, wire.OpJoin, encodeStrings(id, raftAddr), func() error { return n.joinLocal(id, raftAddr) })
}

// joinLocal adds a voter on the leader. Joining again with the same ID and
// address is a no-op; an ID that is a member at another address, or an
// address that another member has, is refused (raft would silently move
// that member to the new address, and the leader would then fail to reach
// it, as etcd and Consul refuse too).
func (n *Node) joinLocal(id, raftAddr string) error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftErr(err)
	}
	for _, s := range f.Configuration().Servers {
		switch {
		case string(s.ID) == id && string(s.Address) == raftAddr && s.Suffrage == raft.Voter:
			return nil
		case string(s.ID) == id:
			return userErrorf(ErrInvalid, "server %q is already a member of the cluster at %s, not %s: remove it first (DELETE /v1/cluster/servers/%s), or join with its address",
				id, s.Address, raftAddr, id)
		case string(s.Address) == raftAddr:
			return userErrorf(ErrInvalid, "raft address %s is already the address of member %q: give the new server its own address, or remove %q first",
				raftAddr, s.ID, s.ID)
		}
	}
	if err := n.awaitFuture(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout)); err != nil {
		return mapRaftErr(err)
	}
	n.log.Info("server joined", "id", id, "raft_addr", raftAddr)
	return nil
}

// Remove removes a server from the cluster (through the leader).
func (n *Node) Remove(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: remove needs a non-empty id", ErrInvalid)
	}
	return n.membership(ctx, wire.OpRemove, encodeStrings(id), func() error { return n.removeLocal(id) })
}

func (n *Node) removeLocal(id string) error {
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
