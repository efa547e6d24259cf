package node

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node/binproto"
)

// TestServeClientOnFollower: a binary client connected to a follower gets
// decisions (forwarded to the leader), clear codes for an unknown limit
// and invalid input, and only reserves are served.
func TestServeClientOnFollower(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	f := c.followers(l)[0]
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, "api", strictConfig(t, 100*time.Millisecond, 5)); return err })

	server, clientSide := net.Pipe()
	go f.ServeClient(server)
	bc := binproto.NewConn(clientSide)
	defer bc.Close()

	call := func(op byte, payload []byte) (byte, []byte) {
		t.Helper()
		code, p, err := bc.Call(ctx, op, payload)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		return code, p
	}
	reserve := func(q fsm.Reserve) []byte { return binproto.EncodeReserve(q) }
	id := func(k int) string { return fmt.Sprintf("bin-%d-%d", k, time.Now().UnixNano()) }

	code, p := call(binproto.OpReserve, reserve(fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second), RequestID: id(1)}))
	if code != binproto.CodeOK {
		t.Fatalf("reserve: code %d %s", code, p)
	}
	if res, err := binproto.DecodeReserveResult(p); err != nil || res.Status != fsm.Granted {
		t.Fatalf("reserve result %+v %v", res, err)
	}
	for _, tc := range []struct {
		name    string
		op      byte
		payload []byte
		want    byte
	}{
		{"unknown limit", binproto.OpReserve, reserve(fsm.Reserve{Limit: "nope", Permits: 1, RequestID: id(2)}), binproto.CodeNotFound},
		{"zero permits", binproto.OpReserve, reserve(fsm.Reserve{Limit: "api", Permits: 0, RequestID: id(3)}), binproto.CodeInvalid},
		{"bad name", binproto.OpReserve, reserve(fsm.Reserve{Limit: "a b", Permits: 1}), binproto.CodeInvalid},
		{"garbage", binproto.OpReserve, []byte{0xff}, binproto.CodeInvalid},
		{"admin op", binproto.OpDelete, []byte{3, 'a', 'p', 'i'}, binproto.CodeInvalid},
	} {
		if code, p := call(tc.op, tc.payload); code != tc.want {
			t.Errorf("%s: code %d (%s), want %d", tc.name, code, p, tc.want)
		}
	}
	if info, ok := l.fsm.Limit("api"); !ok || info.GrantedRequests+info.RefusedRequests != 1 {
		t.Fatalf("rejected calls reached the register or the limit was deleted: %+v %v", info, ok)
	}
}
