package server

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/wire"
)

// TestFullNodeShedsBinaryReservesFromTheReadLoop: on a binary client
// connection to a node at its bound, a reserve is refused as overloaded
// before the node looks at its limit (one for an unknown limit gets
// CodeOverloaded, where the full path answers CodeNotFound before its
// bound), with a message that says what to do; an undecodable reserve
// and one the connection's authorizer refuses still get their own
// errors; calls other than reserves are still served; and once the load
// is gone the same frames get their own answers again.
func TestFullNodeShedsBinaryReservesFromTheReadLoop(t *testing.T) {
	c := newTestCluster(t, 1)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	server, clientSide := net.Pipe()
	go NewBinary(l).ServeWith(server, func(op byte, limit string) error {
		if limit == "secret" {
			return errors.New("limit \"secret\" is not this token's")
		}
		return nil
	})
	bc := wire.NewConn(clientSide)
	defer bc.Close()
	call := func(op byte, payload []byte) (byte, string) {
		t.Helper()
		code, p, err := bc.Call(ctx, op, payload)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		return code, string(p)
	}
	unknown := wire.EncodeReserve(wire.Reserve{Limit: "nope", Permits: 1})
	forbidden := wire.EncodeReserve(wire.Reserve{Limit: "secret", Permits: 1})
	garbage := []byte{0xff}

	full := int64(node.DefaultMaxPendingReserves)
	unload := sync.OnceFunc(holdReserves(t, l, full))
	t.Cleanup(unload)
	_, shedBefore := l.Load()
	code, msg := call(wire.OpReserve, unknown)
	if code != wire.CodeOverloaded || !strings.Contains(msg, "--max-pending-reserves") || !strings.Contains(msg, "retry") {
		t.Errorf("reserve on a full node: code %d (%s), want %d from the read loop", code, msg, wire.CodeOverloaded)
	}
	if _, shed := l.Load(); shed != shedBefore+1 {
		t.Errorf("shed count %d, want %d", shed, shedBefore+1)
	}
	for _, tc := range []struct {
		name    string
		op      byte
		payload []byte
		want    byte
	}{
		{"undecodable reserve", wire.OpReserve, garbage, wire.CodeInvalid},
		{"forbidden reserve", wire.OpReserve, forbidden, wire.CodeForbidden},
		{"open session", wire.OpOpenSession, nil, wire.CodeOK},
	} {
		if code, msg := call(tc.op, tc.payload); code != tc.want {
			t.Errorf("%s on a full node: code %d (%s), want %d", tc.name, code, msg, tc.want)
		}
	}

	unload()
	if code, msg := call(wire.OpReserve, unknown); code != wire.CodeNotFound {
		t.Errorf("reserve on an unknown limit once the load is gone: code %d (%s), want %d", code, msg, wire.CodeNotFound)
	}
}

// TestBinaryReserveTakesOneSlot: a binary reserve admitted by the read
// loop is decided with the slot the read loop took, not with a second
// one, so a node one reserve short of its bound serves it (counted
// twice, it would be refused as overloaded), and the slot comes back
// once it is answered.
func TestBinaryReserveTakesOneSlot(t *testing.T) {
	c := newTestCluster(t, 1)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: strictConfig(t, time.Millisecond, 5)})
		return err
	})
	server, clientSide := net.Pipe()
	go NewBinary(l).Serve(server)
	bc := wire.NewConn(clientSide)
	defer bc.Close()

	oneShort := int64(node.DefaultMaxPendingReserves - 1)
	defer holdReserves(t, l, oneShort)()
	code, p, err := bc.Call(ctx, wire.OpReserve, wire.EncodeReserve(wire.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	if code != wire.CodeOK {
		t.Fatalf("reserve on a node one short of its bound: code %d (%s); want %d (it takes the last slot once)", code, p, wire.CodeOK)
	}
	if got, _ := l.Load(); got != oneShort {
		t.Errorf("pending %d after the answer; want %d (its slot given back)", got, oneShort)
	}
}
