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
// parsed).
func ReserveFromWire(r wire.Reserve) fsm.Reserve {
	return fsm.Reserve{Limit: r.Limit, Permits: r.Permits, MaxWaitNanos: r.MaxWaitNanos, RequestID: r.RequestID,
		Session: fsm.SessionRef{ID: r.Session.ID, Seq: r.Session.Seq, AckedBelow: r.Session.AckedBelow}}
}

func toWireReserve(r fsm.Reserve) wire.Reserve {
	return wire.Reserve{Limit: r.Limit, Permits: r.Permits, MaxWaitNanos: r.MaxWaitNanos, RequestID: r.RequestID,
		Session: wire.SessionRef{ID: r.Session.ID, Seq: r.Session.Seq, AckedBelow: r.Session.AckedBelow}}
}

// toWireResult drops what does not travel (NowNanos, OnArrival).
func toWireResult(res fsm.ReserveResult) wire.ReserveResult {
	return wire.ReserveResult{Status: wire.Status(res.Status), WaitNanos: res.WaitNanos, RetryAfterNanos: res.RetryAfterNanos,
		ExpiresInNanos: res.ExpiresInNanos, SpacingNanos: res.SpacingNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

func fromWireResult(res wire.ReserveResult) fsm.ReserveResult {
	return fsm.ReserveResult{Status: fsm.Status(res.Status), WaitNanos: res.WaitNanos, RetryAfterNanos: res.RetryAfterNanos,
		ExpiresInNanos: res.ExpiresInNanos, SpacingNanos: res.SpacingNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

func toWireSession(res fsm.SessionResult) wire.SessionResult {
	return wire.SessionResult{ID: res.ID, IdleNanos: res.IdleNanos}
}

func fromWireSession(res wire.SessionResult) fsm.SessionResult {
	return fsm.SessionResult{ID: res.ID, IdleNanos: res.IdleNanos}
}
