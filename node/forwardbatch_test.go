package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// leasedCluster starts a 3-node cluster with a leased limit "api" and
// returns its leader and a follower.
func leasedCluster(t *testing.T) (l, f *Node, ctx context.Context) {
	t.Helper()
	c := newTestCluster(t, 3)
	l = c.leader()
	f = c.followers(l)[0]
	ctx = ctxTimeout(t, 60*time.Second)
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: strictConfig(t, time.Millisecond, 5)})
		return err
	})
	retryNoLeader(t, func() error {
		_, err := l.PutLeasePolicy(ctx, fsm.LeasePolicy{Limit: "api", Leased: true})
		return err
	})
	return l, f, ctx
}

// openAndRenewAll opens a lease for each of holders holders, holder i
// through node(i), all at once, then renews them all at once, and checks
// every answer: the holder's own lease, at epoch 1 and then 2.
func openAndRenewAll(t *testing.T, ctx context.Context, node func(i int) *Node, holders int) {
	t.Helper()
	const ttl = int64(20 * time.Second)
	grants := make([]fsm.LeaseResult, holders)
	all := func(what string, op func(i int) (fsm.LeaseResult, error)) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, holders)
		for i := range holders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := op(i)
				if err == nil && res.Status != fsm.LeaseGranted {
					err = fmt.Errorf("answered %+v", res)
				}
				if err != nil {
					errs <- fmt.Errorf("%s %d: %w", what, i, err)
					return
				}
				grants[i] = res
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	all("lease", func(i int) (fsm.LeaseResult, error) {
		return node(i).Lease(ctx, fsm.Lease{Limit: "api", Holder: fmt.Sprintf("h%d", i), Group: fmt.Sprintf("g%d", i%4), Weight: 1,
			DemandMilliPermitsPerSec: 10_000, TTLNanos: ttl, RequestID: fmt.Sprintf("open-%d", i)})
	})
	ids := map[uint64]bool{}
	for i, g := range grants {
		if ids[g.LeaseID] || g.Epoch != 1 {
			t.Fatalf("holder %d: grant %+v (lease IDs must be distinct, epoch 1)", i, g)
		}
		ids[g.LeaseID] = true
	}
	opened := append([]fsm.LeaseResult(nil), grants...)
	all("renew", func(i int) (fsm.LeaseResult, error) {
		g := opened[i]
		return node(i).Renew(ctx, fsm.Renew{Report: fsm.Report{Limit: "api", LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: g.Permits},
			DemandMilliPermitsPerSec: 10_000, TTLNanos: ttl, RequestID: fmt.Sprintf("renew-%d", i)})
	})
	for i, g := range grants {
		if g.LeaseID != opened[i].LeaseID || g.Epoch != 2 {
			t.Fatalf("holder %d: renewed %+v, opened %+v (same lease, epoch 2)", i, g, opened[i])
		}
	}
}

// TestFollowerForwardsLeaseCommandsInBatches: 128 holders open and renew
// leases all at once through a follower. The follower sends the lease
// commands that arrive while its earlier batches are with the leader in
// one call, so it makes far fewer calls than there are commands, and
// every holder still gets its own answer.
func TestFollowerForwardsLeaseCommandsInBatches(t *testing.T) {
	_, f, ctx := leasedCluster(t)
	const holders = 128
	openAndRenewAll(t, ctx, func(int) *Node { return f }, holders)
	calls, commands := f.fwdLeases.calls.Load(), f.fwdLeases.commands.Load()
	t.Logf("%d lease commands forwarded in %d calls", commands, calls)
	if commands != 2*holders || calls*4 > commands {
		t.Fatalf("%d commands forwarded in %d calls: want %d commands, in at most a quarter as many calls", commands, calls, 2*holders)
	}
}

// TestFollowerForwardsOneByOneToALeaderWithoutBatches: a leader that does
// not know OpCommandBatch (an older version during a rolling upgrade)
// refuses the batch as an unknown operation; the follower then forwards
// one command per call, and every holder still gets its answer.
func TestFollowerForwardsOneByOneToALeaderWithoutBatches(t *testing.T) {
	l, f, ctx := leasedCluster(t)
	l.testNoCommandBatch.Store(true)
	const holders = 64
	openAndRenewAll(t, ctx, func(int) *Node { return f }, holders)
	f.fwdLeases.mu.Lock()
	single := f.fwdLeases.single[string(l.raftNet.LocalAddr())]
	f.fwdLeases.mu.Unlock()
	if !single {
		t.Fatalf("the follower never found that the leader at %s does not batch", l.raftNet.LocalAddr())
	}
}

// TestBatchedCommandsKeepTheirOwnOutcomes: the leader answers each command
// of a batch on its own: grants, a fenced renewal, an unknown limit, a
// limit that is not leased, an entry that does not decode and one that is
// not a lease command, in one call. The refused ones change nothing.
func TestBatchedCommandsKeepTheirOwnOutcomes(t *testing.T) {
	l, _, ctx := leasedCluster(t)
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "plain", Config: strictConfig(t, time.Millisecond, 5)})
		return err
	})
	open, err := l.Lease(ctx, fsm.Lease{Limit: "api", Holder: "h0", Group: "g", Weight: 1,
		DemandMilliPermitsPerSec: 1000, TTLNanos: int64(10 * time.Second), RequestID: "open-0"})
	if err != nil || open.Status != fsm.LeaseGranted {
		t.Fatalf("open: %+v, %v", open, err)
	}
	entry := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	lease := func(limit, holder string) []byte {
		return entry(fsm.AppendLease(nil, fsm.Stamp{}, fsm.Lease{Limit: limit, Holder: holder, Group: "g", Weight: 1,
			DemandMilliPermitsPerSec: 1000, TTLNanos: int64(10 * time.Second), RequestID: "open-" + holder}))
	}
	stale := entry(fsm.AppendRenew(nil, fsm.Stamp{}, fsm.Renew{Report: fsm.Report{Limit: "api", LeaseID: open.LeaseID, Epoch: open.Epoch + 5},
		DemandMilliPermitsPerSec: 1000, TTLNanos: int64(10 * time.Second), RequestID: "stale"}))
	del := entry(fsm.AppendDelete(nil, fsm.Stamp{}, fsm.DeleteLimit{Name: "api"}))
	entries := [][]byte{lease("api", "h1"), stale, lease("nope", "h2"), lease("plain", "h3"), {0xff, 0x01}, del, lease("api", "h4")}
	w := wire.Enc{}
	w.Uvar(uint64(len(entries)))
	for _, e := range entries {
		w.Bytes(e)
	}
	before := l.raft.AppliedIndex()
	resp, err := l.leaseBatchForwarded(ctx, w.B)
	if err != nil {
		t.Fatal(err)
	}
	answers, err := decodeForwardAnswers(resp, len(entries))
	if err != nil {
		t.Fatal(err)
	}
	result := func(i int) fsm.LeaseResult {
		t.Helper()
		if answers[i].err != nil {
			t.Fatalf("entry %d: %v", i, answers[i].err)
		}
		v, err := decodeResult(answers[i].resp)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		return v.(fsm.LeaseResult)
	}
	if r := result(0); r.Status != fsm.LeaseGranted || r.Epoch != 1 {
		t.Errorf("lease h1: %+v, want granted at epoch 1", r)
	}
	if r := result(1); r.Status != fsm.LeaseFenced {
		t.Errorf("stale renewal: %+v, want fenced", r)
	}
	for i, want := range map[int]error{2: ErrNotFound, 3: ErrInvalid, 4: ErrInvalid, 5: ErrInvalid} {
		if !errors.Is(answers[i].err, want) {
			t.Errorf("entry %d: %v, want %v", i, answers[i].err, want)
		}
	}
	if r := result(6); r.Status != fsm.LeaseGranted || r.LeaseID == result(0).LeaseID {
		t.Errorf("lease h4: %+v, want a grant of its own lease", r)
	}
	if _, ok := l.fsm.Limit("api"); !ok {
		t.Fatal("the delete in the batch reached the register")
	}
	// The two grants and the fence went in lease-batch entries; nothing
	// else was applied.
	if after := l.raft.AppliedIndex(); after-before > 3 {
		t.Errorf("the batch applied %d entries, want at most 3", after-before)
	}

	for _, bad := range [][]byte{nil, {0}, {0x81, 0x08}, {2, 1, 0}, {1, 5, 1}} {
		if _, err := l.leaseBatchForwarded(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("payload %x: %v, want ErrInvalid", bad, err)
		}
	}
}

// gatedLeader is a stand-in for a leader on loopback TCP that reads
// forwarded calls and answers none of them until open is closed; then it
// answers every call, the held ones first, CodeOK with empty results. It
// counts the commands it received (a batch counts its entries).
type gatedLeader struct {
	addr     string
	open     chan struct{}
	received atomic.Int64
}

func newGatedLeader(t *testing.T) *gatedLeader {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedLeader{addr: ln.Addr().String(), open: make(chan struct{})}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				go func() { <-t.Context().Done(); c.Close() }()
				g.serve(c)
			}()
		}
	}()
	return g
}

func (g *gatedLeader) serve(c net.Conn) {
	r := bufio.NewReader(c)
	if _, err := r.ReadByte(); err != nil { // the connection's kind
		return
	}
	w := wire.NewWriter(c)
	defer w.Close()
	for {
		f, err := wire.ReadFrame(r)
		if err != nil {
			return
		}
		k := uint64(1)
		if f.Kind == wire.OpCommandBatch {
			d := wire.Dec{B: f.Payload}
			k = d.Uvar()
		}
		g.received.Add(int64(k))
		go func() {
			<-g.open
			answer := []byte(nil)
			if f.Kind == wire.OpCommandBatch {
				e := wire.Enc{}
				e.Uvar(k)
				for range k {
					e.U8(wire.CodeOK)
					e.Bytes(nil)
				}
				answer = e.B
			}
			w.Send(wire.Frame{ID: f.ID, Kind: wire.CodeOK, Payload: answer})
		}()
	}
}

// stuckForwarder returns a forwarder whose every batch sender is busy
// with a call to a leader that does not answer (timeout: a minute), and
// the channel the two stuck calls' errors arrive on.
func stuckForwarder(t *testing.T, stuck *gatedLeader) (*leaseForwarder, chan error) {
	t.Helper()
	f := newLeaseForwarder(&forwarder{network: TCPNetwork{}, timeout: 5 * time.Second}, time.Minute)
	errs := make(chan error, maxForwardBatchesInFlight)
	for i := range maxForwardBatchesInFlight {
		// One at a time, so that each takes a sender of its own.
		go func() {
			_, _, err := f.call(t.Context(), stuck.addr, []byte{1})
			errs <- err
		}()
		waitFor(t, 10*time.Second, "a sender at the stuck leader", func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.sendingTo[stuck.addr] == i+1 && stuck.received.Load() == int64(i+1)
		})
	}
	return f, errs
}

// TestForwardedCommandsMoveToANewLeaderAtOnce (found in review): both
// batch senders wait on a leader that stopped answering (a partition), and
// the leader changes. A command for the new leader switches the
// connection, which fails the old batches at once (outcome unknown,
// ErrNoLeader), instead of waiting a minute behind them.
func TestForwardedCommandsMoveToANewLeaderAtOnce(t *testing.T) {
	old, next := newGatedLeader(t), newGatedLeader(t)
	close(next.open)
	f, errs := stuckForwarder(t, old)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, _, err := f.call(ctx, next.addr, []byte{1}); err != nil {
		t.Fatalf("a command for the new leader: %v (the forwarder's call timeout is a minute)", err)
	}
	for range maxForwardBatchesInFlight {
		if err := <-errs; !errors.Is(err, ErrNoLeader) {
			t.Errorf("a command with the old leader: %v, want ErrNoLeader (outcome unknown)", err)
		}
	}
}

// TestForwardedCommandsGivenUpAreNotSent (found in review): while the
// leader holds both batches, commands whose callers give up are never
// sent, and past maxForwardQueue waiting commands the next one is
// ErrOverloaded at once.
func TestForwardedCommandsGivenUpAreNotSent(t *testing.T) {
	leader := newGatedLeader(t)
	f, errs := stuckForwarder(t, leader)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	for range 100 {
		if _, _, err := f.call(gone, leader.addr, []byte{2}); !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), "it was not") {
			t.Fatalf("a command given up: %v, want ErrNoLeader saying it was not sent", err)
		}
	}
	waiting, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range maxForwardQueue {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.call(waiting, leader.addr, []byte{3})
		}()
	}
	waitFor(t, 10*time.Second, "a full queue", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		live := 0
		for _, q := range f.queue {
			if q.state.Load() == commandQueued {
				live++
			}
		}
		return live == maxForwardQueue
	})
	if _, _, err := f.call(t.Context(), leader.addr, []byte{4}); !errors.Is(err, ErrOverloaded) {
		t.Errorf("a command past a full queue: %v, want ErrOverloaded", err)
	}
	stop()
	wg.Wait()
	close(leader.open)
	for range maxForwardBatchesInFlight {
		if err := <-errs; err != nil {
			t.Errorf("a held command: %v", err)
		}
	}
	waitFor(t, 10*time.Second, "the queue drained", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.sending == 0
	})
	if got := leader.received.Load(); got != maxForwardBatchesInFlight {
		t.Errorf("the leader received %d commands, want only the %d sent before the others were given up", got, maxForwardBatchesInFlight)
	}
}
