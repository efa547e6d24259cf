package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// command.go: one path for every command of the register, from any node.
//
// A command is an fsm log entry. The node that serves a request validates
// it, builds its entry stamped 0 and runs it on the leader: itself if it
// leads, else the leader, to which it forwards the entry's bytes as they
// are (OpCommand). The leader decodes a forwarded entry with fsm.Decode
// (which bounds and validates it: it came from the network), checks it
// against its own state (the limit exists, is leased, ...), stamps it with
// the cluster time and applies it through raft (commandLocal). The
// register's result travels back in the one result codec (resultcodec.go).
// Reserves and lease commands take the same path, except that the leader
// queues them for its batchers (batcher.go) instead of applying an entry
// each.
//
// Views (limits, a lease pool) and membership changes are not commands of
// the register; they have operations of their own (OpRead, OpLeaseView,
// OpJoin, OpRemove, OpTransfer) whose payloads are strings.
//
// A node that is not the leader waits for one at most Config.LeaderWait
// (then the request fails with ErrNoLeader: 503, retry later), and a
// command that carries an idempotency key (a request ID, a session
// reference) is retried on such ambiguous failures (retryAmbiguous): the
// register answers a retry with the first decision.

// leaderDo runs local on the leader, or forwards op with the payload
// returns (built only then) to it and reads the leader's answer with answer
// (which gets the moment the answer was read off the connection). A node that is not the leader waits for one
// at most LeaderWait; if by is not zero, the whole non-leader path (finding
// the leader, and its answer) is bounded by it too.
func leaderDo[T any](n *Node, ctx context.Context, by time.Time, op byte, payload func() ([]byte, error),
	local func(context.Context) (T, error), answer func(resp []byte, received time.Time) (T, error)) (T, error) {
	return leaderDoVia(n, ctx, by, op, payload, nil, local, answer)
}

// viaLeader forwards a call to the leader at addr some other way than one
// call per request (forwardbatch.go), and returns the leader's answer as
// forwarder.forwardTimed does.
type viaLeader func(ctx context.Context, addr string) ([]byte, time.Time, error)

// leaderDoVia is leaderDo, with the forwarding done by via when it is not
// nil (op and payload are then unused).
func leaderDoVia[T any](n *Node, ctx context.Context, by time.Time, op byte, payload func() ([]byte, error), via viaLeader,
	local func(context.Context) (T, error), answer func(resp []byte, received time.Time) (T, error)) (T, error) {
	var zero T
	if err := n.checkRemoved(); err != nil {
		return zero, err
	}
	if n.timeline.isActive() {
		return local(ctx) // the leader's fast path: no context of its own
	}
	if !by.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, by)
		defer cancel()
	}
	wait, cancel := context.WithTimeout(ctx, n.cfg.LeaderWait)
	defer cancel()
	if n.waitLeading(wait) {
		return local(ctx)
	}
	addr, _, err := n.leaderAddr(wait)
	if err != nil {
		return zero, err
	}
	if addr == string(n.raftNet.LocalAddr()) {
		// Raft names this node leader but its timeline is not active yet.
		if n.waitLeading(wait) {
			return local(ctx)
		}
		return zero, fmt.Errorf("%w: leadership not established", ErrNoLeader)
	}
	var resp []byte
	var received time.Time
	if via != nil {
		resp, received, err = via(ctx, addr)
	} else {
		var p []byte
		if p, err = payload(); err != nil {
			return zero, err
		}
		resp, received, err = n.fwd.forwardTimed(ctx, addr, op, p)
	}
	if err != nil {
		return zero, err
	}
	return answer(resp, received)
}

// command runs the command entry (stamped 0) on the leader and returns the
// register's result: commandLocal here, or through the leader.
func (n *Node) command(ctx context.Context, entry []byte) (any, error) {
	return leaderDo(n, ctx, time.Time{}, wire.OpCommand, bytesOf(entry), n.entryLocal(entry), commandAnswer)
}

// entryLocal runs a command entry (stamped 0) on this node, the leader.
func (n *Node) entryLocal(entry []byte) func(context.Context) (any, error) {
	return func(ctx context.Context) (any, error) {
		e, err := fsm.Decode(entry)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return n.commandLocal(ctx, e)
	}
}

// commandAnswer decodes the leader's answer to a forwarded command.
func commandAnswer(resp []byte, _ time.Time) (any, error) {
	v, err := decodeResult(resp)
	if err != nil {
		return nil, fmt.Errorf("node: leader's answer: %w", err)
	}
	return v, nil
}

// commandLocal checks a decoded command against the leader's state and
// applies it; it returns the register's result (a value of fsm's result
// types). A reserve is queued for the batcher; its domain outcomes
// (unknown limit, invalid) are results too, which the node that serves the
// request maps to errors.
func (n *Node) commandLocal(ctx context.Context, e fsm.Entry) (any, error) {
	switch e.Type {
	case fsm.CmdReserveBatch:
		if len(e.Reserves) != 1 {
			return nil, fmt.Errorf("%w: a forwarded reserve entry holds %d reserves; allowed: 1", ErrInvalid, len(e.Reserves))
		}
		r := e.Reserves[0]
		if err := n.checkLocal(r); err != nil {
			return nil, err
		}
		d, err := n.reserveLocal(ctx, r)
		if d.res.Status == 0 {
			if err == nil {
				err = errors.New("node: internal error: reserve without a status")
			}
			return nil, err
		}
		if d.res.Status != fsm.Granted || d.res.ExpiresInNanos <= 0 {
			return d.res, nil // no expiry for the follower to count or find expired
		}
		if d.res.Duplicate {
			d.index = 0 // a replay: nothing to report if it expires
		}
		return d, nil
	case fsm.CmdPutLimit:
		return n.putLocal(ctx, e.Put)
	case fsm.CmdDeleteLimit:
		return n.deleteLocal(ctx, e.Delete)
	case fsm.CmdPutTemplate:
		return n.putTemplateLocal(ctx, e.PutTemplate)
	case fsm.CmdDeleteTemplate:
		return n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendDeleteTemplate(nil, st, e.DeleteTemplate) })
	case fsm.CmdPutLeasePolicy:
		return n.leasePolicyLocal(ctx, e.Policy)
	case fsm.CmdLease, fsm.CmdRenew, fsm.CmdReturn:
		return n.leaseLocal(ctx, fsm.LeaseCommand{Kind: e.Type, Lease: e.Lease, Renew: e.Renew, Return: e.Return})
	case fsm.CmdOpenSession:
		return n.openSessionLocal(ctx, e.OpenSession)
	case fsm.CmdSettle:
		return n.settleLocal(ctx, e.Settle)
	case fsm.CmdRelease:
		return n.releaseLocal(ctx, e.Release)
	case fsm.CmdExpiredGrants:
		return n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendExpiredGrants(nil, st, e.ExpiredGrants) })
	case fsm.CmdWithdraw:
		return n.withdrawLocal(ctx, e.Withdraw)
	}
	return nil, fmt.Errorf("%w: command type %d cannot be forwarded", ErrInvalid, e.Type)
}

// applyAdmin stamps and applies one command (other than a reserve) on the
// leader and returns the register's result.
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

// bytesOf is a payload already built.
func bytesOf(b []byte) func() ([]byte, error) { return func() ([]byte, error) { return b, nil } }

// resultAs returns the command's result as a T, or the error: a result of
// another type is an internal error whose outcome is unknown (the command
// was committed, its answer lost).
func resultAs[T any](what string, v any, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	res, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("%w: internal error: %s answered %T (outcome unknown)", ErrNoLeader, what, v)
	}
	return res, nil
}

// maxRetryFor bounds the internal retries of one command with an
// idempotency key: well inside the register's dedup retention (and a
// session's idle lifetime), so that a retry is always recognised as one.
const maxRetryFor = 30 * time.Second

// retryAmbiguous runs once, and again (20 ms apart) while it fails with
// ErrNoLeader, if the command is idempotent, until ctx ends, until (if not
// zero) or maxRetryFor has passed.
func retryAmbiguous[T any](n *Node, ctx context.Context, idempotent bool, until time.Time, once func() (T, error)) (T, error) {
	giveUp := time.Now().Add(maxRetryFor)
	if !until.IsZero() && until.Before(giveUp) {
		giveUp = until
	}
	for {
		res, err := once()
		if err == nil || !idempotent || !errors.Is(err, ErrNoLeader) || ctx.Err() != nil || !time.Now().Before(giveUp) {
			return res, err
		}
		if !n.pause(ctx, min(20*time.Millisecond, time.Until(giveUp))) || !time.Now().Before(giveUp) {
			return res, err
		}
	}
}

// handleForwarded serves one operation forwarded by a follower. It never
// forwards again: if this node is not the leader it says so.
func (n *Node) handleForwarded(ctx context.Context, op byte, payload []byte) ([]byte, error) {
	read := time.Now() // the call was read off the connection by now
	if !n.waitLeading(ctx) {
		return nil, fmt.Errorf("%w: %s is not the leader", ErrNoLeader, n.cfg.ID)
	}
	if op == wire.OpCommandBatch && !n.testNoCommandBatch.Load() {
		return n.leaseBatchForwarded(ctx, payload)
	}
	if op == wire.OpCommand {
		e, err := fsm.Decode(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		release, err := n.admitForwarded(e)
		if err != nil {
			return nil, err
		}
		var adm *admission
		ctx, adm = withAdmission(ctx, release)
		defer adm.leave()
		if e.Type == fsm.CmdReserveBatch && len(e.Reserves) == 1 && e.Reserves[0].Track && e.Reserves[0].MaxWaitNanos > 0 {
			// It may wait in an in-flight cap's queue for its max wait;
			// the follower that forwarded it bounds the whole call.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), wire.AddNanos(n.cfg.ApplyTimeout, time.Duration(e.Reserves[0].MaxWaitNanos)))
			defer cancel()
		}
		v, err := n.commandLocal(ctx, e)
		if err != nil {
			return nil, err
		}
		if d, ok := v.(decidedReserve); ok {
			// The follower counts the expiry from its sending of the call
			// plus this, never from when the answer reaches it.
			d.held = max(d.at.Sub(read), 0)
			v = d
		}
		if d := n.testDelayForwardedAnswer.Load(); d > 0 && e.Type == fsm.CmdReserveBatch {
			n.pause(ctx, time.Duration(d))
		}
		return encodeResult(v)
	}
	strs := func(k int) ([]string, error) {
		ss, err := decodeStrings(payload, k)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return ss, nil
	}
	switch op {
	case wire.OpRead:
		ss, err := strs(1)
		if err != nil {
			return nil, err
		}
		ls, err := n.readLocal(ctx, ss[0])
		if err != nil {
			return nil, err
		}
		return encodeLimits(ls)
	case wire.OpReadPage:
		q, err := decodeLimitsQuery(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if err := q.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		p, err := n.readPageLocal(ctx, q)
		if err != nil {
			return nil, err
		}
		return encodeLimitsPage(p)
	case wire.OpReadTemplates:
		ss, err := strs(1)
		if err != nil {
			return nil, err
		}
		if ss[0] != "" {
			if err := fsm.ValidateTemplatePrefix(ss[0]); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
		ts, err := n.readTemplatesLocal(ctx, ss[0])
		if err != nil {
			return nil, err
		}
		return encodeTemplates(ts)
	case wire.OpLeaseView:
		ss, err := strs(1)
		if err != nil {
			return nil, err
		}
		if err := fsm.ValidateName(ss[0]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		v, err := n.leaseViewLocal(ctx, ss[0])
		if err != nil {
			return nil, err
		}
		return encodeLeaseView(v.pool, v.leases), nil
	case wire.OpJoin:
		ss, err := strs(2)
		if err != nil {
			return nil, err
		}
		voter, err := n.joinLocal(ss[0], ss[1])
		if err != nil {
			return nil, err
		}
		return encodeJoined(voter), nil
	case wire.OpRemove:
		ss, err := strs(1)
		if err != nil {
			return nil, err
		}
		return nil, n.removeLocal(ss[0])
	case wire.OpTransfer:
		ss, err := strs(1)
		if err != nil {
			return nil, err
		}
		return nil, n.transferLocal(ss[0])
	}
	return nil, fmt.Errorf("%w: unknown forwarded operation %d", ErrInvalid, op)
}

// Waiting for raft futures.
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
