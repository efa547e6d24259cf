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
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// forward.go: followers forward client requests to the leader over one
// persistent, pipelined connection per leader (multiplexed on the raft
// port), in package wire's framing. Many calls are in flight on one
// connection at once; the leader serves each call in its own goroutine, so
// forwarded reserves join the leader's batches like local ones. The same
// server loop serves binary clients (ServeClient), reserves only.

func codeOf(err error) byte {
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
// leader sent with it (see servePipelined: Message, never the wrapped
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
	n.servePipelined(c, wire.MaxFrame, nil, func(ctx context.Context, op byte, payload []byte, _ bool) ([]byte, error) {
		if op == wire.OpProgress {
			return n.progressAnswer(payload) // any node answers the leader's probe (promote.go)
		}
		return n.handleForwarded(ctx, op, payload)
	})
}

// ServeClient serves one binary client connection (package transport/wire) whose
// preface byte the caller has already read: reserves only, each decided as
// Reserve decides it (a follower forwards to the leader). Any other
// operation is answered CodeInvalid. It returns when the connection fails
// or the node stops, and closes c.
func (n *Node) ServeClient(c net.Conn) { n.ServeClientWith(c, nil) }

// Authorizer decides whether a binary client may make a call: op, and the
// limit it names ("" for a call that names none, or before it is
// decoded). A non-nil error refuses the call with ErrForbidden and its
// message.
type Authorizer func(op byte, limit string) error

// ServeClientWith is ServeClient with every call first checked by allow
// (nil: all allowed): lease commands before they are decoded (their role
// is the whole rule), a reserve once its limit is known. A refused call
// is answered CodeForbidden and reaches nothing else.
func (n *Node) ServeClientWith(c net.Conn, allow Authorizer) {
	n.ServeClientAs(c, allow, fsm.OpenSession{})
}

// ServeClientAs is ServeClientWith for a client whose sessions are opened
// for open: its owner (the connection's token) and the owner's quota (see
// fsm.OpenSession). Its reserves of sessions carry the same owner, so that
// it uses only sessions opened with the same token (fsm.Reserve.Owner).
func (n *Node) ServeClientAs(c net.Conn, allow Authorizer, open fsm.OpenSession) {
	admit := func(op byte, payload []byte) admission { return n.admitAtRead(op, payload, allow) }
	n.servePipelined(c, wire.MaxClientFrame, admit, func(ctx context.Context, op byte, payload []byte, held bool) ([]byte, error) {
		return n.handleClient(ctx, op, payload, allow, open, held)
	})
}

// refusal is the error of a call the Authorizer refused: ErrUnauthenticated
// if it says so (a revoked token), else ErrForbidden, with its message.
func refusal(err error) error {
	if errors.Is(err, ErrUnauthenticated) {
		return userErrorf(ErrUnauthenticated, "%s", strings.TrimPrefix(err.Error(), ErrUnauthenticated.Error()+": "))
	}
	return userErrorf(ErrForbidden, "%s", err.Error())
}

// handleClient serves one call of a binary client: a reserve (of a
// session: as open's owner), the opening of a session (for open's owner
// and quota), or a lease command.
func (n *Node) handleClient(ctx context.Context, op byte, payload []byte, allow Authorizer, open fsm.OpenSession, held bool) ([]byte, error) {
	if op == wire.OpAuth {
		// Authentication is the listener's (ServeClientWith's caller);
		// here it was not required, or already done: a no-op, so that
		// clients can be given tokens before the nodes require them.
		return nil, nil
	}
	if allow != nil && op != wire.OpReserve {
		if err := allow(op, ""); err != nil {
			return nil, refusal(err)
		}
	}
	if op == wire.OpOpenSession {
		if len(payload) != 0 {
			return nil, fmt.Errorf("%w: open session takes no payload (%d bytes)", ErrInvalid, len(payload))
		}
		res, err := n.OpenSession(ctx, open)
		if err != nil {
			return nil, err
		}
		return wire.EncodeSessionResult(toWireSession(res)), nil
	}
	switch op {
	case wire.OpLease, wire.OpRenew, wire.OpReturn:
		return n.handleClientLease(ctx, op, payload)
	case wire.OpLeaseBatch:
		return n.handleClientLeaseBatch(ctx, payload, allow)
	case wire.OpReserve:
	default:
		return nil, fmt.Errorf("%w: operation %d on a client connection: allowed: %d (reserve), %d (open session), %d-%d (lease, renew, return), %d (lease batch)",
			ErrInvalid, op, wire.OpReserve, wire.OpOpenSession, wire.OpLease, wire.OpReturn, wire.OpLeaseBatch)
	}
	r, err := wire.DecodeReserve(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if allow != nil {
		if err := allow(op, r.Limit); err != nil {
			return nil, refusal(err)
		}
	}
	res, err := n.reserve(ctx, ReserveFromWire(r, open.Owner), held)
	if err != nil {
		return nil, err
	}
	return wire.EncodeReserveResult(toWireResult(res)), nil
}

// servePipelined reads calls of at most maxFrame bytes from c and answers
// each through handle, on a goroutine of its own (from the node's call
// pool; at most maxForwardedInflight at once per connection). A malformed
// frame ends the connection. Once a call has its slot on the connection
// (so one connection is still slowed by its window rather than shed),
// admit (if not nil) decides it in the read loop: admitShed answers it
// CodeOverloaded from the read loop itself, admitHeld serves it with the
// reserve slot admit took (handle is told, and the slot is given back
// when handle returns), admitServe serves it as it is (admitAtRead).
func (n *Node) servePipelined(c net.Conn, maxFrame uint32, admit func(op byte, payload []byte) admission, handle func(ctx context.Context, op byte, payload []byte, held bool) ([]byte, error)) {
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
		f, err := wire.ReadFrameLimit(br, maxFrame)
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
		decision := admitServe
		if admit != nil {
			decision = admit(f.Kind, f.Payload)
		}
		if decision == admitShed {
			<-sem
			refusals = append(refusals, wire.Frame{ID: f.ID, Kind: wire.CodeOverloaded, Payload: n.overloadedMsg})
			continue
		}
		held := decision == admitHeld
		wg.Add(1)
		answersToCome.Add(1)
		n.calls.run(func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
			// A reserve that waits in an in-flight cap's queue gives its
			// place in the window back (waiters.go): waiting, it would
			// stall the connection's later calls, among them the release
			// it waits for.
			ctx, leave := withAdmission(ctx, func() { <-sem })
			defer leave()
			resp, err := handle(ctx, f.Kind, f.Payload, held)
			cancel()
			if held {
				n.pending.Add(-1)
			}
			code := codeOf(err)
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

// handleClientLease serves a binary client's lease, renew or return: the
// payload is decoded, converted and validated as the HTTP API's body is
// (a weight of 0 is the default, 1), and the register's outcome
// (granted, refused, fenced, returned) is the answer; an unknown or
// unleased limit and an invalid command are errors, as over HTTP.
func (n *Node) handleClientLease(ctx context.Context, op byte, payload []byte) ([]byte, error) {
	var res fsm.LeaseResult
	var err error
	switch op {
	case wire.OpLease:
		q, derr := wire.DecodeLeaseOpen(payload)
		if derr != nil {
			return nil, fmt.Errorf("%w: lease: %v", ErrInvalid, derr)
		}
		res, err = n.Lease(ctx, leaseFromWire(q))
	case wire.OpRenew:
		q, derr := wire.DecodeLeaseRenew(payload)
		if derr != nil {
			return nil, fmt.Errorf("%w: renew: %v", ErrInvalid, derr)
		}
		res, err = n.Renew(ctx, renewFromWire(q))
	default:
		q, derr := wire.DecodeLeaseReturn(payload)
		if derr != nil {
			return nil, fmt.Errorf("%w: return: %v", ErrInvalid, derr)
		}
		res, err = n.Return(ctx, fsm.Return{Report: reportFromWire(q), RequestID: q.RequestID})
	}
	if err != nil {
		return nil, err
	}
	return wire.EncodeLeaseResult(toWireLeaseResult(res)), nil
}
