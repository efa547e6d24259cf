package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// Reserve decides one reserve on the leader: locally if this node leads,
// else forwarded. It is validated here first (an invalid request never
// reaches the log): the name and fields, the limit's existence and the
// permit count against the limit's MaxPermits as this node knows them (the
// leader's FSM decides again). A reserve with a RequestID is retried on
// ambiguous failures until ctx ends; the register deduplicates it.
func (n *Node) Reserve(ctx context.Context, r fsm.Reserve) (fsm.ReserveResult, error) {
	if err := r.Validate(); err != nil {
		return fsm.ReserveResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := n.checkRemoved(); err != nil {
		return fsm.ReserveResult{}, err
	}
	if err := n.checkLocal(r); err != nil {
		return fsm.ReserveResult{}, err
	}
	// Without a reachable leader the reserve fails within its own max
	// wait plus LeaderWait (a caller that accepts no wait gets its 503
	// within LeaderWait), not after the request's whole timeout. A reserve
	// queued on the leader still waits for its outcome past this bound.
	leaderBy := time.Now().Add(time.Duration(r.MaxWaitNanos) + n.cfg.LeaderWait)
	// Retries stop well inside the register's dedup retention (and a
	// session's idle lifetime), so that a retry is always recognised as
	// one.
	idempotent := r.RequestID != "" || r.Session.ID != 0
	giveUp := time.Now().Add(maxRetryFor)
	for {
		res, err := n.reserveOnce(ctx, r, leaderBy)
		if err == nil || !idempotent || !errors.Is(err, ErrNoLeader) || ctx.Err() != nil || time.Now().After(giveUp) {
			return res, err
		}
		if !n.pause(ctx, min(20*time.Millisecond, time.Until(leaderBy))) {
			return res, err
		}
		if time.Now().After(leaderBy) {
			return res, err
		}
	}
}

// maxRetryFor bounds the internal retries of one reserve with a request ID.
const maxRetryFor = 30 * time.Second

// checkLocal rejects reserves this node can already tell are invalid: an
// unknown limit (on the leader), a leased limit (its permits are handed
// out by lease), more permits than the limit can ever grant. A follower
// that does not know the limit yet lets the leader decide.
func (n *Node) checkLocal(r fsm.Reserve) error {
	info, ok := n.fsm.Limit(r.Limit)
	if !ok {
		if n.timeline.isActive() {
			return n.limitNotFound(r.Limit)
		}
		return nil
	}
	if info.Leased {
		// Its permits are handed out by lease: a reserve would spend them
		// a second time.
		return fmt.Errorf("%w: limit %q is leased: reserve through a worker", ErrInvalid, r.Limit)
	}
	if max := info.Config.MaxPermits(); r.Permits > max {
		return fmt.Errorf("%w: %d permits: limit %q can grant at most %d in one request", ErrInvalid, r.Permits, r.Limit, max)
	}
	return nil
}

func (n *Node) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-n.stopCh:
		return false
	}
}

// reserveOnce decides r once: on this node if it leads, else through the
// leader. Either way the answer's durations count from the moment this
// node returns it (answer.go).
//
// On the leader it queues r at once (the fast path: no context of its own).
// Otherwise it waits for a leader, or for its answer through one, until
// leaderBy at the latest.
func (n *Node) reserveOnce(ctx context.Context, r fsm.Reserve, leaderBy time.Time) (fsm.ReserveResult, error) {
	if n.timeline.isActive() {
		return n.reserveLocal(ctx, r)
	}
	ctx, cancel := context.WithDeadline(ctx, leaderBy)
	defer cancel()
	if n.waitLeading(ctx) {
		return n.reserveLocal(ctx, r)
	}
	addr, _, err := n.leaderAddr(ctx)
	if err != nil {
		return fsm.ReserveResult{}, err
	}
	if addr == string(n.trans.LocalAddr()) {
		// Raft names us leader but the timeline is not active yet.
		if n.waitLeading(ctx) {
			return n.reserveLocal(ctx, r)
		}
		return fsm.ReserveResult{}, fmt.Errorf("%w: leadership not established", ErrNoLeader)
	}
	resp, received, err := n.fwd.forwardTimed(ctx, addr, wire.OpReserve, wire.EncodeReserve(toWireReserve(r)))
	if err != nil {
		return fsm.ReserveResult{}, err
	}
	res, err := wire.DecodeReserveResult(resp)
	if err != nil {
		return fsm.ReserveResult{}, fmt.Errorf("node: leader's answer: %w", err)
	}
	return n.resultToErr(r, shiftResult(fromWireResult(res), time.Since(received)))
}

// reserveLocal stamps r's arrival, hands it to the batcher and waits for
// the register's decision, expressed relative to the moment it returns.
func (n *Node) reserveLocal(ctx context.Context, r fsm.Reserve) (fsm.ReserveResult, error) {
	st, at, ok := n.stampForApply()
	if !ok {
		return fsm.ReserveResult{}, fmt.Errorf("%w: this node is not the leader", ErrNoLeader)
	}
	p := pendingPool.Get().(*pendingReserve)
	p.r, p.arrived = r, arrival{st: st, at: at}
	if err := n.batcher.enqueue(ctx, p); err != nil {
		pendingPool.Put(p)
		return fsm.ReserveResult{}, err
	}
	// Once queued, the reserve may be committed: wait for its outcome even
	// past ctx, so that the answer is never lost while the grant is real.
	// The batcher always answers: with the decision, or with an unknown
	// outcome when leadership is lost or the node stops (awaitFuture).
	out := <-p.done
	arrived := p.arrived
	pendingPool.Put(p)
	if out.err != nil {
		return fsm.ReserveResult{}, out.err
	}
	if f := n.testDecided; f != nil {
		f(out.res)
	}
	return n.resultToErr(r, shiftResult(out.res, heldSince(out.res, arrived, out.appliedAt)))
}

// resultToErr maps domain outcomes that the API reports as errors. A
// grant whose (first) permit expired before the answer could be sent — a
// duplicate replayed too late, or a fresh strict grant held past its
// expiry — is reported as a refusal: the permit must not be used, and a
// new request (with a new ID) may be granted. A refusal, Busy and
// SessionExpired stay results: they carry their retry time or detail.
func (n *Node) resultToErr(r fsm.Reserve, res fsm.ReserveResult) (fsm.ReserveResult, error) {
	if res.Status == fsm.Granted && res.ExpiresInNanos < 0 {
		detail := "the permit granted to this request expired before its answer could be sent; reserve again"
		if res.Duplicate {
			detail = "the permit granted to this request_id expired before the retry arrived; retry with a new request_id"
		}
		return fsm.ReserveResult{Status: fsm.Refused, RetryAfterNanos: 1, Duplicate: res.Duplicate, Detail: detail}, nil
	}
	switch res.Status {
	case fsm.UnknownLimit:
		return res, n.limitNotFound(r.Limit)
	case fsm.Invalid:
		return res, fmt.Errorf("%w: %s", ErrInvalid, res.Detail)
	}
	return res, nil
}

// OpenSession opens a client session (see fsm.SessionResult): the session
// ID to put in reserves' fsm.SessionRef, and how long the session lives
// without a reserve. It is not retried: a session opened by an attempt
// whose answer was lost expires unused.
func (n *Node) OpenSession(ctx context.Context) (fsm.SessionResult, error) {
	resp, err := n.leaderDo(ctx, wire.OpOpenSession, nil, n.openSessionLocal)
	if err != nil {
		return fsm.SessionResult{}, err
	}
	res, err := wire.DecodeSessionResult(resp)
	if err != nil {
		return fsm.SessionResult{}, fmt.Errorf("node: leader's answer: %w", err)
	}
	return fromWireSession(res), nil
}

func (n *Node) openSessionLocal(ctx context.Context) ([]byte, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendOpenSession(nil, st), nil })
	if err != nil {
		return nil, err
	}
	res, ok := v.(fsm.SessionResult)
	if !ok {
		return nil, fmt.Errorf("%w: internal error: open session answered %T (outcome unknown)", ErrNoLeader, v)
	}
	return wire.EncodeSessionResult(toWireSession(res)), nil
}

// applyAdmin stamps and applies one admin command on the leader.
func (n *Node) applyAdmin(ctx context.Context, encode func(st fsm.Stamp) ([]byte, error)) (any, error) {
	if !n.waitLeading(ctx) {
		return nil, fmt.Errorf("%w: this node is not the leader", ErrNoLeader)
	}
	st, _, ok := n.stampForApply()
	if !ok {
		return nil, fmt.Errorf("%w: this node is not the leader", ErrNoLeader)
	}
	buf, err := encode(st)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	f := n.raft.Apply(buf, n.cfg.ApplyTimeout)
	if err := n.awaitFuture(f); err != nil {
		return nil, mapRaftErr(err)
	}
	return f.Response(), nil
}

// leaderDo runs local on the leader or forwards op to it. A node that is
// not the leader waits for one at most Config.LeaderWait.
func (n *Node) leaderDo(ctx context.Context, op byte, payload []byte, local func(context.Context) ([]byte, error)) ([]byte, error) {
	if err := n.checkRemoved(); err != nil {
		return nil, err
	}
	if n.timeline.isActive() {
		return local(ctx)
	}
	// A leader is awaited for at most LeaderWait: without one the request
	// fails (503, retry later) instead of hanging for its whole timeout.
	wait, cancel := context.WithTimeout(ctx, n.cfg.LeaderWait)
	defer cancel()
	if n.waitLeading(wait) {
		return local(ctx)
	}
	addr, _, err := n.leaderAddr(wait)
	if err != nil {
		return nil, err
	}
	if addr == string(n.trans.LocalAddr()) {
		if n.waitLeading(wait) {
			return local(ctx)
		}
		return nil, fmt.Errorf("%w: leadership not established", ErrNoLeader)
	}
	return n.fwd.forward(ctx, addr, op, payload)
}

// PutLimit creates or reconfigures a limit.
func (n *Node) PutLimit(ctx context.Context, name string, cfg bucket.Config) (fsm.PutResult, error) {
	if err := fsm.ValidateName(name); err != nil {
		return fsm.PutResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	payload, err := encodePut(name, cfg)
	if err != nil {
		return fsm.PutResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	resp, err := n.leaderDo(ctx, wire.OpPut, payload, func(ctx context.Context) ([]byte, error) {
		return n.putLocal(ctx, name, cfg)
	})
	if err != nil {
		return fsm.PutResult{}, err
	}
	r := wire.Dec{B: resp}
	out := fsm.PutResult{Version: r.Uvar(), Created: r.Bool()}
	return out, r.Done()
}

func (n *Node) putLocal(ctx context.Context, name string, cfg bucket.Config) ([]byte, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) {
		return fsm.AppendPut(nil, st, fsm.PutLimit{Name: name, Config: cfg})
	})
	if err != nil {
		return nil, err
	}
	res, ok := v.(fsm.PutResult)
	if !ok {
		return nil, fmt.Errorf("node: internal error: put answered %T", v)
	}
	if res.Detail != "" {
		// The register kept the old configuration (e.g. the new one
		// cannot carry the current state over).
		return nil, fmt.Errorf("%w: %s", ErrInvalid, res.Detail)
	}
	var w wire.Enc
	w.Uvar(res.Version)
	w.Bool(res.Created)
	return w.B, nil
}

// DeleteLimit removes a limit. A leased limit whose leases still hold
// permits is kept unless force (ErrConflict, with the register's reason).
func (n *Node) DeleteLimit(ctx context.Context, name string, force bool) (fsm.DeleteResult, error) {
	if err := fsm.ValidateName(name); err != nil {
		return fsm.DeleteResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	flag := ""
	if force {
		flag = "force"
	}
	resp, err := n.leaderDo(ctx, wire.OpDelete, encodeStrings(name, flag), func(ctx context.Context) ([]byte, error) {
		return n.deleteLocal(ctx, name, force)
	})
	if err != nil {
		return fsm.DeleteResult{}, err
	}
	if len(resp) != 1 {
		return fsm.DeleteResult{}, wire.ErrMalformed
	}
	if resp[0] == 0 {
		return fsm.DeleteResult{}, n.limitNotFound(name)
	}
	return fsm.DeleteResult{Existed: true}, nil
}

// deleteLocal applies a delete on the leader: 1 if the limit was removed,
// 0 if it did not exist; ErrConflict if the register kept it.
func (n *Node) deleteLocal(ctx context.Context, name string, force bool) ([]byte, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) {
		return fsm.AppendDelete(nil, st, fsm.DeleteLimit{Name: name, Force: force})
	})
	if err != nil {
		return nil, err
	}
	res, ok := v.(fsm.DeleteResult)
	if !ok {
		return nil, fmt.Errorf("node: internal error: delete answered %T", v)
	}
	switch {
	case res.Detail != "":
		return nil, userErrorf(ErrConflict, "%s", res.Detail)
	case res.Existed:
		return []byte{1}, nil
	}
	return []byte{0}, nil
}

// Limit returns one limit, read linearizably: the leader confirms its
// leadership and applies everything committed before answering, so a
// restarted or partitioned node never answers from stale state.
func (n *Node) Limit(ctx context.Context, name string) (fsm.LimitInfo, error) {
	if err := fsm.ValidateName(name); err != nil {
		return fsm.LimitInfo{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	ls, err := n.read(ctx, name)
	if err != nil {
		return fsm.LimitInfo{}, err
	}
	if len(ls) != 1 {
		return fsm.LimitInfo{}, n.limitNotFound(name)
	}
	return ls[0], nil
}

// Limits returns every limit, sorted by name, read linearizably.
func (n *Node) Limits(ctx context.Context) ([]fsm.LimitInfo, error) {
	return n.read(ctx, "")
}

func (n *Node) read(ctx context.Context, name string) ([]fsm.LimitInfo, error) {
	resp, err := n.leaderDo(ctx, wire.OpRead, encodeStrings(name), func(ctx context.Context) ([]byte, error) {
		return n.readLocal(ctx, name)
	})
	if err != nil {
		return nil, err
	}
	return decodeLimits(resp)
}

func (n *Node) readLocal(ctx context.Context, name string) ([]byte, error) {
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := n.awaitFuture(n.raft.Barrier(timeout)); err != nil {
		return nil, mapRaftErr(err)
	}
	var ls []fsm.LimitInfo
	if name == "" {
		ls = n.fsm.Limits()
	} else if l, ok := n.fsm.Limit(name); ok {
		ls = []fsm.LimitInfo{l}
	}
	return encodeLimits(ls)
}

// Join adds a voter to the cluster (through the leader). Joining again with
// the same ID and address is a no-op.
func (n *Node) Join(ctx context.Context, id, raftAddr string) error {
	if id == "" || raftAddr == "" {
		return fmt.Errorf("%w: join needs a non-empty id and raft address", ErrInvalid)
	}
	_, err := n.leaderDo(ctx, wire.OpJoin, encodeStrings(id, raftAddr), func(ctx context.Context) ([]byte, error) {
		return nil, n.joinLocal(id, raftAddr)
	})
	return err
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
	_, err := n.leaderDo(ctx, wire.OpRemove, encodeStrings(id), func(ctx context.Context) ([]byte, error) {
		return nil, n.removeLocal(id)
	})
	return err
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
	_, err := n.leaderDo(ctx, wire.OpTransfer, encodeStrings(to), func(ctx context.Context) ([]byte, error) {
		return nil, n.transferLocal(to)
	})
	return err
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

// handleForwarded serves one operation forwarded by a follower. It never
// forwards again: if this node is not the leader it says so.
func (n *Node) handleForwarded(ctx context.Context, op byte, payload []byte) ([]byte, error) {
	if !n.waitLeading(ctx) {
		return nil, fmt.Errorf("%w: %s is not the leader", ErrNoLeader, n.cfg.ID)
	}
	switch op {
	case wire.OpReserve:
		wr, err := wire.DecodeReserve(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		r := ReserveFromWire(wr)
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if err := n.checkLocal(r); err != nil {
			return nil, err
		}
		res, err := n.reserveLocal(ctx, r)
		if res.Status == 0 {
			// Not decided by the register: report the error itself.
			if err == nil {
				err = fmt.Errorf("node: internal error: reserve without a status")
			}
			return nil, err
		}
		// Domain outcomes travel as results; the follower maps them again.
		return wire.EncodeReserveResult(toWireResult(res)), nil
	case wire.OpPut:
		name, cfg, err := decodePut(payload)
		if err != nil {
			return nil, err
		}
		if err := fsm.ValidateName(name); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return n.putLocal(ctx, name, cfg)
	case wire.OpDelete:
		ss, err := decodeStrings(payload, 2)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return n.deleteLocal(ctx, ss[0], ss[1] == "force")
	case wire.OpRead:
		ss, err := decodeStrings(payload, 1)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return n.readLocal(ctx, ss[0])
	case wire.OpJoin:
		ss, err := decodeStrings(payload, 2)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return nil, n.joinLocal(ss[0], ss[1])
	case wire.OpRemove:
		ss, err := decodeStrings(payload, 1)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return nil, n.removeLocal(ss[0])
	case wire.OpLeasePolicy, wire.OpLease, wire.OpRenew, wire.OpReturn, wire.OpLeaseView:
		return n.handleForwardedLease(ctx, op, payload)
	case wire.OpOpenSession:
		if len(payload) != 0 {
			return nil, fmt.Errorf("%w: open session takes no payload (%d bytes)", ErrInvalid, len(payload))
		}
		return n.openSessionLocal(ctx)
	case wire.OpTransfer:
		ss, err := decodeStrings(payload, 1)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return nil, n.transferLocal(ss[0])
	}
	return nil, fmt.Errorf("%w: unknown forwarded operation %d", ErrInvalid, op)
}
