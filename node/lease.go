package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// lease.go: the lease commands of package fsm (lease policy, lease, renew,
// return) and the lease view, through the node.
//
// Like reserves, every command is validated at the edge first (its
// payload's Validate, so an invalid command never reaches the log), then
// applied on the leader, stamped from the cluster timeline like an admin
// command (one log entry per command: leases are per renewal, not per
// permit, so they are not batched), or forwarded to it. The leader also
// checks that the limit exists and is leased before replicating. A
// follower does not: its state may lag the leader's (a lease sent right
// after the policy that enabled leasing would be refused by a follower
// that has not applied the policy yet), so it lets the leader decide.
//
// Domain outcomes are results, not errors: LeaseGranted, LeaseRefused,
// LeaseFenced and LeaseReturned. LeaseUnknownLimit becomes ErrNotFound and
// LeaseInvalid ErrInvalid (with the register's detail). A command with a
// RequestID is retried on ambiguous failures (ErrNoLeader) within the same
// bound as a reserve; the register's deduplication makes the retry return
// the first decision (Duplicate), so a retried lease is never granted twice.

// PutLeasePolicy makes a limit leased (p.Leased) or linearized again, and
// sets its pool's capacities; see fsm.LeasePolicy. A policy the register
// does not apply (the limit's rate cannot be leased, leases still hold
// permits, ...) is ErrInvalid with the register's reason; an unknown limit
// is ErrNotFound.
func (n *Node) PutLeasePolicy(ctx context.Context, p fsm.LeasePolicy) (fsm.LeasePolicyResult, error) {
	if err := p.Validate(); err != nil {
		return fsm.LeasePolicyResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	payload, err := fsm.AppendLeasePolicy(nil, fsm.Stamp{}, p)
	if err != nil {
		return fsm.LeasePolicyResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	resp, err := n.leaderDo(ctx, wire.OpLeasePolicy, payload, func(ctx context.Context) ([]byte, error) {
		res, err := n.leasePolicyLocal(ctx, p)
		if err != nil {
			return nil, err
		}
		return encodeLeasePolicyResult(res), nil
	})
	if err != nil {
		return fsm.LeasePolicyResult{}, err
	}
	res, err := decodeLeasePolicyResult(resp)
	if err != nil {
		return fsm.LeasePolicyResult{}, fmt.Errorf("node: leader's answer: %w", err)
	}
	switch {
	case res.UnknownLimit:
		return res, n.limitNotFound(p.Limit)
	case !res.Applied:
		detail := res.Detail
		if detail == "" {
			detail = "the register did not apply it"
		}
		return res, fmt.Errorf("%w: lease policy of limit %q: %s", ErrInvalid, p.Limit, detail)
	}
	return res, nil
}

// leasePolicyLocal applies p on the leader and returns the register's
// result as is.
func (n *Node) leasePolicyLocal(ctx context.Context, p fsm.LeasePolicy) (fsm.LeasePolicyResult, error) {
	if _, ok := n.fsm.Limit(p.Limit); !ok {
		return fsm.LeasePolicyResult{}, n.limitNotFound(p.Limit)
	}
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendLeasePolicy(nil, st, p) })
	if err != nil {
		return fsm.LeasePolicyResult{}, err
	}
	res, ok := v.(fsm.LeasePolicyResult)
	if !ok {
		return fsm.LeasePolicyResult{}, fmt.Errorf("%w: internal error: lease policy answered %T (outcome unknown)", ErrNoLeader, v)
	}
	return res, nil
}

// Lease opens a lease for q.Holder on a leased limit; see fsm.Lease. The
// answer is LeaseGranted (ExpiresInNanos counts from when the request was
// sent, see fsm.LeaseResult) or LeaseRefused (the holder already holds a
// lease, named by LeaseID and Epoch, or the limit holds too many).
func (n *Node) Lease(ctx context.Context, q fsm.Lease) (fsm.LeaseResult, error) {
	if err := q.Validate(); err != nil {
		return fsm.LeaseResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return n.leaseCommand(ctx, q.Limit, q.RequestID, wire.OpLease, func(st fsm.Stamp) ([]byte, error) {
		return fsm.AppendLease(nil, st, q)
	})
}

// Renew reports on the current grant of lease q.LeaseID at q.Epoch and
// asks for the next one; see fsm.Renew. The answer is LeaseGranted (epoch
// q.Epoch+1) or LeaseFenced (the lease is not live or the epoch is not
// its current one: stop using that grant).
func (n *Node) Renew(ctx context.Context, q fsm.Renew) (fsm.LeaseResult, error) {
	if err := q.Validate(); err != nil {
		return fsm.LeaseResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return n.leaseCommand(ctx, q.Limit, q.RequestID, wire.OpRenew, func(st fsm.Stamp) ([]byte, error) {
		return fsm.AppendRenew(nil, st, q)
	})
}

// Return reports on the current grant of lease q.LeaseID at q.Epoch and
// closes the lease; see fsm.Return. The answer is LeaseReturned or
// LeaseFenced.
func (n *Node) Return(ctx context.Context, q fsm.Return) (fsm.LeaseResult, error) {
	if err := q.Validate(); err != nil {
		return fsm.LeaseResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return n.leaseCommand(ctx, q.Limit, q.RequestID, wire.OpReturn, func(st fsm.Stamp) ([]byte, error) {
		return fsm.AppendReturn(nil, st, q)
	})
}

// leaseCommand decides one lease, renew or return on the leader (encode
// builds its log entry at a cluster time), retrying a command with a
// request ID on ambiguous failures. A follower forwards the entry itself,
// stamped 0: the leader decodes it with fsm.Decode and stamps its own.
func (n *Node) leaseCommand(ctx context.Context, limit, requestID string, op byte, encode func(st fsm.Stamp) ([]byte, error)) (fsm.LeaseResult, error) {
	payload, err := encode(fsm.Stamp{})
	if err != nil {
		return fsm.LeaseResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	giveUp := time.Now().Add(maxRetryFor)
	for {
		res, err := n.leaseOnce(ctx, limit, op, payload, encode)
		if err == nil {
			return n.leaseResultToErr(limit, res)
		}
		if requestID == "" || !errors.Is(err, ErrNoLeader) || ctx.Err() != nil || time.Now().After(giveUp) {
			return fsm.LeaseResult{}, err
		}
		if !n.pause(ctx, 20*time.Millisecond) {
			return fsm.LeaseResult{}, err
		}
	}
}

func (n *Node) leaseOnce(ctx context.Context, limit string, op byte, payload []byte, encode func(st fsm.Stamp) ([]byte, error)) (fsm.LeaseResult, error) {
	resp, err := n.leaderDo(ctx, op, payload, func(ctx context.Context) ([]byte, error) {
		res, err := n.leaseLocal(ctx, limit, encode)
		if err != nil {
			return nil, err
		}
		return encodeLeaseResult(res), nil
	})
	if err != nil {
		return fsm.LeaseResult{}, err
	}
	res, err := decodeLeaseResult(resp)
	if err != nil {
		return fsm.LeaseResult{}, fmt.Errorf("node: leader's answer: %w", err)
	}
	return res, nil
}

// leaseLocal checks the limit and applies one lease command on the
// leader, returning the register's result as is.
func (n *Node) leaseLocal(ctx context.Context, limit string, encode func(st fsm.Stamp) ([]byte, error)) (fsm.LeaseResult, error) {
	if err := n.checkLeased(limit); err != nil {
		return fsm.LeaseResult{}, err
	}
	v, err := n.applyAdmin(ctx, encode)
	if err != nil {
		return fsm.LeaseResult{}, err
	}
	res, ok := v.(fsm.LeaseResult)
	if !ok || res.Status == 0 {
		// Committed, but the answer is lost: the caller may retry with
		// the same request ID.
		return fsm.LeaseResult{}, fmt.Errorf("%w: internal error: lease command answered %T (outcome unknown)", ErrNoLeader, v)
	}
	return res, nil
}

// checkLeased rejects, on the leader, a lease command on a limit that does
// not exist or is not leased.
func (n *Node) checkLeased(limit string) error {
	info, ok := n.fsm.Limit(limit)
	switch {
	case !ok:
		return n.limitNotFound(limit)
	case !info.Leased:
		return fmt.Errorf("%w: limit %q is not leased: its permits are reserved one request at a time (put a lease policy with leased=true first)", ErrInvalid, limit)
	}
	return nil
}

// leaseResultToErr maps the register's outcomes that the API reports as
// errors. A granted duplicate whose grant expired before the retry arrived
// is reported as fenced: that grant must not be used.
func (n *Node) leaseResultToErr(limit string, res fsm.LeaseResult) (fsm.LeaseResult, error) {
	switch res.Status {
	case fsm.LeaseGranted:
		if res.ExpiresInNanos < 0 {
			return fsm.LeaseResult{Status: fsm.LeaseFenced, LeaseID: res.LeaseID, Epoch: res.Epoch, Duplicate: true,
				Detail: fmt.Sprintf("the grant of lease %d epoch %d answered to this request_id expired before the retry arrived: do not use it; renew the lease if it is live at a later epoch, or open a new lease with a new request_id",
					res.LeaseID, res.Epoch)}, nil
		}
		return res, nil
	case fsm.LeaseRefused, fsm.LeaseFenced, fsm.LeaseReturned:
		return res, nil
	case fsm.LeaseUnknownLimit:
		return res, n.limitNotFound(limit)
	case fsm.LeaseInvalid:
		return res, fmt.Errorf("%w: %s", ErrInvalid, res.Detail)
	}
	return fsm.LeaseResult{}, fmt.Errorf("node: internal error: lease command on limit %q answered status %v", limit, res.Status)
}

// LeaseView returns the lease pool of a leased limit and its leases
// (sorted by ID), read linearizably through the leader like Limit.
// ErrNotFound if the limit does not exist, ErrInvalid if it is not leased.
func (n *Node) LeaseView(ctx context.Context, limit string) (fsm.LeasePoolInfo, []fsm.LeaseInfo, error) {
	if err := fsm.ValidateName(limit); err != nil {
		return fsm.LeasePoolInfo{}, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	resp, err := n.leaderDo(ctx, wire.OpLeaseView, encodeStrings(limit), func(ctx context.Context) ([]byte, error) {
		return n.leaseViewLocal(ctx, limit)
	})
	if err != nil {
		return fsm.LeasePoolInfo{}, nil, err
	}
	pool, leases, err := decodeLeaseView(resp)
	if err != nil {
		return fsm.LeasePoolInfo{}, nil, fmt.Errorf("node: leader's answer: %w", err)
	}
	return pool, leases, nil
}

// maxViewTries bounds the attempts to read the pool and its leases at the
// same applied index while entries keep being applied.
const maxViewTries = 16

func (n *Node) leaseViewLocal(ctx context.Context, limit string) ([]byte, error) {
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := n.awaitFuture(n.raft.Barrier(timeout)); err != nil {
		return nil, mapRaftErr(err)
	}
	for try := 1; ; try++ {
		idx := n.fsm.AppliedIndex()
		info, ok := n.fsm.Limit(limit)
		pool, leased := n.fsm.LeasePool(limit)
		leases := n.fsm.Leases(limit)
		if n.fsm.AppliedIndex() != idx && try < maxViewTries {
			continue
		}
		switch {
		case !ok:
			return nil, n.limitNotFound(limit)
		case !info.Leased || !leased:
			return nil, fmt.Errorf("%w: limit %q is not leased: it has no lease pool", ErrInvalid, limit)
		}
		return encodeLeaseView(pool, leases), nil
	}
}

// handleForwardedLease serves a forwarded lease command or view on the
// leader. Domain outcomes travel as results; the follower maps them.
func (n *Node) handleForwardedLease(ctx context.Context, op byte, payload []byte) ([]byte, error) {
	invalid := func(err error) ([]byte, error) { return nil, fmt.Errorf("%w: %v", ErrInvalid, err) }
	result := func(res fsm.LeaseResult, err error) ([]byte, error) {
		if err != nil {
			return nil, err
		}
		return encodeLeaseResult(res), nil
	}
	switch op {
	case wire.OpLeasePolicy:
		e, err := decodeCommand(payload, fsm.CmdPutLeasePolicy)
		if err != nil {
			return invalid(err)
		}
		p := e.Policy
		res, err := n.leasePolicyLocal(ctx, p)
		if err != nil {
			return nil, err
		}
		return encodeLeasePolicyResult(res), nil
	case wire.OpLease:
		e, err := decodeCommand(payload, fsm.CmdLease)
		if err != nil {
			return invalid(err)
		}
		q := e.Lease
		return result(n.leaseLocal(ctx, q.Limit, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendLease(nil, st, q) }))
	case wire.OpRenew:
		e, err := decodeCommand(payload, fsm.CmdRenew)
		if err != nil {
			return invalid(err)
		}
		q := e.Renew
		return result(n.leaseLocal(ctx, q.Limit, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendRenew(nil, st, q) }))
	case wire.OpReturn:
		e, err := decodeCommand(payload, fsm.CmdReturn)
		if err != nil {
			return invalid(err)
		}
		q := e.Return
		return result(n.leaseLocal(ctx, q.Limit, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendReturn(nil, st, q) }))
	case wire.OpLeaseView:
		ss, err := decodeStrings(payload, 1)
		if err != nil {
			return invalid(err)
		}
		if err := fsm.ValidateName(ss[0]); err != nil {
			return invalid(err)
		}
		return n.leaseViewLocal(ctx, ss[0])
	}
	return nil, fmt.Errorf("%w: unknown forwarded operation %d", ErrInvalid, op)
}
