package node

import (
	"context"
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
// run on the leader, or forwarded to it. The leader stamps each lease,
// renew and return on arrival and batches those that arrive while earlier
// ones commit, or within leaseLinger of the first, into one CmdLeaseBatch
// entry (batcher.go): a fleet renews once per worker per period, and at a
// thousand workers one entry per renewal cost the leader more than half
// of its CPU in disk commits and replication. The lease policy is an
// admin command of its own entry. The leader also
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
	entry, err := fsm.AppendLeasePolicy(nil, fsm.Stamp{}, p)
	if err != nil {
		return fsm.LeasePolicyResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := n.command(ctx, entry)
	res, err := resultAs[fsm.LeasePolicyResult]("lease policy", v, err)
	if err != nil {
		return res, err
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
	return resultAs[fsm.LeasePolicyResult]("lease policy", v, err)
}

// Lease opens a lease for q.Holder on a leased limit; see fsm.Lease. The
// answer is LeaseGranted (ExpiresInNanos counts from when the request was
// sent, see fsm.LeaseResult) or LeaseRefused (the holder already holds a
// lease, named by LeaseID and Epoch, or the limit holds too many).
func (n *Node) Lease(ctx context.Context, q fsm.Lease) (fsm.LeaseResult, error) {
	entry, err := fsm.AppendLease(nil, fsm.Stamp{}, q)
	return n.leaseCommand(ctx, q.Limit, q.RequestID, entry, err)
}

// Renew reports on the current grant of lease q.LeaseID at q.Epoch and
// asks for the next one; see fsm.Renew. The answer is LeaseGranted (epoch
// q.Epoch+1) or LeaseFenced (the lease is not live or the epoch is not
// its current one: stop using that grant).
func (n *Node) Renew(ctx context.Context, q fsm.Renew) (fsm.LeaseResult, error) {
	entry, err := fsm.AppendRenew(nil, fsm.Stamp{}, q)
	return n.leaseCommand(ctx, q.Limit, q.RequestID, entry, err)
}

// Return reports on the current grant of lease q.LeaseID at q.Epoch and
// closes the lease; see fsm.Return. The answer is LeaseReturned or
// LeaseFenced.
func (n *Node) Return(ctx context.Context, q fsm.Return) (fsm.LeaseResult, error) {
	entry, err := fsm.AppendReturn(nil, fsm.Stamp{}, q)
	return n.leaseCommand(ctx, q.Limit, q.RequestID, entry, err)
}

// leaseCommand runs one lease, renew or return (its entry stamped 0, or
// the error that encoding it gave: the command is invalid) on the leader,
// retrying a command with a request ID on ambiguous failures.
func (n *Node) leaseCommand(ctx context.Context, limit, requestID string, entry []byte, err error) (fsm.LeaseResult, error) {
	if err != nil {
		return fsm.LeaseResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return retryAmbiguous(n, ctx, requestID != "", time.Time{}, func() (fsm.LeaseResult, error) {
		v, err := n.leaseEntry(ctx, entry)
		res, err := resultAs[fsm.LeaseResult]("lease command", v, err)
		if err != nil {
			return res, err
		}
		return n.leaseResultToErr(limit, res)
	})
}

// leaseLocal checks the limit and hands one lease command to the lease
// batcher on the leader, returning the register's result as is.
func (n *Node) leaseLocal(ctx context.Context, c fsm.LeaseCommand) (fsm.LeaseResult, error) {
	if err := n.checkLeased(c.Limit()); err != nil {
		return fsm.LeaseResult{}, err
	}
	out, _, err := n.leases.run(ctx, c)
	if err != nil {
		return fsm.LeaseResult{}, err
	}
	if out.res.Status == 0 {
		// Committed, but the answer is lost: the caller may retry with
		// the same request ID.
		return fsm.LeaseResult{}, fmt.Errorf("%w: internal error: lease command answered without a status (outcome unknown)", ErrNoLeader)
	}
	return out.res, nil
}

// checkLeased rejects, on the leader, a lease command on a limit that does
// not exist or is not leased.
func (n *Node) checkLeased(limit string) error {
	exists, leased := n.fsm.Leased(limit)
	switch {
	case !exists:
		return n.limitNotFound(limit)
	case !leased:
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
	v, err := leaderDo(n, ctx, time.Time{}, wire.OpLeaseView, bytesOf(encodeStrings(limit)),
		func(ctx context.Context) (leaseView, error) { return n.leaseViewLocal(ctx, limit) },
		func(resp []byte, _ time.Time) (leaseView, error) {
			pool, leases, err := decodeLeaseView(resp)
			if err != nil {
				return leaseView{}, fmt.Errorf("node: leader's answer: %w", err)
			}
			return leaseView{pool, leases}, nil
		})
	return v.pool, v.leases, err
}

// leaseView is a leased limit's pool and its leases.
type leaseView struct {
	pool   fsm.LeasePoolInfo
	leases []fsm.LeaseInfo
}

// maxViewTries bounds the attempts to read the pool and its leases at the
// same applied index while entries keep being applied.
const maxViewTries = 16

func (n *Node) leaseViewLocal(ctx context.Context, limit string) (leaseView, error) {
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := n.awaitFuture(n.raft.Barrier(timeout)); err != nil {
		return leaseView{}, mapRaftErr(err)
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
			return leaseView{}, n.limitNotFound(limit)
		case !info.Leased || !leased:
			return leaseView{}, fmt.Errorf("%w: limit %q is not leased: it has no lease pool", ErrInvalid, limit)
		}
		return leaseView{pool, leases}, nil
	}
}
