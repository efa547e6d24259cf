package server

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
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
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: cfg}); return err })

	server, clientSide := net.Pipe()
	go NewBinary(f).Serve(server)
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
		{"forwarded batch", wire.OpCommandBatch, []byte{1, 2, 1, 2}, wire.CodeInvalid},
	} {
		if code, p := call(tc.op, tc.payload); code != tc.want {
			t.Errorf("%s: code %d (%s), want %d", tc.name, code, p, tc.want)
		}
	}
	if info, ok := limitInfo(l, "api"); !ok || info.GrantedRequests+info.RefusedRequests != 1 {
		t.Fatalf("rejected calls reached the register or the limit was deleted: %+v %v", info, ok)
	}
	// Each reserve held a slot from its read (admitAtRead), the granted
	// one and every rejected one: all were given back with the answers.
	if held, _ := f.Load(); held != 0 {
		t.Errorf("follower holds %d reserves after every call was answered; want 0", held)
	}
}

// TestServeClientLeases: a binary client on a follower opens, renews and
// returns a lease (forwarded to the leader); a retried renewal is the
// stored decision, a stale epoch is fenced; an unknown limit, a limit that
// is not leased, invalid values and garbage are clear error codes that
// reach nothing of the register.
func TestServeClientLeases(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	f := c.followers(l)[0]
	putLeasedLimits(t, ctx, l)

	server, clientSide := net.Pipe()
	go NewBinary(f).Serve(server)
	bc := wire.NewConn(clientSide)
	defer bc.Close()
	uniq := func(s string) string { return fmt.Sprintf("%s-%d", s, time.Now().UnixNano()) }
	call := func(op byte, payload []byte) (byte, wire.LeaseResult, string) {
		t.Helper()
		for {
			code, p, err := bc.Call(ctx, op, payload)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if code == wire.CodeNoLeader { // a leader change under a loaded test run
				continue
			}
			if code != wire.CodeOK {
				return code, wire.LeaseResult{}, string(p)
			}
			res, err := wire.DecodeLeaseResult(p)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			return code, res, ""
		}
	}
	const ttl = int64(20 * time.Second)
	_, g, _ := call(wire.OpLease, wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "api", Holder: "h1", Group: "g1", DemandMilli: 50_000, TTLNanos: ttl, RequestID: uniq("l")}))
	if g.Status != wire.LeaseGranted || g.LeaseID == 0 || g.Epoch != 1 || g.Permits < 0 || g.ExpiresInNanos != ttl {
		t.Fatalf("lease: %+v", g)
	}
	// The pool mints one permit a millisecond of cluster time from its
	// policy's entry: a lease that followed within the millisecond (a fast
	// run) holds none yet. Renewing, spending nothing, until it holds one
	// waits on the register's own time.
	for g.Permits == 0 {
		empty := wire.LeaseRenew{LeaseReport: wire.LeaseReport{Limit: "api", LeaseID: g.LeaseID, Epoch: g.Epoch, RequestID: uniq("e")},
			DemandMilli: 50_000, TTLNanos: ttl}
		_, next, _ := call(wire.OpRenew, wire.EncodeLeaseRenew(empty))
		if next.Status != wire.LeaseGranted || next.Epoch != g.Epoch+1 {
			t.Fatalf("renewal of an empty grant: %+v (lease %+v)", next, g)
		}
		g = next
	}
	renew := wire.LeaseRenew{LeaseReport: wire.LeaseReport{Limit: "api", LeaseID: g.LeaseID, Epoch: g.Epoch, Spent: 1, RequestID: uniq("r")},
		Kept: g.Permits - 1, DemandMilli: 50_000, TTLNanos: ttl}
	_, r, _ := call(wire.OpRenew, wire.EncodeLeaseRenew(renew))
	if r.Status != wire.LeaseGranted || r.Epoch != g.Epoch+1 || r.Permits < g.Permits-1 || r.Duplicate {
		t.Fatalf("renew: %+v (lease %+v)", r, g)
	}
	if _, again, _ := call(wire.OpRenew, wire.EncodeLeaseRenew(renew)); !again.Duplicate || again.Epoch != r.Epoch || again.Permits != r.Permits {
		t.Fatalf("retried renew: %+v, want the stored decision %+v", again, r)
	}
	stale := renew
	stale.RequestID = uniq("stale")
	if _, fenced, _ := call(wire.OpRenew, wire.EncodeLeaseRenew(stale)); fenced.Status != wire.LeaseFenced || fenced.Detail == "" {
		t.Fatalf("stale renew: %+v, want fenced with a reason", fenced)
	}
	ret := wire.LeaseReport{Limit: "api", LeaseID: g.LeaseID, Epoch: r.Epoch, Spent: r.Permits, RequestID: uniq("ret")}
	if _, done, _ := call(wire.OpReturn, wire.EncodeLeaseReturn(ret)); done.Status != wire.LeaseReturned {
		t.Fatalf("return: %+v", done)
	}
	before, _ := leasePool(l, "api")
	for _, tc := range []struct {
		name    string
		op      byte
		payload []byte
		want    byte
		mention string
	}{
		{"unknown limit", wire.OpLease, wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "nope", Holder: "h2", Group: "g", TTLNanos: ttl}), wire.CodeNotFound, "nope"},
		{"not leased", wire.OpLease, wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "plain", Holder: "h2", Group: "g", TTLNanos: ttl}), wire.CodeInvalid, "not leased"},
		{"bad holder", wire.OpLease, wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "api", Holder: "a b", Group: "g", TTLNanos: ttl}), wire.CodeInvalid, "holder"},
		{"short TTL", wire.OpLease, wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "api", Holder: "h2", Group: "g", TTLNanos: 1}), wire.CodeInvalid, "TTL"},
		{"negative spent", wire.OpReturn, wire.EncodeLeaseReturn(wire.LeaseReport{Limit: "api", LeaseID: 1, Epoch: 1, Spent: -1}), wire.CodeInvalid, "spent"},
		{"garbage", wire.OpRenew, []byte{0xff}, wire.CodeInvalid, "renew"},
	} {
		if code, _, msg := call(tc.op, tc.payload); code != tc.want || !strings.Contains(strings.ToLower(msg), strings.ToLower(tc.mention)) {
			t.Errorf("%s: code %d (%s), want %d mentioning %q", tc.name, code, msg, tc.want, tc.mention)
		}
	}
	if after, _ := leasePool(l, "api"); after.LeasesOpened != before.LeasesOpened || after.Renewals != before.Renewals || after.Returns != before.Returns {
		t.Errorf("rejected calls reached the register: %+v, then %+v", before, after)
	}
}

// TestServeClientRefusesAFrameOverTheClientCap: a node reads frames of at
// most wire.MaxClientFrame (64 KiB) from a binary client, not the 4 MiB
// the nodes allow each other; a larger frame closes the connection
// unanswered.
func TestServeClientRefusesAFrameOverTheClientCap(t *testing.T) {
	c := newTestCluster(t, 1)
	l := c.leader()
	server, conn := net.Pipe()
	go NewBinary(l).Serve(server)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	go func() {
		bw := bufio.NewWriter(conn)
		_ = wire.WriteFrame(bw, wire.Frame{ID: 1, Kind: wire.OpReserve, Payload: make([]byte, wire.MaxClientFrame)})
		_ = bw.Flush()
	}()
	if f, err := wire.ReadFrame(conn); err == nil {
		t.Fatalf("a frame of %d bytes' payload was answered (code %d, %q): want the connection closed", wire.MaxClientFrame, f.Kind, f.Payload)
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection stayed open for 5 s after a frame over the cap: %v", err)
	}
}
