package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// forward.go: followers forward client requests to the leader over one
// persistent, pipelined connection per leader (multiplexed on the raft
// port), in package wire's framing. Many calls are in flight on one
// connection at once; the leader serves each call in its own goroutine, so
// forwarded reserves join the leader's batches like local ones. The same
// call loop (ServeCalls) serves the binary clients of package
// transport/server.

// WireCode is the binary protocol's answer code for err (wire.CodeOK for
// nil), as ServeCalls answers a call that failed with it; its message is
// Message(err).
func WireCode(err error) byte {
	switch {
	case err == nil:
		return wire.CodeOK
	case errors.Is(err, ErrNotFound):
		return wire.CodeNotFound
	case errors.Is(err, ErrInvalid):
		return wire.CodeInvalid
	case errors.Is(err, ErrConflict):
		return wire.CodeConflict
	case errors.Is(err, ErrForbidden):
		return wire.CodeForbidden
	case errors.Is(err, ErrUnauthenticated):
		return wire.CodeUnauthenticated
	case errors.Is(err, ErrOverloaded):
		return wire.CodeOverloaded
	case errors.Is(err, ErrNoLeader), errors.Is(err, ErrShutdown), errors.Is(err, ErrRemoved):
		return wire.CodeNoLeader
	}
	return wire.CodeError
}

// errOf rebuilds the error of an answer code and the user message the
// leader sent with it (see ServeCalls: Message, never the wrapped
// text, so that prefixes do not repeat hop after hop).
func errOf(code byte, msg string) error {
	switch code {
	case wire.CodeOK:
		return nil
	case wire.CodeNotFound:
		return userErrorf(ErrNotFound, "%s", msg)
	case wire.CodeInvalid:
		return userErrorf(ErrInvalid, "%s", msg)
	case wire.CodeConflict:
		return userErrorf(ErrConflict, "%s", msg)
	case wire.CodeForbidden:
		return userErrorf(ErrForbidden, "%s", msg)
	case wire.CodeUnauthenticated:
		return userErrorf(ErrUnauthenticated, "%s", msg)
	case wire.CodeOverloaded:
		return userErrorf(ErrOverloaded, "%s", msg)
	case wire.CodeNoLeader:
		return userErrorf(ErrNoLeader, "%s", msg)
	}
	return userErrorf(errLeaderFailed, "%s", msg)
}

// errLeaderFailed is any other failure the leader reported.
var errLeaderFailed = errors.New("node: the leader failed the request")

// fwdConn is one pipelined connection to a leader.
type fwdConn struct {
	addr string
	*wire.Conn
}

func newFwdConn(network Network, addr string, timeout time.Duration) (*fwdConn, error) {
	c, err := dialKind(network, addr, timeout, connForward)
	if err != nil {
		return nil, err
	}
	return &fwdConn{addr: addr, Conn: wire.NewConn(c)}, nil
}

// forwarder keeps the connection to the current leader.
type forwarder struct {
	network Network
	timeout time.Duration

	mu   sync.Mutex
	conn *fwdConn
}

func (f *forwarder) get(addr string) (*fwdConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil && f.conn.addr == addr && !f.conn.Broken() {
		return f.conn, nil
	}
	if f.conn != nil {
		f.conn.Fail(fmt.Errorf("%w: leader changed", ErrNoLeader))
		f.conn = nil
	}
	c, err := newFwdConn(f.network, addr, f.timeout)
	if err != nil {
		return nil, fmt.Errorf("%w: dial leader %s: %v", ErrNoLeader, addr, err)
	}
	f.conn = c
	return c, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		f.conn.Fail(ErrShutdown)
		f.conn = nil
	}
}

// forward sends op to the leader at addr and maps the answer's code to an
// error; on wire.CodeOK it returns the payload.
func (f *forwarder) forward(ctx context.Context, addr string, op byte, payload []byte) ([]byte, error) {
	resp, _, err := f.forwardTimed(ctx, addr, op, payload)
	return resp, err
}

// forwardTimed is forward, and also returns when the answer was read off
// the connection.
func (f *forwarder) forwardTimed(ctx context.Context, addr string, op byte, payload []byte) ([]byte, time.Time, error) {
	c, err := f.get(addr)
	if err != nil {
		return nil, time.Time{}, err
	}
	code, resp, received, err := c.CallTimed(ctx, op, payload)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: leader %s: %v", ErrNoLeader, c.addr, err)
	}
	if code != wire.CodeOK {
		return nil, received, errOf(code, string(resp))
	}
	return resp, received, nil
}

// serveForwarded serves one forwarding connection from a follower: each
// call runs in its own goroutine (bounded per connection) so that forwarded
// reserves join the leader's batches; answers share the frame writer.
func (n *Node) serveForwarded(c net.Conn) {
	n.ServeCalls(c, Calls{MaxFrame: wire.MaxFrame, Handle: func(ctx context.Context, op byte, payload []byte, _ bool) ([]byte, error) {
		if op == wire.OpProgress {
			return n.progressAnswer(payload) // any node answers the leader's probe (promote.go)
		}
		return n.handleForwarded(ctx, op, payload)
	}})
}

// Calls is a protocol ServeCalls serves: the largest frame it reads, how
// its read loop admits a call, and how a call is answered.
type Calls struct {
	// MaxFrame bounds a call's frame (wire.MaxFrame between nodes,
	// wire.MaxClientFrame from clients).
	MaxFrame uint32
	// Admit, if not nil, decides each call in the read loop once it has
	// its place in the connection's window (see Admission); nil serves
	// every call.
	Admit func(op byte, payload []byte) Admission
	// Handle answers one call: the answer's payload, or an error,
	// answered with its WireCode and Message. held says that Admit took
	// a reserve slot for the call (AdmitHeld), which ServeCalls gives
	// back when Handle returns.
	Handle func(ctx context.Context, op byte, payload []byte, held bool) ([]byte, error)
}

// ServeCalls serves one pipelined connection of package wire (its
// preface already read) until it fails or the node stops, and closes c:
// it reads calls of at most p.MaxFrame bytes and answers each through
// p.Handle, on a goroutine of its own (from the node's call pool; at most
// maxForwardedInflight at once per connection), within Config.ApplyTimeout.
// A malformed frame ends the connection. Once a call has its slot on the
// connection (so one connection is still slowed by its window rather than
// shed), p.Admit decides it in the read loop: AdmitShed answers it
// CodeOverloaded from the read loop itself (counted as shed), AdmitHeld
// serves it with the reserve slot Admit took (TryHoldReserve), given back
// when Handle returns, AdmitServe serves it as it is.
func (n *Node) ServeCalls(c net.Conn, p Calls) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	window := maxForwardedInflight
	if w := n.testCallWindow.Load(); w > 0 {
		window = int(w)
	}
	sem := make(chan struct{}, window)
	// While calls of the connection have yet to queue their answers,
	// those may join this flush; a lone caller's answer leaves at once.
	var answersToCome atomic.Int64
	w := wire.NewYieldingWriter(c, func() bool { return answersToCome.Load() > 0 })
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		w.Close()
	}()
	// The refusals of the frames that arrived together leave together:
	// they are held while a whole frame is buffered (reading it will not
	// wait for the client) and no wait for a slot is due, then queued in
	// one SendAll.
	var refusals []wire.Frame
	sendRefusals := func() {
		if len(refusals) > 0 {
			w.SendAll(refusals)
			refusals = nil
		}
	}
	defer sendRefusals()
	for {
		if !wire.FrameBuffered(br) || len(refusals) >= maxHeldRefusals {
			sendRefusals()
		}
		f, err := wire.ReadFrameLimit(br, p.MaxFrame)
		if err != nil {
			return
		}
		select {
		case sem <- struct{}{}:
		default:
			sendRefusals()
			select {
			case sem <- struct{}{}:
			case <-n.stopCh:
				return
			}
		}
		decision := AdmitServe
		if p.Admit != nil {
			decision = p.Admit(f.Kind, f.Payload)
		}
		if decision == AdmitShed {
			<-sem
			n.shed.Add(1)
			refusals = append(refusals, wire.Frame{ID: f.ID, Kind: wire.CodeOverloaded, Payload: n.overloadedMsg})
			continue
		}
		held := decision == AdmitHeld
		wg.Add(1)
		answersToCome.Add(1)
		n.calls.run(func() {
			defer wg.Done()
			// The call's deadline, without a timer unless something
			// waits on it, and its place in the window (callctx.go): a
			// reserve that waits in an in-flight cap's queue gives it
			// back (waiters.go): waiting, it would stall the
			// connection's later calls, among them the release it
			// waits for.
			ctx := newCallContext(time.Now().Add(n.cfg.ApplyTimeout), sem)
			defer ctx.leaveWindow()
			resp, err := p.Handle(ctx, f.Kind, f.Payload, held)
			ctx.stop()
			if held {
				n.pending.Add(-1)
			}
			code := WireCode(err)
			if err != nil {
				resp = []byte(Message(err))
			}
			if len(resp) > wire.MaxFrame-9 {
				code, resp = wire.CodeError, []byte("answer too large for one frame")
			}
			answer := wire.Frame{ID: f.ID, Kind: code, Payload: resp}
			if answersToCome.Add(-1) == 0 {
				// No other answer of the connection is on its way
				// (a worker's renewal, a lone caller): write it here
				// rather than wake the writer.
				w.SendNow(answer)
			} else {
				w.Send(answer)
			}
		})
	}
}

// maxHeldRefusals bounds the refusals the read loop holds before queueing
// them.
const maxHeldRefusals = 256

// maxForwardedInflight bounds the calls served at once on one forwarding
// connection (a reserve waiting in an in-flight cap's queue is not
// counted: the follower's MaxPendingReserves bounds those).
const maxForwardedInflight = 4096

func (n *Node) serveForwardListener() {
	for {
		select {
		case c := <-n.mux.fwdCh:
			go n.serveForwarded(c)
		case <-n.mux.closed:
			return
		}
	}
}

// The goroutines that serve pipelined calls (ServeCalls).
// A call served by a fresh goroutine grows that goroutine's stack on the
// way to the batcher (runtime.newstack was 8 % of a leader's CPU at a
// thousand binary renewals per second); a goroutine that served a call
// keeps its stack and waits callIdle (to twice that) for the next one
// before it exits. A call never waits for a goroutine: with none idle, a
// new one starts.
//
// Each idle goroutine waits on a channel of its own, on a stack of idle
// ones (the one idle the shortest takes the next call, its stack and
// caches still warm): a plain receive, where a select on the pool's
// channel, its stop and an idle timer cost a busy leader a tenth of its
// CPU in the scheduler, and no timer is moved per call. A sweeper retires
// the goroutines idle for a whole callIdle, every callIdle.

// callIdle is how long a serving goroutine waits for another call.
const callIdle = 10 * time.Second

// callPool hands calls to idle serving goroutines, starting new ones as
// needed.
type callPool struct {
	mu sync.Mutex
	// idle are the goroutines waiting for a call, the one idle the
	// longest first.
	idle []*callWorker
	// sweeps counts the sweeper's rounds (callIdle apart).
	sweeps  uint64
	stopped bool
	// workers counts the serving goroutines, idle or not.
	workers atomic.Int64
}

// callWorker is one serving goroutine: it receives its next call on
// calls (nil: exit), and went idle in the sweep round idleSince.
type callWorker struct {
	calls     chan func()
	idleSince uint64
}

// newCallPool returns an empty pool whose idle goroutines exit when stop
// is closed.
func newCallPool(stop <-chan struct{}) *callPool { return newCallPoolIdle(stop, callIdle) }

// newCallPoolIdle is newCallPool with idle goroutines retired after idle
// (to twice that) rather than callIdle.
func newCallPoolIdle(stop <-chan struct{}, idle time.Duration) *callPool {
	p := &callPool{}
	go p.sweep(stop, idle)
	return p
}

// run runs call on an idle goroutine, or on a new one if none is idle.
func (p *callPool) run(call func()) {
	p.mu.Lock()
	if k := len(p.idle); k > 0 {
		w := p.idle[k-1]
		p.idle[k-1] = nil
		p.idle = p.idle[:k-1]
		p.mu.Unlock()
		w.calls <- call // its buffer is empty: an idle worker was sent nothing yet
		return
	}
	p.mu.Unlock()
	p.workers.Add(1)
	go p.serve(&callWorker{calls: make(chan func(), 1)}, call)
}

// serve runs call, then the calls handed to w, until the sweeper retires
// it or the pool stops.
func (p *callPool) serve(w *callWorker, call func()) {
	defer p.workers.Add(-1)
	for call != nil {
		call()
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		w.idleSince = p.sweeps
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		call = <-w.calls
	}
}

// sweep retires, every idle, the goroutines idle since before the
// previous round (idle for that to twice that), and every idle one when
// stop is closed (a goroutine serving a call then exits after it).
func (p *callPool) sweep(stop <-chan struct{}, idle time.Duration) {
	t := time.NewTicker(idle)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.mu.Lock()
			p.sweeps++
			k := 0
			for k < len(p.idle) && p.idle[k].idleSince+2 <= p.sweeps {
				p.idle[k].calls <- nil
				k++
			}
			if k > 0 {
				rest := copy(p.idle, p.idle[k:])
				clear(p.idle[rest:])
				p.idle = p.idle[:rest]
			}
			p.mu.Unlock()
		case <-stop:
			p.mu.Lock()
			p.stopped = true
			for _, w := range p.idle {
				w.calls <- nil
			}
			p.idle = nil
			p.mu.Unlock()
			return
		}
	}
}
