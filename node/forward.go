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

func writeFrame(w io.Writer, id uint64, kind byte, payload []byte) error {
	hdr := make([]byte, 13, 13+len(payload))
	binary.BigEndian.PutUint32(hdr[0:4], uint32(9+len(payload)))
	binary.BigEndian.PutUint64(hdr[4:12], id)
	hdr[12] = kind
	_, err := w.Write(append(hdr, payload...))
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

	wmu sync.Mutex
	bw  *bufio.Writer

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
	fc := &fwdConn{addr: addr, conn: c, bw: bufio.NewWriterSize(c, 64<<10), pending: make(map[uint64]chan fwdResult)}
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
	for _, ch := range pending {
		ch <- fwdResult{err: err}
	}
}

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

	fc.wmu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		_ = fc.conn.SetWriteDeadline(dl)
	} else {
		_ = fc.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	}
	err := writeFrame(fc.bw, id, op, payload)
	if err == nil {
		err = fc.bw.Flush()
	}
	fc.wmu.Unlock()
	if err != nil {
		fc.fail(fmt.Errorf("%w: write to leader %s: %v", ErrNoLeader, fc.addr, err))
		// The request may or may not have been sent: its outcome is unknown.
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

// serveForwarded serves one forwarding connection from a follower.
func (n *Node) serveForwarded(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	var wmu sync.Mutex
	bw := bufio.NewWriterSize(c, 64<<10)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		id, op, payload, err := readFrame(br)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
			resp, err := n.handleForwarded(ctx, op, payload)
			cancel()
			code := codeOf(err)
			if err != nil {
				resp = []byte(err.Error())
			}
			wmu.Lock()
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if werr := writeFrame(bw, id, code, resp); werr == nil {
				_ = bw.Flush()
			}
			wmu.Unlock()
		}()
	}
}

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
