package server

import (
	"reflect"
	"testing"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// TestWireReserveRoundTrip: a reserve survives the trip through the
// protocol's types (what travels of it; a session's reserve gets its
// owner from the connection's token, any other none).
func TestWireReserveRoundTrip(t *testing.T) {
	for _, r := range []fsm.Reserve{
		{Limit: "api", Permits: 3, MaxWaitNanos: 7, RequestID: "r"},
		{Limit: "api", Permits: 3, MaxWaitNanos: 7, Session: fsm.SessionRef{ID: 1, Seq: 2, AckedBelow: 3}, Owner: "alice"},
	} {
		if got := reserveFromWire(toWireReserve(r), "alice"); !reflect.DeepEqual(got, r) {
			t.Errorf("reserve %+v came back as %+v", r, got)
		}
	}
}

// toWireReserve is a reserve as a binary client sends it.
func toWireReserve(r fsm.Reserve) wire.Reserve {
	return wire.Reserve{Limit: r.Limit, Permits: r.Permits, MaxWaitNanos: r.MaxWaitNanos, RequestID: r.RequestID,
		Session: wire.SessionRef{ID: r.Session.ID, Seq: r.Session.Seq, AckedBelow: r.Session.AckedBelow}}
}
