package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// TestServeClientLeaseBatch: a batch of lease commands sent to a follower
// is decided command by command: valid opens and renewals are granted (and
// a retried renewal is the stored decision), and each bad command gets the
// code and message its own call gets (an unknown limit, a limit that is
// not leased, garbage, a command the Authorizer refuses) without stopping
// the others; a payload that is not a batch is refused whole and reaches
// nothing of the register.
func TestServeClientLeaseBatch(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	f := c.followers(l)[0]
	putLeasedLimits(t, ctx, l)

	// Returns are refused by the connection's Authorizer, as a token
	// without the worker role would be for every lease command.
	allow := func(op byte, _ string) error {
		if op == wire.OpReturn {
			return errors.New("auth: this token may not return leases")
		}
		return nil
	}
	server, clientSide := net.Pipe()
	go NewBinary(f).ServeWith(server, allow)
	bc := wire.NewConn(clientSide)
	defer bc.Close()
	batch := func(calls []wire.LeaseCall) []wire.LeaseAnswer {
		t.Helper()
		p, err := wire.EncodeLeaseBatch(calls)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		for {
			code, resp, err := bc.Call(ctx, wire.OpLeaseBatch, p)
			if err != nil || code != wire.CodeOK {
				t.Fatalf("batch call: code %d %q, %v", code, resp, err)
			}
			answers, err := wire.DecodeLeaseBatchAnswers(resp, len(calls))
			if err != nil {
				t.Fatalf("decode answers: %v", err)
			}
			retry := false
			for _, a := range answers {
				retry = retry || a.Code == wire.CodeNoLeader // a leader change on a loaded run
			}
			if !retry {
				return answers
			}
		}
	}
	single := func(op byte, payload []byte) wire.LeaseAnswer {
		t.Helper()
		code, resp, err := bc.Call(ctx, op, payload)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		return wire.LeaseAnswer{Code: code, Payload: resp}
	}
	result := func(what string, a wire.LeaseAnswer) wire.LeaseResult {
		t.Helper()
		if a.Code != wire.CodeOK {
			t.Fatalf("%s: code %d %q", what, a.Code, a.Payload)
		}
		res, err := wire.DecodeLeaseResult(a.Payload)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return res
	}
	uniq := func(s string) string { return fmt.Sprintf("%s-%d", s, time.Now().UnixNano()) }
	const ttl = int64(20 * time.Second)

	opens := make([]wire.LeaseCall, 3)
	for i := range opens {
		opens[i] = wire.LeaseCall{Op: wire.OpLease, Payload: wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "api", Holder: fmt.Sprintf("h%d", i), Group: "g", DemandMilli: 10_000, TTLNanos: ttl, RequestID: uniq("l")})}
	}
	grants := make([]wire.LeaseResult, len(opens))
	for i, a := range batch(opens) {
		grants[i] = result(fmt.Sprintf("open %d", i), a)
		if grants[i].Status != wire.LeaseGranted || grants[i].Epoch != 1 {
			t.Fatalf("open %d: %+v", i, grants[i])
		}
	}

	renew := wire.EncodeLeaseRenew(wire.LeaseRenew{LeaseReport: wire.LeaseReport{Limit: "api", LeaseID: grants[0].LeaseID, Epoch: 1, Spent: grants[0].Permits, RequestID: uniq("r")}, DemandMilli: 10_000, TTLNanos: ttl})
	bad := []wire.LeaseCall{
		{Op: wire.OpLease, Payload: wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "nope", Holder: "h9", Group: "g", TTLNanos: ttl})},
		{Op: wire.OpLease, Payload: wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "plain", Holder: "h9", Group: "g", TTLNanos: ttl})},
		{Op: wire.OpRenew, Payload: []byte{0xff}},
		{Op: wire.OpReturn, Payload: wire.EncodeLeaseReturn(wire.LeaseReport{Limit: "api", LeaseID: grants[1].LeaseID, Epoch: 1, RequestID: uniq("x")})},
	}
	before, _ := leasePool(l, "api")
	calls := append([]wire.LeaseCall{{Op: wire.OpRenew, Payload: renew}}, bad...)
	calls = append(calls, wire.LeaseCall{Op: wire.OpRenew, Payload: renew}) // the same renewal again: one decision
	answers := batch(calls)
	first, again := result("renew", answers[0]), result("renew again", answers[len(answers)-1])
	if first.Status != wire.LeaseGranted || first.Epoch != 2 || again.Epoch != 2 || again.Permits != first.Permits || first.Duplicate == again.Duplicate {
		t.Errorf("a renewal sent twice in one batch: %+v and %+v; want one decision, the other its duplicate", first, again)
	}
	for i, c := range bad {
		got, want := answers[1+i], single(c.Op, c.Payload)
		if got.Code == wire.CodeOK || got.Code != want.Code || string(got.Payload) != string(want.Payload) {
			t.Errorf("bad command %d in a batch: code %d %q; its own call: code %d %q", i, got.Code, got.Payload, want.Code, want.Payload)
		}
	}
	if got := answers[4]; got.Code != wire.CodeForbidden || !strings.Contains(string(got.Payload), "may not return") {
		t.Errorf("a refused return in a batch: code %d %q; want CodeForbidden with the Authorizer's reason", got.Code, got.Payload)
	}
	// The same renewal in a batch sent to the leader (a relay retrying a
	// batch whose answer it lost at another node): the stored decision.
	ls, lc := net.Pipe()
	go NewBinary(l).Serve(ls)
	lbc := wire.NewConn(lc)
	defer lbc.Close()
	p, _ := wire.EncodeLeaseBatch([]wire.LeaseCall{{Op: wire.OpRenew, Payload: renew}})
	code, resp, err := lbc.Call(ctx, wire.OpLeaseBatch, p)
	if err != nil || code != wire.CodeOK {
		t.Fatalf("the batch again at the leader: code %d %q, %v", code, resp, err)
	}
	replay, err := wire.DecodeLeaseBatchAnswers(resp, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := result("renew at the leader", replay[0]); !r.Duplicate || r.Epoch != first.Epoch || r.Permits != first.Permits {
		t.Errorf("a renewal retried in a batch at another node: %+v; want the stored decision %+v", r, first)
	}
	after, _ := leasePool(l, "api")
	if after.LeasesOpened != before.LeasesOpened || after.Returns != before.Returns || after.Renewals != before.Renewals+1 {
		t.Errorf("the batch's rejected commands reached the register: %+v, then %+v (want one renewal more)", before, after)
	}

	for name, p := range map[string][]byte{"empty": {0}, "a reserve inside": {1, wire.OpReserve, 0}, "garbage": {0xff}} {
		code, msg, err := bc.Call(ctx, wire.OpLeaseBatch, p)
		if err != nil || code != wire.CodeInvalid || !strings.Contains(string(msg), "lease batch") {
			t.Errorf("%s: code %d %q, %v; want CodeInvalid naming the lease batch", name, code, msg, err)
		}
	}
	if final, _ := leasePool(l, "api"); final != after {
		t.Errorf("malformed batches reached the register: %+v, then %+v", after, final)
	}
}

// TestLeaseBatchCommandsWaitForASlot: a node decides at most its slots'
// worth of batched commands at once; a batch whose commands find no slot
// before its call's deadline answers each of them overloaded (code 8:
// retry with the same request ID) and reaches nothing of the register;
// with slots free the same batch is decided.
func TestLeaseBatchCommandsWaitForASlot(t *testing.T) {
	c := newTestCluster(t, 1)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	putLeasedLimits(t, ctx, l)
	payload, err := wire.EncodeLeaseBatch([]wire.LeaseCall{
		{Op: wire.OpLease, Payload: wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "api", Holder: "h1", Group: "g", TTLNanos: int64(20 * time.Second), RequestID: "l-1"})},
		{Op: wire.OpLease, Payload: wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: "api", Holder: "h2", Group: "g", TTLNanos: int64(20 * time.Second), RequestID: "l-2"})},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := NewBinary(l)
	for range cap(b.batchSlots) { // every slot taken
		b.batchSlots <- struct{}{}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	resp, err := b.leaseBatch(short, payload, nil)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	answers, err := wire.DecodeLeaseBatchAnswers(resp, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		if a.Code != wire.CodeOverloaded || !strings.Contains(string(a.Payload), "at most 8192") {
			t.Errorf("command %d with no slot free: code %d %q; want overloaded naming the bound", i, a.Code, a.Payload)
		}
	}
	if pool, _ := leasePool(l, "api"); pool.LeasesOpened != 0 {
		t.Errorf("commands without a slot reached the register: %+v", pool)
	}
	drain := time.NewTimer(5 * time.Second)
	defer drain.Stop()
	for range cap(b.batchSlots) {
		select {
		case <-b.batchSlots:
		case <-drain.C:
			t.Fatal("fewer slots held than were taken: a command without a slot gave one back")
		}
	}
	resp, err = b.leaseBatch(ctx, payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	if answers, err = wire.DecodeLeaseBatchAnswers(resp, 2); err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		if a.Code != wire.CodeOK {
			t.Errorf("command %d with slots free: code %d %q", i, a.Code, a.Payload)
		}
	}
}
