package node

import (
	"io"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
)

// applyobserver.go: what a node tells an ApplyObserver about the entries
// it applies. Every node applies every committed entry, in the same order,
// so every node tells its observer the same decisions; the FSM only
// decides, and the node reads the decisions off each entry right after
// applying it (fsm.FSM.AppliedEntry), on raft's apply goroutine.

// ApplyObserver is told the decisions of the entries a node applies. Its
// methods are called on the node's apply goroutine, one at a time, and
// must not block.
type ApplyObserver interface {
	// GrantedWait: a reserve on limit (each limit of a reserve in the
	// reservation form) was granted with its permits usable waitNanos
	// after the decision (a retry's replayed answer is not a grant;
	// neither is a shadow limit's grant counted apart). template is the
	// prefix of the template that created the limit, "" for an explicit
	// limit.
	GrantedWait(limit, template string, waitNanos int64)
	// LeaseGranted: a lease or renewal on limit by a holder of group was
	// granted, taking permits (>= 0) fresh permits from the pool (a
	// renewal's kept permits are not counted again).
	LeaseGranted(limit, group string, permits int64)
	// LimitDeleted: the limit was deleted (what was observed of it may
	// be forgotten).
	LimitDeleted(limit string)
	// Restored: the state was replaced by a snapshot; what was observed
	// before may be forgotten.
	Restored()
	// KeyChanged: the entry created a templated key, dropped it as idle,
	// made it explicit or deleted it (fsm.FSM.AppliedKeyChanges), in the
	// order it did.
	KeyChanged(c fsm.KeyChange)
	// KeysFull: a reserve was refused because the key it names would
	// pass a cap on templated keys (fsm.KeysFull); template is the
	// template of the first key it would have created.
	KeysFull(template string)
}

// observeEntry counts what the entry just applied did to templated keys'
// families, and tells the node's observer, if any, what it decided: res
// is its result, decisions the waiting reserves it decided.
func (n *Node) observeEntry(res any, decisions []fsm.WaiterDecision) {
	n.families.Observe(n.fsm.AppliedKeyChanges())
	if o := n.cfg.Applied; o != nil {
		n.observeApplied(o, res, decisions)
	}
}

// observeApplied tells o what the entry just applied decided: res is its
// result, decisions the waiting reserves it decided.
func (n *Node) observeApplied(o ApplyObserver, res any, decisions []fsm.WaiterDecision) {
	e := n.fsm.AppliedEntry()
	switch e.Type {
	case fsm.CmdReserveBatch:
		results, _ := res.([]fsm.ReserveResult)
		for i := range min(len(results), len(e.Reserves)) {
			r := &results[i]
			if r.Status == fsm.KeysFull {
				n.observeKeysFull(o, &e.Reserves[i])
			}
			if r.Status != fsm.Granted || r.Duplicate {
				continue
			}
			q := &e.Reserves[i]
			o.GrantedWait(q.Limit, n.fsm.KeyTemplate(q.Limit), r.WaitNanos)
			for _, p := range q.Also {
				o.GrantedWait(p.Limit, n.fsm.KeyTemplate(p.Limit), r.WaitNanos)
			}
		}
	case fsm.CmdLease:
		if r, ok := res.(fsm.LeaseResult); ok {
			n.observeLease(o, e.Lease.Limit, e.Lease.Group, 0, r)
		}
	case fsm.CmdRenew:
		if r, ok := res.(fsm.LeaseResult); ok {
			n.observeLease(o, e.Renew.Limit, "", e.Renew.KeptPermits, r)
		}
	case fsm.CmdLeaseBatch:
		results, _ := res.([]fsm.LeaseResult)
		for i := range min(len(results), len(e.LeaseBatch)) {
			c := &e.LeaseBatch[i]
			switch c.Kind {
			case fsm.CmdLease:
				n.observeLease(o, c.Lease.Limit, c.Lease.Group, 0, results[i])
			case fsm.CmdRenew:
				n.observeLease(o, c.Renew.Limit, "", c.Renew.KeptPermits, results[i])
			}
		}
	case fsm.CmdDeleteLimit:
		if r, ok := res.(fsm.DeleteResult); ok && r.Existed && r.Detail == "" {
			o.LimitDeleted(e.Delete.Name)
		}
	}
	for _, c := range n.fsm.AppliedKeyChanges() {
		o.KeyChanged(c)
	}
	for _, d := range decisions {
		if d.Result.Status != fsm.Granted {
			continue
		}
		if rv, ok := n.fsm.Reservation(d.Reservation); ok {
			for _, p := range rv.Parts {
				o.GrantedWait(p.Limit, n.fsm.KeyTemplate(p.Limit), d.Result.WaitNanos)
			}
		}
	}
}

// observeKeysFull tells o of reserve q refused for want of room for a
// templated key: the first part that names a key an active template
// would create.
func (n *Node) observeKeysFull(o ApplyObserver, q *fsm.Reserve) {
	name := q.Limit
	for i := -1; i < len(q.Also); i++ {
		if i >= 0 {
			name = q.Also[i].Limit
		}
		if n.fsm.CreatesKey(name) {
			o.KeysFull(name[:strings.IndexByte(name, ':')])
			return
		}
	}
}

// observeLease tells o of a granted lease or renewal (group "": a
// renewal, whose lease names it).
func (n *Node) observeLease(o ApplyObserver, limit, group string, kept int64, r fsm.LeaseResult) {
	if r.Status != fsm.LeaseGranted || r.Duplicate {
		return
	}
	if group == "" {
		g, ok := n.fsm.LeaseGroup(limit, r.LeaseID)
		if !ok {
			return
		}
		group = g
	}
	o.LeaseGranted(limit, group, max(0, r.Permits-kept))
}

// Restore implements raft.FSM: the state is replaced, and the observer
// told so.
func (f waiterFSM) Restore(rc io.ReadCloser) error {
	err := f.receiptFSM.Restore(rc)
	if err == nil {
		f.n.families.Reset()
	}
	if o := f.n.cfg.Applied; o != nil && err == nil {
		o.Restored()
	}
	return err
}

var _ raft.FSM = waiterFSM{}
