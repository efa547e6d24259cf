package server

import (
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// wireconv.go: a client's requests in the protocol's vocabulary (package
// wire: the binary protocol's, and the HTTP reserve body's once parsed)
// read into the register's commands; the node validates them there. The
// register's answers go the other way with node.ToWireReserveResult and
// its siblings, which node-to-node forwarding uses too.

// reserveFromWire is the register's reserve for a reserve in the
// protocol's vocabulary sent by owner: the API token's name, "" without
// tokens. A reserve of a session carries its owner, so that the register
// answers it only on a session the same token opened (fsm.Reserve.Owner);
// the protocol itself never carries one: a client is who its token says.
func reserveFromWire(r wire.Reserve, owner string) fsm.Reserve {
	q := fsm.Reserve{Limit: r.Limit, Permits: r.Permits, MaxWaitNanos: r.MaxWaitNanos, RequestID: r.RequestID,
		Session: fsm.SessionRef{ID: r.Session.ID, Seq: r.Session.Seq, AckedBelow: r.Session.AckedBelow}}
	if q.Session.ID != 0 {
		q.Owner = owner
	}
	return q
}

// leaseFromWire is a binary client's lease as the register's command; a
// weight of 0 is the default, 1 (as an HTTP body without "weight").
func leaseFromWire(q wire.LeaseOpen) fsm.Lease {
	w := q.Weight
	if w == 0 {
		w = 1
	}
	return fsm.Lease{Limit: q.Limit, Holder: q.Holder, Group: q.Group, Weight: w, DemandMilliPermitsPerSec: q.DemandMilli,
		TTLNanos: q.TTLNanos, RequestID: q.RequestID}
}

// reportFromWire is a binary client's report on a grant.
func reportFromWire(q wire.LeaseReport) fsm.Report {
	return fsm.Report{Limit: q.Limit, LeaseID: q.LeaseID, Epoch: q.Epoch, SpentPermits: q.Spent, StolenOutPermits: q.StolenOut,
		StolenInPermits: q.StolenIn}
}

// renewFromWire is a binary client's renewal.
func renewFromWire(q wire.LeaseRenew) fsm.Renew {
	return fsm.Renew{Report: reportFromWire(q.LeaseReport), KeptPermits: q.Kept, DemandMilliPermitsPerSec: q.DemandMilli,
		TTLNanos: q.TTLNanos, RequestID: q.RequestID}
}
