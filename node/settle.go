package node

import (
	"context"
	"fmt"
	"time"

	"github.com/permitd/permitd/fsm"
)

// settle.go: settling a reservation's real cost and releasing its
// in-flight permits (fsm/settle.go). Both are commands of the register,
// applied one entry each (they are rarer than reserves). A settlement with
// a request ID and a release are retried on ambiguous failures: the
// register answers a retried settlement with the first one's result and a
// second release releases nothing.

// Settle settles a reservation. Its outcomes map to errors: an unknown or
// final reservation is ErrNotFound, another owner's ErrForbidden, an
// already settled one ErrConflict, a settlement that does not fit it
// ErrInvalid, each with the register's reason.
func (n *Node) Settle(ctx context.Context, c fsm.Settle) (fsm.SettleResult, error) {
	entry, err := fsm.AppendSettle(nil, fsm.Stamp{}, c)
	if err != nil {
		return fsm.SettleResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	res, err := commandRetried[fsm.SettleResult](n, ctx, "settle", entry, c.RequestID != "")
	if err != nil {
		return res, err
	}
	return res, SettleError(res.Status, res.Detail)
}

// Release releases the in-flight permits a reservation holds; its errors
// are Settle's.
func (n *Node) Release(ctx context.Context, c fsm.Release) (fsm.ReleaseResult, error) {
	entry, err := fsm.AppendRelease(nil, fsm.Stamp{}, c)
	if err != nil {
		return fsm.ReleaseResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	res, err := commandRetried[fsm.ReleaseResult](n, ctx, "release", entry, true)
	if err != nil {
		return res, err
	}
	return res, SettleError(res.Status, res.Detail)
}

// commandRetried runs a command entry on the leader, again on ambiguous
// failures if it is idempotent, and returns its result as a T.
func commandRetried[T any](n *Node, ctx context.Context, what string, entry []byte, idempotent bool) (T, error) {
	return retryAmbiguous(n, ctx, idempotent, time.Time{}, func() (T, error) {
		v, err := n.command(ctx, entry)
		return resultAs[T](what, v, err)
	})
}

// settleLocal and releaseLocal apply the command on the leader.
func (n *Node) settleLocal(ctx context.Context, c fsm.Settle) (fsm.SettleResult, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendSettle(nil, st, c) })
	return resultAs[fsm.SettleResult]("settle", v, err)
}

func (n *Node) releaseLocal(ctx context.Context, c fsm.Release) (fsm.ReleaseResult, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendRelease(nil, st, c) })
	return resultAs[fsm.ReleaseResult]("release", v, err)
}

// SettleError is the error a settlement's or a release's status maps to
// (nil for fsm.Settled), with the register's detail as its message.
func SettleError(st fsm.SettleStatus, detail string) error {
	switch st {
	case fsm.Settled:
		return nil
	case fsm.SettleUnknown:
		return userErrorf(ErrNotFound, "%s", detail)
	case fsm.SettleForbidden:
		return userErrorf(ErrForbidden, "%s", detail)
	case fsm.SettleConflict:
		return userErrorf(ErrConflict, "%s", detail)
	case fsm.SettleInvalid:
		return userErrorf(ErrInvalid, "%s", detail)
	}
	return fmt.Errorf("%w: internal error: settlement status %d (outcome unknown)", ErrNoLeader, st)
}

// settleUnusedTimeout bounds settleUnused.
const settleUnusedTimeout = 5 * time.Second

// settleUnused settles, in the background, a reservation whose grant
// expired before its answer could be sent (answered as a refusal): every
// part used 0 permits, so its in-flight holds are freed at once instead
// of at their TTL, and its rate parts are refunded if nothing touched
// their limits since. Best effort: if it fails, the holds lapse at their
// TTL as they would have.
func (n *Node) settleUnused(id uint64, owner string, parts []fsm.Part) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(n.stopped, settleUnusedTimeout)
		defer cancel()
		c := fsm.Settle{Reservation: id, Owner: owner}
		for _, p := range parts {
			c.Actual = append(c.Actual, fsm.Part{Limit: p.Limit})
		}
		if _, err := n.Settle(ctx, c); err != nil {
			n.log.Debug("settling an expired grant's reservation failed; its holds lapse at their TTL", "reservation", id, "error", err)
		}
	}()
}
