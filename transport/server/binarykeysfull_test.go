package server

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// TestBinaryKeysFull: over the binary protocol, a reserve that would
// create a templated key past its template's max keys is answered
// wire.KeysFull with the cap named and a retry time, counted keys_full,
// as HTTP's 429; the key under the cap is created and granted.
func TestBinaryKeysFull(t *testing.T) {
	c := newTestCluster(t, 1)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error {
		_, err := l.PutTemplate(ctx, fsm.PutTemplate{Prefix: "one", Config: cfg, IdleNanos: int64(time.Minute), MaxKeys: 1})
		return err
	})
	m := NewMetrics(prometheus.NewRegistry(), nil)
	server, clientSide := net.Pipe()
	go NewBinary(l).WithMetrics(m).Serve(server)
	bc := wire.NewConn(clientSide)
	defer bc.Close()
	reserve := func(limit string) wire.ReserveResult {
		t.Helper()
		code, p, err := bc.Call(ctx, wire.OpReserve, wire.EncodeReserve(wire.Reserve{Limit: limit, Permits: 1}))
		if err != nil || code != wire.CodeOK {
			t.Fatalf("reserve %s: code %d %s %v", limit, code, p, err)
		}
		res, err := wire.DecodeReserveResult(p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := reserve("one:a"); res.Status != wire.Granted {
		t.Fatalf("the first key: %+v", res)
	}
	res := reserve("one:b")
	if res.Status != wire.KeysFull || res.RetryAfterNanos <= 0 || !strings.Contains(res.Detail, "(allowed: at most 1, its max keys)") {
		t.Fatalf("a key past the cap: %+v, want KeysFull naming the cap with a retry time", res)
	}
	if got := testutil.ToFloat64(m.proto[protoBinary].reserves[outcomeKeysFull]); got != 1 {
		t.Fatalf("keys_full counted %v times, want 1", got)
	}
	if _, ok := limitInfo(l, "one:b"); ok {
		t.Fatal("the refused key was created")
	}
}
