package node

import (
	"testing"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// TestWireStatusesAreTheRegisters: the binary protocol numbers a reserve's
// outcomes as the register does, so that converting one is a cast.
func TestWireStatusesAreTheRegisters(t *testing.T) {
	for _, c := range []struct {
		f fsm.ReserveStatus
		w wire.ReserveStatus
	}{
		{fsm.Granted, wire.Granted}, {fsm.Refused, wire.Refused}, {fsm.UnknownLimit, wire.UnknownLimit},
		{fsm.Invalid, wire.Invalid}, {fsm.SessionExpired, wire.SessionExpired}, {fsm.Busy, wire.Busy}, {fsm.KeysFull, wire.KeysFull},
	} {
		if uint8(c.f) != uint8(c.w) {
			t.Errorf("fsm status %d is wire status %d", c.f, c.w)
		}
	}
}

// TestWireConversionsRoundTrip: a reserve's, a session's and a lease
// command's answers survive the trip through the protocol's types (what travels of it; the reserve's own trip
// is transport/server's TestWireReserveRoundTrip).
func TestWireConversionsRoundTrip(t *testing.T) {
	res := fsm.ReserveResult{Status: fsm.Granted, WaitNanos: 1, RetryAfterNanos: 2, ExpiresInNanos: 3, SpacingNanos: 4, Duplicate: true, Detail: "d"}
	if got := fromWireResult(ToWireReserveResult(res)); got != res {
		t.Errorf("result %+v came back as %+v", res, got)
	}
	for _, s := range []fsm.SessionResult{{ID: 9, IdleNanos: 10}, {RetryAfterNanos: 11, Detail: "full"}} {
		if got := fromWireSession(ToWireSessionResult(s)); got != s {
			t.Errorf("session %+v came back as %+v", s, got)
		}
	}
	lease := fsm.LeaseResult{Status: fsm.LeaseGranted, LeaseID: 1, Epoch: 2, Permits: 3, ExpiresInNanos: 4, ShareMilliPermitsPerSec: 5,
		CreditedPermits: 6, RetryAfterNanos: 7, Duplicate: true, Detail: "d"}
	if got := fromWireLeaseResult(ToWireLeaseResult(lease)); got != lease {
		t.Errorf("lease result %+v came back as %+v", lease, got)
	}
}

// TestWireLeaseStatusesAreTheRegisters: the binary protocol numbers a
// lease command's outcomes as the register does.
func TestWireLeaseStatusesAreTheRegisters(t *testing.T) {
	for _, c := range []struct {
		f fsm.LeaseStatus
		w wire.LeaseStatus
	}{
		{fsm.LeaseGranted, wire.LeaseGranted}, {fsm.LeaseRefused, wire.LeaseRefused}, {fsm.LeaseUnknownLimit, wire.LeaseUnknownLimit},
		{fsm.LeaseInvalid, wire.LeaseInvalid}, {fsm.LeaseFenced, wire.LeaseFenced}, {fsm.LeaseReturned, wire.LeaseReturned},
	} {
		if uint8(c.f) != uint8(c.w) {
			t.Errorf("fsm lease status %d is wire status %d", c.f, c.w)
		}
	}
}
