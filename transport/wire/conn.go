package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrBroken reports a connection that failed: the calls pending on it have
// an unknown outcome (they may have been applied).
var ErrBroken = errors.New("wire: connection broken")

// answer is one answer, or the failure of the connection. receivedAt is
// when the reader had read its frame.
type answer struct {
	code       byte
	payload    []byte
	err        error
	receivedAt time.Time
}

// Conn is the calling side of one pipelined connection: any number of
// goroutines call at once; answers are paired with calls by id.
type Conn struct {
	conn net.Conn
	w    *Writer

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan answer
	broken  error
}

// NewConn starts the reader and writer of c, on which the caller has
// already written any preface.
func NewConn(c net.Conn) *Conn {
	fc := &Conn{conn: c, w: NewWriter(c), pending: make(map[uint64]chan answer)}
	go fc.readLoop()
	return fc
}

func (fc *Conn) readLoop() {
	br := bufio.NewReaderSize(fc.conn, 64<<10)
	for {
		f, err := ReadFrame(br)
		if err != nil {
			fc.Fail(fmt.Errorf("%w: reading from %s: %v", ErrBroken, fc.conn.RemoteAddr(), err))
			return
		}
		fc.mu.Lock()
		ch := fc.pending[f.ID]
		delete(fc.pending, f.ID)
		fc.mu.Unlock()
		if ch != nil {
			ch <- answer{code: f.Kind, payload: f.Payload, receivedAt: time.Now()}
		}
	}
}

// Fail closes the connection; every pending and later call returns err
// (the first failure wins).
func (fc *Conn) Fail(err error) {
	fc.mu.Lock()
	if fc.broken == nil {
		fc.broken = err
	}
	pending := fc.pending
	fc.pending = make(map[uint64]chan answer)
	fc.mu.Unlock()
	fc.conn.Close()
	go fc.w.Close()
	for _, ch := range pending {
		ch <- answer{err: err}
	}
}

// Broken reports whether the connection has failed.
func (fc *Conn) Broken() bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.broken != nil
}

// Call sends one request and waits for its answer code and payload, or for
// ctx. An error means no answer: the outcome is unknown when the request
// may have been written (a broken connection, a cancelled wait).
func (fc *Conn) Call(ctx context.Context, op byte, payload []byte) (byte, []byte, error) {
	code, resp, _, err := fc.CallTimed(ctx, op, payload)
	return code, resp, err
}

// CallTimed is Call, and also returns when the answer's frame was read off
// the connection (before the caller woke up): answers whose durations
// count from the moment they were sent use it to subtract the time they
// were held on this side.
func (fc *Conn) CallTimed(ctx context.Context, op byte, payload []byte) (byte, []byte, time.Time, error) {
	ch := make(chan answer, 1)
	fc.mu.Lock()
	if fc.broken != nil {
		err := fc.broken
		fc.mu.Unlock()
		return 0, nil, time.Time{}, err
	}
	fc.nextID++
	id := fc.nextID
	fc.pending[id] = ch
	fc.mu.Unlock()

	if !fc.w.Send(Frame{ID: id, Kind: op, Payload: payload}) {
		fc.Fail(fmt.Errorf("%w: write to %s failed (outcome unknown)", ErrBroken, fc.conn.RemoteAddr()))
	}
	select {
	case a := <-ch:
		return a.code, a.payload, a.receivedAt, a.err
	case <-ctx.Done():
		fc.mu.Lock()
		delete(fc.pending, id)
		fc.mu.Unlock()
		return 0, nil, time.Time{}, fmt.Errorf("wire: waiting for an answer from %s: %w", fc.conn.RemoteAddr(), ctx.Err())
	}
}

// Close closes the connection; pending calls fail with ErrBroken.
func (fc *Conn) Close() { fc.Fail(fmt.Errorf("%w: closed", ErrBroken)) }
