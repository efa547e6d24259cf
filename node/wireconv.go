package node

import (
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// wireconv.go: the binary protocol's reserve vocabulary (package wire, which
// clients speak without the server's packages) to and from the register's.
// The two Status numberings are the same (TestWireStatusesAreTheRegisters).

// ReserveFromWire is the register's reserve for a reserve in the
// protocol's vocabulary (the binary protocol's, and the HTTP body's once
// parsed) sent by owner: the API token's name, "" without tokens. A
// reserve of a session carries its owner, so that the register answers it
// only on a session the same token opened (fsm.Reserve.Owner); the
// protocol itself never carries one: a client is who its token says.
func ReserveFromWire(r wire.Reserve, owner string) fsm.Reserve {
	q := fsm.Reserve{Limit: r.Limit, Permits: r.Permits, MaxWaitNanos: r.MaxWaitNanos, RequestID: r.RequestID,
		Session: fsm.SessionRef{ID: r.Session.ID, Seq: r.Session.Seq, AckedBelow: r.Session.AckedBelow}}
	if q.Session.ID != 0 {
		q.Owner = owner
	}
	return q
}

func toWireReserve(r fsm.Reserve) wire.Reserve {
	return wire.Reserve{Limit: r.Limit, Permits: r.Permits, MaxWaitNanos: r.MaxWaitNanos, RequestID: r.RequestID,
		Session: wire.SessionRef{ID: r.Session.ID, Seq: r.Session.Seq, AckedBelow: r.Session.AckedBelow}}
}

// toWireResult drops what does not travel (NowNanos, OnArrival).
func toWireResult(res fsm.ReserveResult) wire.ReserveResult {
	return wire.ReserveResult{Status: wire.ReserveStatus(res.Status), WaitNanos: res.WaitNanos, RetryAfterNanos: res.RetryAfterNanos,
		ExpiresInNanos: res.ExpiresInNanos, SpacingNanos: res.SpacingNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

func fromWireResult(res wire.ReserveResult) fsm.ReserveResult {
	return fsm.ReserveResult{Status: fsm.Status(res.Status), WaitNanos: res.WaitNanos, RetryAfterNanos: res.RetryAfterNanos,
		ExpiresInNanos: res.ExpiresInNanos, SpacingNanos: res.SpacingNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

func toWireSession(res fsm.SessionResult) wire.SessionResult {
	return wire.SessionResult{ID: res.ID, IdleNanos: res.IdleNanos, RetryAfterNanos: res.RetryAfterNanos, Detail: res.Detail}
}

func fromWireSession(res wire.SessionResult) fsm.SessionResult {
	return fsm.SessionResult{ID: res.ID, IdleNanos: res.IdleNanos, RetryAfterNanos: res.RetryAfterNanos, Detail: res.Detail}
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

// toWireLeaseResult is the register's lease outcome as the protocol's.
func toWireLeaseResult(res fsm.LeaseResult) wire.LeaseResult {
	return wire.LeaseResult{Status: wire.LeaseStatus(res.Status), LeaseID: res.LeaseID, Epoch: res.Epoch, Permits: res.Permits,
		ExpiresInNanos: res.ExpiresInNanos, ShareMilli: res.ShareMilliPermitsPerSec, CreditedPermits: res.CreditedPermits,
		RetryAfterNanos: res.RetryAfterNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}
