package node

import (
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// wireconv.go: the register's results in the binary protocol's vocabulary
// (package wire, which clients speak without the server's packages) and
// back: the codec of forwarded answers uses them (resultcodec.go), and the
// server's binary edge answers its clients with them. The numberings of
// the statuses are the register's (TestWireStatusesAreTheRegisters,
// TestWireLeaseStatusesAreTheRegisters). A client's requests are read
// into the register's commands by the edge (package transport/server).

// ToWireReserveResult is the register's reserve result in the protocol's
// vocabulary, as a binary client or a forwarding follower reads it; what
// does not travel (NowNanos, OnArrival, the reservation's fields) is
// dropped.
func ToWireReserveResult(res fsm.ReserveResult) wire.ReserveResult {
	return wire.ReserveResult{Status: wire.ReserveStatus(res.Status), WaitNanos: res.WaitNanos, RetryAfterNanos: res.RetryAfterNanos,
		ExpiresInNanos: res.ExpiresInNanos, SpacingNanos: res.SpacingNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

func fromWireResult(res wire.ReserveResult) fsm.ReserveResult {
	return fsm.ReserveResult{Status: fsm.Status(res.Status), WaitNanos: res.WaitNanos, RetryAfterNanos: res.RetryAfterNanos,
		ExpiresInNanos: res.ExpiresInNanos, SpacingNanos: res.SpacingNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

// ToWireSessionResult is the register's answer to the opening of a
// session in the protocol's vocabulary.
func ToWireSessionResult(res fsm.SessionResult) wire.SessionResult {
	return wire.SessionResult{ID: res.ID, IdleNanos: res.IdleNanos, RetryAfterNanos: res.RetryAfterNanos, Detail: res.Detail}
}

func fromWireSession(res wire.SessionResult) fsm.SessionResult {
	return fsm.SessionResult{ID: res.ID, IdleNanos: res.IdleNanos, RetryAfterNanos: res.RetryAfterNanos, Detail: res.Detail}
}

// ToWireLeaseResult is the register's lease outcome as the protocol's.
func ToWireLeaseResult(res fsm.LeaseResult) wire.LeaseResult {
	return wire.LeaseResult{Status: wire.LeaseStatus(res.Status), LeaseID: res.LeaseID, Epoch: res.Epoch, Permits: res.Permits,
		ExpiresInNanos: res.ExpiresInNanos, ShareMilli: res.ShareMilliPermitsPerSec, CreditedPermits: res.CreditedPermits,
		RetryAfterNanos: res.RetryAfterNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

// fromWireLeaseResult is a lease outcome read in the protocol's
// vocabulary (the leader's answer to a forwarded lease command).
func fromWireLeaseResult(res wire.LeaseResult) fsm.LeaseResult {
	return fsm.LeaseResult{Status: fsm.LeaseStatus(res.Status), LeaseID: res.LeaseID, Epoch: res.Epoch, Permits: res.Permits,
		ExpiresInNanos: res.ExpiresInNanos, ShareMilliPermitsPerSec: res.ShareMilli, CreditedPermits: res.CreditedPermits,
		RetryAfterNanos: res.RetryAfterNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}
