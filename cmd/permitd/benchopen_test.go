package main

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// fakeBinaryNode accepts binary connections on loopback and hands each
// connection's frames, in batches as they arrive, to answer, which writes
// the answers it wants to w.
type fakeBinaryNode struct {
	ln     net.Listener
	answer func(w *bufio.Writer, frames []wire.Frame) error
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

func startFakeBinaryNode(t *testing.T, answer func(w *bufio.Writer, frames []wire.Frame) error) *fakeBinaryNode {
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
					if n.answer(bw, frames) != nil || bw.Flush() != nil {
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
// closed (or the test's deadline), counting from the start.
func runOpenLoop(t *testing.T, b benchFlags, servers []string, stop <-chan struct{}) (*benchRecorder, []string) {
	t.Helper()
	var conns []net.Conn
	for k := 0; k < b.binaryConns; k++ {
		cs, err := dialBinaryRaw(servers, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cs...)
	}
	rec := &benchRecorder{}
	rec.measuring.Store(true)
	var mu sync.Mutex
	var errs []string
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err.Error())
		mu.Unlock()
		rec.errs.Add(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
		case <-time.After(20 * time.Second):
			t.Error("the fake node never stopped the run")
		}
		cancel()
	}()
	payload := wire.EncodeReserve(wire.Reserve{Limit: "x", Permits: 1})
	openLoopBinary(ctx, b, conns, func(int) []byte { return payload }, rec, fail)
	cancel()
	return rec, errs
}

func reserveAnswer(status wire.Status) []byte {
	return wire.EncodeReserveResult(wire.ReserveResult{Status: status})
}

func TestOpenLoopCountsEveryKindOfAnswer(t *testing.T) {
	// Frame i is granted, refused, shed or answered with an error, in
	// turn; the node stops the run once it has answered 400.
	var mu sync.Mutex
	answered := 0
	stop := make(chan struct{})
	n := startFakeBinaryNode(t, func(w *bufio.Writer, frames []wire.Frame) error {
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
	rec, errs := runOpenLoop(t, benchFlags{concurrency: 64, openRate: 1e6, binaryConns: 2}, []string{n.ln.Addr().String()}, done)
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
	var n *fakeBinaryNode
	n = startFakeBinaryNode(t, func(w *bufio.Writer, frames []wire.Frame) error {
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
			go n.closeConns() // so that the run does not wait for the frames held
		}
		return nil
	})
	done := stop
	rec, errs := runOpenLoop(t, benchFlags{concurrency: concurrency, openRate: 1e6, binaryConns: 1}, []string{n.ln.Addr().String()}, done)
	if g := rec.granted.Load(); g < 45 {
		t.Fatalf("granted %d (errors %q); want about 50, in batches of %d", g, errs, concurrency)
	}
}

func TestOpenLoopNeverHasMoreThanConcurrencyOutstanding(t *testing.T) {
	// A node that never answers sees exactly --concurrency frames across
	// both connections; then it stops the run and drops the connections,
	// which fails the requests outstanding as of unknown outcome.
	const concurrency = 7
	var mu sync.Mutex
	seen := 0
	stop := make(chan struct{})
	var n *fakeBinaryNode
	n = startFakeBinaryNode(t, func(w *bufio.Writer, frames []wire.Frame) error {
		mu.Lock()
		defer mu.Unlock()
		if stop == nil {
			return nil // after the run: the slots freed by failures are reused
		}
		seen += len(frames)
		if seen >= concurrency {
			close(stop)
			stop = nil
			go n.closeConns()
		}
		return nil
	})
	done := stop
	rec, errs := runOpenLoop(t, benchFlags{concurrency: concurrency, openRate: 1e6, binaryConns: 2}, []string{n.ln.Addr().String()}, done)
	mu.Lock()
	defer mu.Unlock()
	if seen != concurrency {
		t.Fatalf("the node saw %d frames; want exactly %d (the bound)", seen, concurrency)
	}
	if rec.requests.Load() != 0 || rec.granted.Load() != 0 {
		t.Errorf("%d requests, %d granted counted; want none (none was answered)", rec.requests.Load(), rec.granted.Load())
	}
	if len(errs) == 0 {
		t.Errorf("no error; want the requests outstanding reported as of unknown outcome")
	}
	for _, e := range errs {
		if !strings.Contains(e, "requests outstanding, outcome unknown") {
			t.Errorf("error %q; want the requests outstanding reported as of unknown outcome", e)
		}
	}
}
