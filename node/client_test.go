package node

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/transport/wire"
)

// TestServeClientOnFollower: a binary client connected to a follower gets
// decisions (forwarded to the leader), clear codes for an unknown limit
// and invalid input, and only reserves are served.
func TestServeClientOnFollower(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	f := c.followers(l)[0]
	// An expiry of a second: a grant held on a loaded machine (the race
	// build, a forwarded commit) longer than strictConfig's tenth of an
	// interval is answered as a refusal, which is not what this test is
	// about (CI saw one).
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: 100 * time.Millisecond, MaxReserved: 5, Expiry: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, "api", cfg); return err })

	server, clientSide := net.Pipe()
	go f.ServeClient(server)
	bc := wire.NewConn(clientSide)
	defer bc.Close()

	call := func(op byte, payload []byte) (byte, []byte) {
		t.Helper()
		code, p, err := bc.Call(ctx, op, payload)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		return code, p
	}
	reserve := func(q wire.Reserve) []byte { return wire.EncodeReserve(q) }
	id := func(k int) string { return fmt.Sprintf("bin-%d-%d", k, time.Now().UnixNano()) }

	code, p := call(wire.OpReserve, reserve(wire.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second), RequestID: id(1)}))
	if code != wire.CodeOK {
		t.Fatalf("reserve: code %d %s", code, p)
	}
	if res, err := wire.DecodeReserveResult(p); err != nil || res.Status != wire.Granted {
		t.Fatalf("reserve result %+v %v", res, err)
	}
	for _, tc := range []struct {
		name    string
		op      byte
		payload []byte
		want    byte
	}{
		{"unknown limit", wire.OpReserve, reserve(wire.Reserve{Limit: "nope", Permits: 1, RequestID: id(2)}), wire.CodeNotFound},
		{"zero permits", wire.OpReserve, reserve(wire.Reserve{Limit: "api", Permits: 0, RequestID: id(3)}), wire.CodeInvalid},
		{"bad name", wire.OpReserve, reserve(wire.Reserve{Limit: "a b", Permits: 1}), wire.CodeInvalid},
		{"garbage", wire.OpReserve, []byte{0xff}, wire.CodeInvalid},
		{"forwarding op", wire.OpCommand, []byte{1, 2}, wire.CodeInvalid},
	} {
		if code, p := call(tc.op, tc.payload); code != tc.want {
			t.Errorf("%s: code %d (%s), want %d", tc.name, code, p, tc.want)
		}
	}
	if info, ok := l.fsm.Limit("api"); !ok || info.GrantedRequests+info.RefusedRequests != 1 {
		t.Fatalf("rejected calls reached the register or the limit was deleted: %+v %v", info, ok)
	}
}
