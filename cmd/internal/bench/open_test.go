package bench

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// fakeBinaryNode accepts binary connections on loopback and hands each
// connection's frames, in batches as they arrive, to answer with the
// connection's number (in the order accepted, from 0), which writes the
// answers it wants to w; an error from answer drops the connection.
type fakeBinaryNode struct {
	ln     net.Listener
	answer func(conn int, w *bufio.Writer, frames []wire.Frame) error
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

// closeConns closes the connections the node has accepted.
func (n *fakeBinaryNode) closeConns() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		c.Close()
	}
}

// startFakeBinaryNode starts a fakeBinaryNode on a loopback port; the
// test's cleanup stops it.
func startFakeBinaryNode(t *testing.T, answer func(conn int, w *bufio.Writer, frames []wire.Frame) error) *fakeBinaryNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeBinaryNode{ln: ln, answer: answer}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.mu.Lock()
			num := len(n.conns)
			n.conns = append(n.conns, c)
			n.mu.Unlock()
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				if b, err := br.ReadByte(); err != nil || b != wire.ClientPreface {
					return
				}
				bw := bufio.NewWriter(c)
				for {
					f, err := wire.ReadFrame(br)
					if err != nil {
						return
					}
					frames := []wire.Frame{f}
					for br.Buffered() > 0 {
						if f, err = wire.ReadFrame(br); err != nil {
							return
						}
						frames = append(frames, f)
					}
					if n.answer(num, bw, frames) != nil || bw.Flush() != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); n.wg.Wait() })
	return n
}

// runOpenLoop runs openLoopBinary against the servers until stop is
// closed (or the test's deadline), counting from the start, and then
// calls afterStop if not nil; it returns the counts, the errors reported
// and the loop's own error.
func runOpenLoop(t *testing.T, b Config, servers []string, stop <-chan struct{}, afterStop ...func()) (*benchRecorder, []string, error) {
	t.Helper()
	var conns []net.Conn
	for k := 0; k < b.BinaryConns; k++ {
		cs, err := dialBinaryRaw(servers, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cs...)
	}
	rec := &benchRecorder{maxRequests: b.MaxRequests}
	var mu sync.Mutex
	var errs []string
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err.Error())
		mu.Unlock()
		rec.fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	loopDone, stopperDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopperDone)
		select {
		case <-stop:
		case <-loopDone: // the loop ended by itself
		case <-time.After(20 * time.Second):
			t.Error("the fake node never stopped the run")
		}
		cancel()
		for _, f := range afterStop {
			f()
		}
	}()
	payload := wire.EncodeReserve(wire.Reserve{Limit: "x", Permits: 1})
	err := openLoopBinary(ctx, openLoopParams{b: b, conns: conns, payload: func(int) []byte { return payload }, rec: rec, fail: fail})
	close(loopDone)
	<-stopperDone
	return rec, errs, err
}

// reserveAnswer is the payload of a decided reserve's answer.
func reserveAnswer(status wire.ReserveStatus) []byte {
	return wire.EncodeReserveResult(wire.ReserveResult{Status: status})
}

func TestOpenLoopCountsEveryKindOfAnswer(t *testing.T) {
	// Frame i is granted, refused, shed or answered with an error, in
	// turn; the node stops the run once it has answered 400.
	var mu sync.Mutex
	answered := 0
	stop := make(chan struct{})
	n := startFakeBinaryNode(t, func(_ int, w *bufio.Writer, frames []wire.Frame) error {
		for _, f := range frames {
			var a wire.Frame
			switch f.ID % 4 {
			case 0:
				a = wire.Frame{ID: f.ID, Kind: wire.CodeOK, Payload: reserveAnswer(wire.Granted)}
			case 1:
				a = wire.Frame{ID: f.ID, Kind: wire.CodeOK, Payload: reserveAnswer(wire.Refused)}
			case 2:
				a = wire.Frame{ID: f.ID, Kind: wire.CodeOverloaded, Payload: []byte("overloaded")}
			default:
				a = wire.Frame{ID: f.ID, Kind: wire.CodeInvalid, Payload: []byte("bad reserve")}
			}
			if err := wire.WriteFrame(w, a); err != nil {
				return err
			}
		}
		mu.Lock()
		answered += len(frames)
		if answered >= 400 && stop != nil {
			close(stop)
			stop = nil
		}
		mu.Unlock()
		return nil
	})
	done := stop
	rec, errs, err := runOpenLoop(t, Config{Concurrency: 64, OpenRate: 1e6, BinaryConns: 2}, []string{n.ln.Addr().String()}, done)
	if err != nil {
		t.Fatal(err)
	}
	req, g, r, s, e := rec.requests.Load(), rec.granted.Load(), rec.refused.Load(), rec.shed.Load(), rec.errs.Load()
	if req < 4 || g+r+s+e != req {
		t.Fatalf("requests %d = granted %d + refused %d + shed %d + errors %d? want equal and some", req, g, r, s, e)
	}
	// Each connection numbers its frames from 1, so the four kinds come
	// within one of each other.
	for name, c := range map[string]int64{"granted": g, "refused": r, "shed": s, "errors": e} {
		if c < req/4-2 || c > req/4+2 {
			t.Errorf("%s %d of %d requests; want about a quarter", name, c, req)
		}
	}
	if int64(len(rec.lat)) != g+r {
		t.Errorf("%d latencies recorded; want one per decided reserve (%d)", len(rec.lat), g+r)
	}
	if len(errs) == 0 || !strings.Contains(errs[0], "binary answer code") || !strings.Contains(errs[0], "bad reserve") {
		t.Errorf("errors %q; want the node's answer code and message", errs)
	}
}

func TestOpenLoopSendsWhatItBuffersBeforeWaitingForASlot(t *testing.T) {
	// The node answers only once it holds --concurrency frames: a
	// pacer that waited for a free slot with frames still in its buffer
	// would wait for ever.
	const concurrency = 5
	var mu sync.Mutex
	var held []wire.Frame
	answered := 0
	stop := make(chan struct{})
	n := startFakeBinaryNode(t, func(_ int, w *bufio.Writer, frames []wire.Frame) error {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, frames...)
		if len(held) < concurrency {
			return nil
		}
		for _, f := range held {
			if err := wire.WriteFrame(w, wire.Frame{ID: f.ID, Kind: wire.CodeOK, Payload: reserveAnswer(wire.Granted)}); err != nil {
				return err
			}
		}
		answered += len(held)
		held = nil
		if answered >= 50 && stop != nil {
			close(stop)
			stop = nil
		}
		return nil
	})
	done := stop
	// Once the run has ended, the node drops the frames it holds, so
	// that the drain does not wait for them.
	rec, errs, _ := runOpenLoop(t, Config{Concurrency: concurrency, OpenRate: 1e6, BinaryConns: 1}, []string{n.ln.Addr().String()}, done, n.closeConns)
	if g := rec.granted.Load(); g < 45 {
		t.Fatalf("granted %d (errors %q); want about 50, in batches of %d", g, errs, concurrency)
	}
}

func TestOpenLoopNeverHasMoreThanConcurrencyOutstanding(t *testing.T) {
	// A node that never answers sees exactly --concurrency frames across
	// both connections; then it stops the run and, after it, drops the
	// connections, which fails the requests outstanding.
	const concurrency = 7
	var mu sync.Mutex
	seen := 0
	stop := make(chan struct{})
	n := startFakeBinaryNode(t, func(_ int, w *bufio.Writer, frames []wire.Frame) error {
		mu.Lock()
		defer mu.Unlock()
		if stop == nil {
			return nil // after the run
		}
		seen += len(frames)
		if seen >= concurrency {
			close(stop)
			stop = nil
		}
		return nil
	})
	done := stop
	rec, errs, _ := runOpenLoop(t, Config{Concurrency: concurrency, OpenRate: 1e6, BinaryConns: 2}, []string{n.ln.Addr().String()}, done, n.closeConns)
	mu.Lock()
	defer mu.Unlock()
	if seen != concurrency {
		t.Fatalf("the node saw %d frames; want exactly %d (the bound)", seen, concurrency)
	}
	// The connections broke after the run: the requests were sent in it,
	// so each is counted, as a request and an error of unknown outcome.
	if req, e := rec.requests.Load(), rec.errs.Load(); req != concurrency || e != concurrency {
		t.Errorf("%d requests, %d errors counted (errors %q); want %d of each: requests sent in the run count whenever they end", req, e, errs, concurrency)
	}
	if first, _ := rec.firstErr.Load().(string); !strings.Contains(first, "requests outstanding, outcome unknown") {
		t.Errorf("first error %q; want the requests outstanding reported as of unknown outcome", first)
	}
}

func TestOpenLoopMovesToALiveConnectionWhenOneBreaks(t *testing.T) {
	// The node drops its first connection at its first frames and grants
	// everything on the other: the run goes on there, and the requests
	// lost with the first are requests and errors of unknown outcome.
	var mu sync.Mutex
	granted := 0
	stop := make(chan struct{})
	n := startFakeBinaryNode(t, func(conn int, w *bufio.Writer, frames []wire.Frame) error {
		if conn == 0 {
			return errors.New("dropped")
		}
		for _, f := range frames {
			if err := wire.WriteFrame(w, wire.Frame{ID: f.ID, Kind: wire.CodeOK, Payload: reserveAnswer(wire.Granted)}); err != nil {
				return err
			}
		}
		mu.Lock()
		defer mu.Unlock()
		granted += len(frames)
		if granted >= 200 && stop != nil {
			close(stop)
			stop = nil
		}
		return nil
	})
	done := stop
	rec, errs, err := runOpenLoop(t, Config{Concurrency: 16, OpenRate: 1e6, BinaryConns: 2}, []string{n.ln.Addr().String()}, done)
	if err != nil {
		t.Fatalf("open loop with one live connection: %v", err)
	}
	if g := rec.granted.Load(); g < 150 {
		t.Errorf("granted %d; want the run to go on at the live connection (about 200)", g)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "outcome unknown") {
		t.Errorf("errors %q; want the dropped connection's requests reported once as of unknown outcome", errs)
	}
	if req, g, e := rec.requests.Load(), rec.granted.Load(), rec.errs.Load(); req != g+e || e < 1 {
		t.Errorf("requests %d, granted %d, errors %d; want requests = granted + errors, errors the lost ones", req, g, e)
	}
}

func TestOpenLoopFailsWhenEveryConnectionBreaks(t *testing.T) {
	n := startFakeBinaryNode(t, func(int, *bufio.Writer, []wire.Frame) error { return errors.New("dropped") })
	never := make(chan struct{})
	_, _, err := runOpenLoop(t, Config{Concurrency: 16, OpenRate: 1e6, BinaryConns: 2}, []string{n.ln.Addr().String()}, never)
	if !errors.Is(err, errAllConnsBroken) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("open loop whose connections all broke: %v; want %v naming the first failure", err, errAllConnsBroken)
	}
}

func TestOpenLoopStopsSendingAtMaxRequests(t *testing.T) {
	for _, conns := range []int{1, 4} {
		var mu sync.Mutex
		seen := 0
		n := startFakeBinaryNode(t, func(_ int, w *bufio.Writer, frames []wire.Frame) error {
			mu.Lock()
			seen += len(frames)
			mu.Unlock()
			for _, f := range frames {
				if err := wire.WriteFrame(w, wire.Frame{ID: f.ID, Kind: wire.CodeOK, Payload: reserveAnswer(wire.Granted)}); err != nil {
					return err
				}
			}
			return nil
		})
		const maxRequests, concurrency = 100, 8
		never := make(chan struct{})
		rec, _, err := runOpenLoop(t, Config{Concurrency: concurrency, OpenRate: 1e6, BinaryConns: conns, MaxRequests: maxRequests}, []string{n.ln.Addr().String()}, never)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		// A request takes its place under the cap as it is sent: exactly
		// --max-requests are sent and counted, with any number of
		// connections.
		if req, g := rec.requests.Load(), rec.granted.Load(); req != maxRequests || g != maxRequests || seen != maxRequests {
			t.Errorf("%d connections: %d requests counted, %d granted, %d sent; want %d each", conns, req, g, seen, maxRequests)
		}
		mu.Unlock()
	}
}

func TestOpenLoopCountsWhatTheDrainLeavesUnansweredOnce(t *testing.T) {
	// The node answers the first 12 reserves and holds the 8 (--concurrency) after them; the run
	// stops at --max-requests 20, and the drain gives up on the rest.
	const answered, maxRequests, concurrency = 12, 20, 8
	var mu sync.Mutex
	seen := 0
	n := startFakeBinaryNode(t, func(_ int, w *bufio.Writer, frames []wire.Frame) error {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range frames {
			seen++
			if seen > answered {
				continue
			}
			if err := wire.WriteFrame(w, wire.Frame{ID: f.ID, Kind: wire.CodeOK, Payload: reserveAnswer(wire.Granted)}); err != nil {
				return err
			}
		}
		return nil
	})
	never := make(chan struct{})
	b := Config{Concurrency: concurrency, OpenRate: 1e6, BinaryConns: 2, MaxRequests: maxRequests, openDrain: 100 * time.Millisecond}
	rec, errs, err := runOpenLoop(t, b, []string{n.ln.Addr().String()}, never)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "unanswered 100ms after the run (outcome unknown)") {
		t.Fatalf("errors %q; want one naming the requests the drain left unanswered", errs)
	}
	// Every frame was flushed before the drain began: the node has them.
	mu.Lock()
	sent := int64(seen)
	mu.Unlock()
	if req, g, e := rec.requests.Load(), rec.granted.Load(), rec.errs.Load(); sent != maxRequests || req != sent || g != answered || e != sent-answered {
		t.Errorf("node got %d, counted %d requests, %d granted, %d errors; want each request the node got counted once: %d, the first %d granted, the rest errors", sent, req, g, e, maxRequests, answered)
	}
}
