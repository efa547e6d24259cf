package node

import (
	"context"
	"fmt"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// limitspage.go: the limits one page at a time, read linearizably (a
// follower forwards the query to the leader, wire.OpReadPage).

// limitsPage is one page of limits (fsm.FSM.LimitsPage): the limits, in
// name order, and whether more with the query's prefix follow.
type limitsPage struct {
	Limits []fsm.LimitInfo
	More   bool
}

// LimitsPage returns the page of limits q selects, in name order, and
// whether more limits with q's prefix follow it, read linearizably: it
// reflects every change acknowledged before it was asked. An invalid q is
// refused with ErrInvalid and reaches no other node.
func (n *Node) LimitsPage(ctx context.Context, q fsm.LimitsQuery) ([]fsm.LimitInfo, bool, error) {
	if err := q.Validate(); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	p, err := leaderDo(n, ctx, time.Time{}, wire.OpReadPage, bytesOf(encodeLimitsQuery(q)),
		func(ctx context.Context) (limitsPage, error) { return n.readPageLocal(ctx, q) },
		func(resp []byte, _ time.Time) (limitsPage, error) { return decodeLimitsPage(resp) })
	return p.Limits, p.More, err
}

// readPageLocal reads the page on the leader, after a barrier, as
// readLocal reads every limit.
func (n *Node) readPageLocal(ctx context.Context, q fsm.LimitsQuery) (limitsPage, error) {
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := n.awaitFuture(n.raft.Barrier(timeout)); err != nil {
		return limitsPage{}, mapRaftErr(err)
	}
	ls, more := n.fsm.LimitsPage(q)
	return limitsPage{Limits: ls, More: more}, nil
}

// encodeLimitsQuery is OpReadPage's payload.
func encodeLimitsQuery(q fsm.LimitsQuery) []byte {
	var w wire.Enc
	w.Str(q.Prefix)
	w.Str(q.After)
	w.Uvar(uint64(q.Size))
	return w.B
}

// decodeLimitsQuery decodes encodeLimitsQuery's payload (not validated).
func decodeLimitsQuery(p []byte) (fsm.LimitsQuery, error) {
	r := wire.Dec{B: p}
	q := fsm.LimitsQuery{Prefix: r.Str(), After: r.Str()}
	size := r.Uvar()
	if err := r.Done(); err != nil {
		return fsm.LimitsQuery{}, err
	}
	if size > fsm.MaxLimitsPage {
		return fsm.LimitsQuery{}, fmt.Errorf("node: page size %d: allowed: 1-%d", size, fsm.MaxLimitsPage)
	}
	q.Size = int(size)
	return q, nil
}

// maxPageAnswerBytes bounds OpReadPage's answer well inside one frame
// (wire.MaxFrame, 4 MiB): 10 000 limits of the longest names and configs
// with large counters come near it.
var maxPageAnswerBytes = 2 << 20

// encodeLimitsPage is OpReadPage's answer: whether more follow, then the
// limits as encodeLimits has them. A page whose encoding would pass
// maxPageAnswerBytes is cut, and says more follow (the caller asks again
// after its last limit).
func encodeLimitsPage(p limitsPage) ([]byte, error) {
	for {
		ls, err := encodeLimits(p.Limits)
		if err != nil {
			return nil, err
		}
		if len(ls) > maxPageAnswerBytes && len(p.Limits) > 1 {
			p.Limits, p.More = p.Limits[:len(p.Limits)/2], true
			continue
		}
		var w wire.Enc
		w.Bool(p.More)
		return append(w.B, ls...), nil
	}
}

// decodeLimitsPage decodes encodeLimitsPage's answer.
func decodeLimitsPage(b []byte) (limitsPage, error) {
	if len(b) < 1 {
		return limitsPage{}, wire.ErrMalformed
	}
	r := wire.Dec{B: b[:1]}
	more := r.Bool()
	if err := r.Done(); err != nil {
		return limitsPage{}, err
	}
	ls, err := decodeLimits(b[1:])
	if err != nil {
		return limitsPage{}, err
	}
	return limitsPage{Limits: ls, More: more}, nil
}
