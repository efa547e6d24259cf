package node

import (
	"context"
	"fmt"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// admin.go: creating, reconfiguring, reading and deleting limits.

// PutLimit creates or reconfigures a limit with all its settings (its
// configuration and shadow mode). A configuration the register cannot
// carry the limit's state over to is ErrInvalid with its reason (the limit
// keeps its previous one).
func (n *Node) PutLimit(ctx context.Context, p fsm.PutLimit) (fsm.PutResult, error) {
	entry, err := fsm.AppendPut(nil, fsm.Stamp{}, p)
	if err != nil {
		return fsm.PutResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := n.command(ctx, entry)
	return resultAs[fsm.PutResult]("put", v, err)
}

func (n *Node) putLocal(ctx context.Context, p fsm.PutLimit) (fsm.PutResult, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendPut(nil, st, p) })
	res, err := resultAs[fsm.PutResult]("put", v, err)
	if err == nil && res.Detail != "" {
		// The register kept the old configuration (e.g. the new one
		// cannot carry the current state over).
		return fsm.PutResult{}, fmt.Errorf("%w: %s", ErrInvalid, res.Detail)
	}
	return res, err
}

// DeleteLimit removes a limit (ErrNotFound if it does not exist). A leased
// limit whose leases still hold permits is kept unless force (ErrConflict,
// with the register's reason).
func (n *Node) DeleteLimit(ctx context.Context, name string, force bool) (fsm.DeleteResult, error) {
	entry, err := fsm.AppendDelete(nil, fsm.Stamp{}, fsm.DeleteLimit{Name: name, Force: force})
	if err != nil {
		return fsm.DeleteResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := n.command(ctx, entry)
	res, err := resultAs[fsm.DeleteResult]("delete", v, err)
	if err == nil && !res.Existed {
		return res, n.limitNotFound(name)
	}
	return res, err
}

func (n *Node) deleteLocal(ctx context.Context, d fsm.DeleteLimit) (fsm.DeleteResult, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendDelete(nil, st, d) })
	res, err := resultAs[fsm.DeleteResult]("delete", v, err)
	if err == nil && res.Detail != "" {
		return fsm.DeleteResult{}, userErrorf(ErrConflict, "%s", res.Detail)
	}
	return res, err
}

// PutTemplate creates or replaces a template (fsm.PutTemplate): keys
// named "prefix:key" are created from it on first use. A template the
// register cannot take (too many templates) is ErrInvalid with its
// reason.
func (n *Node) PutTemplate(ctx context.Context, t fsm.PutTemplate) (fsm.PutTemplateResult, error) {
	entry, err := fsm.AppendPutTemplate(nil, fsm.Stamp{}, t)
	if err != nil {
		return fsm.PutTemplateResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := n.command(ctx, entry)
	return resultAs[fsm.PutTemplateResult]("put template", v, err)
}

func (n *Node) putTemplateLocal(ctx context.Context, t fsm.PutTemplate) (fsm.PutTemplateResult, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendPutTemplate(nil, st, t) })
	res, err := resultAs[fsm.PutTemplateResult]("put template", v, err)
	if err == nil && res.Detail != "" {
		return fsm.PutTemplateResult{}, fmt.Errorf("%w: %s", ErrInvalid, res.Detail)
	}
	return res, err
}

// DeleteTemplate deletes the template of prefix (ErrNotFound if there is
// none): it creates no more keys, and its live keys stay until idle.
func (n *Node) DeleteTemplate(ctx context.Context, prefix string) (fsm.DeleteTemplateResult, error) {
	entry, err := fsm.AppendDeleteTemplate(nil, fsm.Stamp{}, fsm.DeleteTemplate{Prefix: prefix})
	if err != nil {
		return fsm.DeleteTemplateResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := n.command(ctx, entry)
	res, err := resultAs[fsm.DeleteTemplateResult]("delete template", v, err)
	if err == nil && !res.Existed {
		return res, userErrorf(ErrNotFound, "template %q does not exist", prefix)
	}
	return res, err
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
	return leaderDo(n, ctx, time.Time{}, wire.OpRead, bytesOf(encodeStrings(name)),
		func(ctx context.Context) ([]fsm.LimitInfo, error) { return n.readLocal(ctx, name) },
		func(resp []byte, _ time.Time) ([]fsm.LimitInfo, error) { return decodeLimits(resp) })
}

// readLocal reads one limit (or every limit, if name is empty) on the
// leader, after a barrier: everything committed before is applied.
func (n *Node) readLocal(ctx context.Context, name string) ([]fsm.LimitInfo, error) {
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := n.awaitFuture(n.raft.Barrier(timeout)); err != nil {
		return nil, mapRaftErr(err)
	}
	if name == "" {
		return n.fsm.Limits(), nil
	}
	if l, ok := n.fsm.LimitView(name); ok {
		return []fsm.LimitInfo{l}, nil
	}
	return nil, nil
}

// LocalShadowLimits returns the limits in shadow mode as this replica
// has applied it (see fsm.FSM.ShadowLimits): for the shadow metrics, at
// every scrape, at a cost that does not grow with the register.
func (n *Node) LocalShadowLimits() []fsm.LimitInfo { return n.fsm.ShadowLimits() }

// LimitStats returns the monitoring view of the first maxLimits limits
// by name (all if maxLimits < 0), read consistently from this replica's
// state, and how many limits there are (see fsm.FSM.LimitStats).
func (n *Node) LimitStats(maxLimits int) ([]fsm.LimitStats, int) { return n.fsm.LimitStats(maxLimits) }
