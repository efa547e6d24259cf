package node

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// forward.go: followers forward client requests to the leader over one
// persistent, pipelined connection per leader (multiplexed on the raft
// port). A frame is [u32 length][u64 call id][u8 op or code][payload]. Many
// calls are in flight on one connection at once; the leader serves each call
// in its own goroutine, so forwarded reserves join the leader's batches like
// local ones.

// Forwarded operations.
const (
	opReserve byte = 1
	opPut     byte = 2
	opDelete  byte = 3
	opRead    byte = 4
	opJoin    byte = 5
	opRemove  byte = 6
	// Lease commands and the lease view (lease.go).
	opLeasePolicy byte = 7
	opLease       byte = 8
	opRenew       byte = 9
	opReturn      byte = 10
	opLeaseView   byte = 11
)

// Response codes.
const (
	codeOK       byte = 0
	codeNotFound byte = 1
	codeInvalid  byte = 2
	codeNoLeader byte = 3
	codeError    byte = 4
)

const maxFrame = 4 << 20

func codeOf(err error) byte {
	switch {
	case err == nil:
		return codeOK
	case errors.Is(err, ErrNotFound):
		return codeNotFound
	case errors.Is(err, ErrInvalid):
		return codeInvalid
	case errors.Is(err, ErrNoLeader), errors.Is(err, ErrShutdown):
		return codeNoLeader
	}
	return codeError
}

func errOf(code byte, msg string) error {
	switch code {
	case codeOK:
		return nil
	case codeNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, msg)
	case codeInvalid:
		return fmt.Errorf("%w: %s", ErrInvalid, msg)
	case codeNoLeader:
		return fmt.Errorf("%w: leader says: %s", ErrNoLeader, msg)
	}
	return fmt.Errorf("node: leader failed the request: %s", msg)
}

func writeFrame(w *bufio.Writer, id uint64, kind byte, payload []byte) error {
	if len(payload) > maxFrame-9 {
		return fmt.Errorf("node: forwarding frame of %d bytes: allowed at most %d", len(payload)+9, maxFrame)
	}
	var hdr [13]byte
	binary.BigEndian.PutUint32(hdr[0:4], uint32(9+len(payload)))
	binary.BigEndian.PutUint64(hdr[4:12], id)
	hdr[12] = kind
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

func readFrame(r io.Reader) (id uint64, kind byte, payload []byte, err error) {
	var hdr [13]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n < 9 || n > maxFrame {
		return 0, 0, nil, fmt.Errorf("node: forwarding frame of %d bytes: allowed 9..%d", n, maxFrame)
	}
	payload = make([]byte, n-9)
	if _, err = io.ReadFull(r, payload); err != nil {
		return 0, 0, nil, err
	}
	return binary.BigEndian.Uint64(hdr[4:12]), hdr[12], payload, nil
}

// outFrame is one frame queued for a connection's writer.
type outFrame struct {
	id      uint64
	kind    byte
	payload []byte
}

// frameWriter owns a connection's write side: frames are queued, written
// into a buffer, and flushed when the queue is empty, so that a burst of
// frames shares one write syscall while a lone frame leaves at once.
type frameWriter struct {
	conn     net.Conn
	bw       *bufio.Writer
	q        chan outFrame
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func newFrameWriter(c net.Conn) *frameWriter {
	w := &frameWriter{conn: c, bw: bufio.NewWriterSize(c, 64<<10), q: make(chan outFrame, 1024), stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *frameWriter) loop() {
	defer close(w.done)
	for {
		var f outFrame
		select {
		case f = <-w.q:
		case <-w.stop:
			// Write what is queued, then stop.
			for {
				select {
				case f = <-w.q:
					if writeFrame(w.bw, f.id, f.kind, f.payload) != nil {
						return
					}
				default:
					_ = w.bw.Flush()
					return
				}
			}
		}
		_ = w.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		err := writeFrame(w.bw, f.id, f.kind, f.payload)
	more:
		for err == nil {
			select {
			case f = <-w.q:
				err = writeFrame(w.bw, f.id, f.kind, f.payload)
			default:
				break more
			}
		}
		if err == nil {
			err = w.bw.Flush()
		}
		if err != nil {
			w.conn.Close()
			return
		}
	}
}

// close stops the writer after writing what is queued, and waits for it.
func (w *frameWriter) close() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

// send queues a frame; false if the writer has stopped.
func (w *frameWriter) send(f outFrame) bool {
	select {
	case w.q <- f:
		return true
	case <-w.done:
		return false
	}
}

// fwdResult is one answer from the leader.
type fwdResult struct {
	code    byte
	payload []byte
	err     error
}

// fwdConn is one pipelined connection to a leader.
type fwdConn struct {
	addr string
	conn net.Conn
	w    *frameWriter

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan fwdResult
	broken  error
}

func newFwdConn(network Network, addr string, timeout time.Duration) (*fwdConn, error) {
	c, err := dialKind(network, addr, timeout, connForward)
	if err != nil {
		return nil, err
	}
	fc := &fwdConn{addr: addr, conn: c, w: newFrameWriter(c), pending: make(map[uint64]chan fwdResult)}
	go fc.readLoop()
	return fc, nil
}

func (fc *fwdConn) readLoop() {
	br := bufio.NewReaderSize(fc.conn, 64<<10)
	for {
		id, code, payload, err := readFrame(br)
		if err != nil {
			fc.fail(fmt.Errorf("%w: connection to leader %s: %v", ErrNoLeader, fc.addr, err))
			return
		}
		fc.mu.Lock()
		ch := fc.pending[id]
		delete(fc.pending, id)
		fc.mu.Unlock()
		if ch != nil {
			ch <- fwdResult{code: code, payload: payload}
		}
	}
}

func (fc *fwdConn) fail(err error) {
	fc.mu.Lock()
	if fc.broken == nil {
		fc.broken = err
	}
	pending := fc.pending
	fc.pending = make(map[uint64]chan fwdResult)
	fc.mu.Unlock()
	fc.conn.Close()
	fc.closeWriter()
	for _, ch := range pending {
		ch <- fwdResult{err: err}
	}
}

func (fc *fwdConn) closeWriter() { go fc.w.close() }

func (fc *fwdConn) isBroken() bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.broken != nil
}

// call sends one request and waits for its answer or ctx.
func (fc *fwdConn) call(ctx context.Context, op byte, payload []byte) (byte, []byte, error) {
	ch := make(chan fwdResult, 1)
	fc.mu.Lock()
	if fc.broken != nil {
		err := fc.broken
		fc.mu.Unlock()
		return 0, nil, err
	}
	fc.nextID++
	id := fc.nextID
	fc.pending[id] = ch
	fc.mu.Unlock()

	if !fc.w.send(outFrame{id: id, kind: op, payload: payload}) {
		// The request may or may not have been written: its outcome is
		// unknown.
		fc.fail(fmt.Errorf("%w: write to leader %s failed (outcome unknown)", ErrNoLeader, fc.addr))
	}
	select {
	case r := <-ch:
		return r.code, r.payload, r.err
	case <-ctx.Done():
		fc.mu.Lock()
		delete(fc.pending, id)
		fc.mu.Unlock()
		return 0, nil, fmt.Errorf("%w: waiting for leader %s: %v", ErrNoLeader, fc.addr, ctx.Err())
	}
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
	if f.conn != nil && f.conn.addr == addr && !f.conn.isBroken() {
		return f.conn, nil
	}
	if f.conn != nil {
		f.conn.fail(fmt.Errorf("%w: leader changed", ErrNoLeader))
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
		f.conn.fail(ErrShutdown)
		f.conn = nil
	}
}

// forward sends op to the leader at addr and maps the answer's code to an
// error; on codeOK it returns the payload.
func (f *forwarder) forward(ctx context.Context, addr string, op byte, payload []byte) ([]byte, error) {
	c, err := f.get(addr)
	if err != nil {
		return nil, err
	}
	code, resp, err := c.call(ctx, op, payload)
	if err != nil {
		return nil, err
	}
	if code != codeOK {
		return nil, errOf(code, string(resp))
	}
	return resp, nil
}

// serveForwarded serves one forwarding connection from a follower: each
// call runs in its own goroutine (bounded per connection) so that forwarded
// reserves join the leader's batches; answers share the frame writer.
func (n *Node) serveForwarded(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	w := newFrameWriter(c)
	sem := make(chan struct{}, maxForwardedInflight)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		w.close()
	}()
	for {
		id, op, payload, err := readFrame(br)
		if err != nil {
			return
		}
		select {
		case sem <- struct{}{}:
		case <-n.stopCh:
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
			resp, err := n.handleForwarded(ctx, op, payload)
			cancel()
			code := codeOf(err)
			if err != nil {
				resp = []byte(err.Error())
			}
			if len(resp) > maxFrame-9 {
				code, resp = codeError, []byte("answer too large for one frame")
			}
			w.send(outFrame{id: id, kind: code, payload: resp})
		}()
	}
}

// maxForwardedInflight bounds the calls served at once on one forwarding
// connection.
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
