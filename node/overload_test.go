package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// TestOverloadedReservesFailAtOnceAndChangeNothing: a node that holds
// MaxPendingReserves reserves refuses the next one at once with
// ErrOverloaded, appending nothing to the log; a follower's reserve
// refused by a full leader comes back as ErrOverloaded too; once the
// load is gone reserves are served again; concurrent reserves never
// hold more than the bound (checked under -race with a full pool).
func TestOverloadedReservesFailAtOnceAndChangeNothing(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1000, Per: time.Second, MaxReserved: 1000, Expiry: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: cfg}); return err })
	seq := 0
	reserve := func(n *Node) error {
		seq++
		_, err := n.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second), RequestID: fmt.Sprintf("ov-%d-%d", seq, time.Now().UnixNano())})
		return err
	}
	if err := reserve(l); err != nil {
		t.Fatal(err)
	}

	// The leader full: refused through it and through a follower (the
	// follower admits the reserve and forwards it; the leader refuses).
	// A follower full: refused through it, served through the leader.
	l = c.leader()
	f := c.followers(l)[0]
	for _, tc := range []struct {
		full       *Node
		refusedVia []*Node
		servedVia  *Node
	}{{l, []*Node{l, f}, nil}, {f, []*Node{f}, l}} {
		full := tc.full
		full.pending.Add(int64(full.cfg.MaxPendingReserves))
		last := l.raft.LastIndex()
		_, shedBefore := full.Load()
		start := time.Now()
		for _, via := range tc.refusedVia {
			if err := reserve(via); !errors.Is(err, ErrOverloaded) {
				t.Errorf("%s full, reserve via %s: %v, want ErrOverloaded", full.cfg.ID, via.cfg.ID, err)
			}
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s full: refusals took %v (queued?)", full.cfg.ID, d)
		}
		if got := l.raft.LastIndex(); got != last {
			t.Errorf("%s full: refused reserves reached the log (last index %d, was %d)", full.cfg.ID, got, last)
		}
		if _, shed := full.Load(); shed <= shedBefore {
			t.Errorf("%s full: shed count %d, was %d", full.cfg.ID, shed, shedBefore)
		}
		if tc.servedVia != nil {
			if err := reserve(tc.servedVia); err != nil {
				t.Errorf("%s full, reserve via %s: %v", full.cfg.ID, tc.servedVia.cfg.ID, err)
			}
		}
		full.pending.Add(-int64(full.cfg.MaxPendingReserves))
		if err := reserve(f); err != nil {
			t.Errorf("after %s's load went: %v", full.cfg.ID, err)
		}
	}

	// Concurrent reserves against a small bound: every one is granted or
	// overloaded, and the node never holds more than the bound.
	l.cfg.MaxPendingReserves = 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	var granted, overloaded, peak int64
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second), RequestID: fmt.Sprintf("ovc-%d-%d", i, time.Now().UnixNano())})
			p, _ := l.Load()
			mu.Lock()
			defer mu.Unlock()
			peak = max(peak, p)
			switch {
			case err == nil:
				granted++
			case errors.Is(err, ErrOverloaded):
				overloaded++
			default:
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	if granted == 0 || peak > 4 {
		t.Errorf("granted %d, overloaded %d, peak pending %d (bound 4)", granted, overloaded, peak)
	}
	t.Logf("64 concurrent reserves with a bound of 4: %d granted, %d overloaded", granted, overloaded)
}

// TestPendingBoundDefaultsToFiveBatches: without a bound, a node holds
// five full batches of its MaxBatch (PendingBatches); a bound given is
// kept.
func TestPendingBoundDefaultsToFiveBatches(t *testing.T) {
	for _, tc := range []struct{ maxBatch, bound, want int }{
		{0, 0, 5120},
		{16, 0, 80},
		{1, 0, 5},
		{16, 512, 512},
	} {
		c := Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", MaxBatch: tc.maxBatch, MaxPendingReserves: tc.bound}
		if err := c.setDefaults(); err != nil {
			t.Fatal(err)
		}
		if c.MaxPendingReserves != tc.want {
			t.Errorf("max batch %d, bound %d: default bound %d, want %d", tc.maxBatch, tc.bound, c.MaxPendingReserves, tc.want)
		}
	}
}

// TestReadLoopShedsOnlyWithASlot: the read loop asks whether to shed a
// call only once the call holds one of its connection's
// maxForwardedInflight slots, so a single pipelined connection that has
// filled its window is slowed (its next frame is not read) rather than
// refused, and its refused call is answered once a slot frees.
func TestReadLoopShedsOnlyWithASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := servingNode(t, 0)
		var inflight, shedAsked atomic.Int64
		release := make(chan struct{})
		handle := func(ctx context.Context, op byte, payload []byte, _ bool) ([]byte, error) {
			inflight.Add(1)
			defer inflight.Add(-1)
			<-release
			return nil, nil
		}
		shed := func(op byte, payload []byte) Admission {
			if op != wire.OpReserve {
				return AdmitServe
			}
			shedAsked.Add(1)
			if got := inflight.Load(); got >= maxForwardedInflight {
				t.Errorf("shed asked with %d calls in flight: before the call had a slot", got)
			}
			return AdmitShed
		}
		client, answers := serveCallsOnPipe(n, shed, handle)
		defer client.Close()
		bw := bufio.NewWriter(client)
		send := func(id uint64, op byte) {
			if err := wire.WriteFrame(bw, wire.Frame{ID: id, Kind: op}); err != nil {
				t.Fatal(err)
			}
		}
		for id := range uint64(maxForwardedInflight) {
			send(id, wire.OpOpenSession)
		}
		send(maxForwardedInflight, wire.OpReserve)
		go bw.Flush()
		synctest.Wait()
		if got, asked := inflight.Load(), shedAsked.Load(); got != maxForwardedInflight || asked != 0 {
			t.Errorf("window full: %d calls in flight, shed asked %d times; want %d and 0", got, asked, maxForwardedInflight)
		}
		close(release)
		for range maxForwardedInflight + 1 {
			f := <-answers
			want := byte(wire.CodeOK)
			if f.ID == maxForwardedInflight { // the reserve after the window
				want = wire.CodeOverloaded
			}
			if f.Kind != want {
				t.Errorf("call %d: code %d, want %d", f.ID, f.Kind, want)
			}
		}
		if asked := shedAsked.Load(); asked != 1 {
			t.Errorf("shed asked %d times for the one reserve", asked)
		}
	})
}

// servingNode is a bare node with what ServeCalls needs (a call pool,
// the overload answer, a bound of maxPending reserves), stopped when the
// test ends.
func servingNode(t *testing.T, maxPending int) *Node {
	n := &Node{stopCh: make(chan struct{}), overloadedMsg: []byte("full")}
	n.cfg.MaxPendingReserves = maxPending
	n.calls = newCallPool(n.stopCh)
	t.Cleanup(func() { close(n.stopCh) })
	return n
}

// serveCallsOnPipe serves one end of a pipe with n.ServeCalls and
// returns the other end and the answers read from it.
func serveCallsOnPipe(n *Node, admit func(op byte, payload []byte) Admission, handle func(ctx context.Context, op byte, payload []byte, held bool) ([]byte, error)) (net.Conn, <-chan wire.Frame) {
	server, client := net.Pipe()
	go n.ServeCalls(server, Calls{MaxFrame: wire.MaxClientFrame, Admit: admit, Handle: handle})
	answers := make(chan wire.Frame, maxForwardedInflight+4)
	go func() {
		for {
			f, err := wire.ReadFrame(client)
			if err != nil {
				return
			}
			answers <- f
		}
	}()
	return client, answers
}

// writeCounter counts the Write calls made on a connection.
type writeCounter struct {
	net.Conn
	writes atomic.Int64
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestRefusalsOfFramesReadTogetherLeaveInOneWrite: the read loop holds the
// refusals of the frames it read together until the next read would wait
// for the client, then queues them as one batch, so a burst of reserves
// refused at once costs the node one write system call, not one each.
func TestRefusalsOfFramesReadTogetherLeaveInOneWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := servingNode(t, 0)
		shed := func(op byte, payload []byte) Admission {
			// Each decision takes a while (fake time: the bubble runs
			// everything else first), so a writer handed each refusal
			// at once would have flushed it before the next.
			time.Sleep(time.Millisecond)
			return shedReserves(op)
		}
		handle := func(ctx context.Context, op byte, payload []byte, _ bool) ([]byte, error) { return nil, nil }
		server, client := net.Pipe()
		defer client.Close()
		counted := &writeCounter{Conn: server}
		go n.ServeCalls(counted, Calls{MaxFrame: wire.MaxClientFrame, Admit: shed, Handle: handle})
		const burst = 50
		bw := bufio.NewWriter(client)
		for id := range uint64(burst) {
			if err := wire.WriteFrame(bw, wire.Frame{ID: id, Kind: wire.OpReserve}); err != nil {
				t.Fatal(err)
			}
		}
		go bw.Flush() // one write of the whole burst
		br := bufio.NewReader(client)
		for range burst {
			f, err := wire.ReadFrame(br)
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind != wire.CodeOverloaded || string(f.Payload) != "full" {
				t.Fatalf("answer to %d: code %d %q; want %d %q", f.ID, f.Kind, f.Payload, wire.CodeOverloaded, "full")
			}
		}
		if got := counted.writes.Load(); got != 1 {
			t.Errorf("%d reserves refused together took %d writes; want 1", burst, got)
		}
	})
}

// TestHeldRefusalsDoNotWaitForTheClient: the read loop holds refusals only
// while a whole frame is buffered, and sends them before it waits for a
// slot, so neither a frame that has only partly arrived nor a full
// window delays a refusal already decided.
func TestHeldRefusalsDoNotWaitForTheClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := servingNode(t, 0)
		release := make(chan struct{})
		handle := func(ctx context.Context, op byte, payload []byte, _ bool) ([]byte, error) {
			<-release
			return nil, nil
		}
		shed := func(op byte, payload []byte) Admission { return shedReserves(op) }
		client, answers := serveCallsOnPipe(n, shed, handle)
		defer client.Close()
		frame := func(id uint64, op byte) []byte {
			var b bytes.Buffer
			bw := bufio.NewWriter(&b)
			if err := wire.WriteFrame(bw, wire.Frame{ID: id, Kind: op}); err != nil {
				t.Fatal(err)
			}
			bw.Flush()
			return b.Bytes()
		}
		expect := func(what string, id uint64) {
			t.Helper()
			synctest.Wait()
			select {
			case f := <-answers:
				if f.ID != id || f.Kind != wire.CodeOverloaded {
					t.Errorf("%s: answer %d code %d; want %d refused", what, f.ID, f.Kind, id)
				}
			default:
				t.Errorf("%s: no answer to reserve %d", what, id)
			}
		}
		// A reserve and the first 5 bytes of the next frame, together.
		second := frame(2, wire.OpReserve)
		go client.Write(append(frame(1, wire.OpReserve), second[:5]...))
		expect("with the next frame partly arrived", 1)
		go client.Write(second[5:])
		expect("once the next frame arrived", 2)

		// A reserve, then enough calls to fill the window and one more,
		// together: the loop waits for a slot after deciding the reserve.
		var burst []byte
		burst = append(burst, frame(3, wire.OpReserve)...)
		for id := range uint64(maxForwardedInflight + 1) {
			burst = append(burst, frame(10+id, wire.OpOpenSession)...)
		}
		go client.Write(burst)
		expect("with the window full", 3)
		close(release)
	})
}

// shedReserves is a read-loop decision that refuses every reserve and
// serves every other call.
func shedReserves(op byte) Admission {
	if op == wire.OpReserve {
		return AdmitShed
	}
	return AdmitServe
}

// TestReadLoopTakesEachReserveSlotItAdmits: the read loop takes a
// reserve's slot among MaxPendingReserves when it admits it, so the
// frames of one read see the slots their predecessors took. Of a burst
// larger than the free slots, exactly the free slots' worth are served
// (each told its slot is held) and the rest refused from the read loop,
// none behind a goroutine hand-off only to be refused by Reserve; each
// slot comes back when its call returns.
func TestReadLoopTakesEachReserveSlotItAdmits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const free, burst = 5, 12
		n := servingNode(t, free)
		var served, heldServed atomic.Int64
		release := make(chan struct{})
		handle := func(ctx context.Context, op byte, payload []byte, held bool) ([]byte, error) {
			served.Add(1)
			if held {
				heldServed.Add(1)
			}
			<-release
			return nil, nil
		}
		admit := admitReserves(n)
		client, answers := serveCallsOnPipe(n, admit, handle)
		defer client.Close()
		var b bytes.Buffer
		bw := bufio.NewWriter(&b)
		reserve := wire.EncodeReserve(wire.Reserve{Limit: "api", Permits: 1})
		for id := range uint64(burst) {
			if err := wire.WriteFrame(bw, wire.Frame{ID: id, Kind: wire.OpReserve, Payload: reserve}); err != nil {
				t.Fatal(err)
			}
		}
		bw.Flush()
		go client.Write(b.Bytes()) // the burst in one write
		synctest.Wait()
		if got, held := served.Load(), heldServed.Load(); got != free || held != free {
			t.Errorf("a burst of %d with %d slots free: %d served (%d with a held slot); want %d, all held", burst, free, got, held, free)
		}
		if got := n.pending.Load(); got != free {
			t.Errorf("pending %d while the admitted calls run; want %d", got, free)
		}
		refused := 0
		for range burst - free {
			select {
			case f := <-answers:
				if f.Kind != wire.CodeOverloaded {
					t.Errorf("answer %d before any call returned: code %d; want %d", f.ID, f.Kind, wire.CodeOverloaded)
				}
				refused++
			default:
			}
		}
		if _, shed := n.Load(); refused != burst-free || shed != burst-free {
			t.Errorf("%d refused from the read loop (shed count %d); want %d", refused, shed, burst-free)
		}
		close(release)
		synctest.Wait()
		if got := n.pending.Load(); got != 0 {
			t.Errorf("pending %d once every call returned; want 0 (a held slot was not given back)", got)
		}
	})
}

// admitReserves is the read-loop decision of the server's binary clients
// for calls that all decode and are allowed: a reserve takes its slot
// (TryHoldReserve) or is shed, any other call is served.
func admitReserves(n *Node) func(op byte, payload []byte) Admission {
	return func(op byte, payload []byte) Admission {
		switch {
		case op != wire.OpReserve:
			return AdmitServe
		case n.TryHoldReserve():
			return AdmitHeld
		}
		return AdmitShed
	}
}
