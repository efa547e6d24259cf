package wire

import (
	"bufio"
	"net"
	"runtime"
	"sync"
	"time"
)

// writeTimeout bounds one flush to a peer that stopped reading.
const writeTimeout = 10 * time.Second

// WriterQueue is the number of frames that may wait for a Writer (Send
// waits beyond it, TrySend refuses).
const WriterQueue = 1024

// writerBatches is the number of SendAll batches that may wait for the
// writer: a batch holds many frames, so a peer that stops reading is
// stopped after a few.
const writerBatches = 4

// Writer owns a connection's write side: frames are queued, written into a
// buffer, and flushed when the queue is empty, so that a burst of frames
// shares one write system call while a lone frame leaves at once. A
// writer made with NewYieldingWriter yields once to the goroutines ready
// to run before it flushes when its busy reports more frames on their
// way, so that answers completed by the same event (a commit) join the
// flush. Frames queued together with SendAll share one unless they and the
// frames before them overflow the 64 KiB buffer. SendNow writes a frame on
// its sender's goroutine instead when the writer is idle. A write error
// closes the connection. Send, SendAll and SendNow report false once the
// writer has stopped (SendNow also when its own write failed);
// one that raced with its stop may report true for a frame never written,
// which the caller sees as the connection's failure.
type Writer struct {
	conn net.Conn
	// mu is held while bw is written or flushed: by the writer's
	// goroutine, or by a SendNow that found the writer idle.
	mu       sync.Mutex
	bw       *bufio.Writer
	q        chan Frame
	qAll     chan []Frame
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	busy     func() bool // nil: never yield
}

// NewWriter starts the writer of c.
func NewWriter(c net.Conn) *Writer { return NewYieldingWriter(c, nil) }

// NewYieldingWriter starts the writer of c, which yields once before a
// flush whenever busy (if not nil) reports that more frames are coming (a
// node's serving side passes whether calls of the connection have yet to
// queue their answers). busy is a hint, called on the writer's goroutine
// once per flush after the queue is drained, alongside the goroutines
// calling Send: it must be cheap, safe for that and must not block.
func NewYieldingWriter(c net.Conn, busy func() bool) *Writer {
	w := &Writer{busy: busy, conn: c, bw: bufio.NewWriterSize(c, 64<<10), q: make(chan Frame, WriterQueue), qAll: make(chan []Frame, writerBatches), stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *Writer) loop() {
	defer close(w.done)
	for {
		var err error
		select {
		case f := <-w.q:
			w.mu.Lock()
			_ = w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			err = WriteFrame(w.bw, f)
		case fs := <-w.qAll:
			w.mu.Lock()
			_ = w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			err = w.writeAll(fs)
		case <-w.stop:
			// Kept locked: a SendNow that raced with the stop finds
			// the writer busy and queues, and Send then reports false.
			w.mu.Lock()
			w.drain()
			return
		}
		if err == nil {
			err = w.writeQueued()
		}
		if err == nil && w.busy != nil && w.busy() {
			// More answers are on their way: before the system call,
			// let the goroutines woken by the same event (the answers
			// of one commit) queue theirs, so that they share it.
			runtime.Gosched()
			err = w.writeQueued()
		}
		if err == nil {
			err = w.bw.Flush()
		}
		w.mu.Unlock()
		if err != nil {
			w.conn.Close()
			return
		}
	}
}

// writeQueued writes the frames queued now into the buffer, without
// waiting for more.
func (w *Writer) writeQueued() error {
	for {
		select {
		case f := <-w.q:
			if err := WriteFrame(w.bw, f); err != nil {
				return err
			}
		case fs := <-w.qAll:
			if err := w.writeAll(fs); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// writeAll writes fs into the buffer.
func (w *Writer) writeAll(fs []Frame) error {
	for _, f := range fs {
		if err := WriteFrame(w.bw, f); err != nil {
			return err
		}
	}
	return nil
}

// drain writes what is queued and flushes.
func (w *Writer) drain() {
	// A fresh deadline: the last write's may have passed while the
	// connection was idle, and the frames queued last (a refusal before
	// the connection closes) would be lost to it.
	_ = w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if w.writeQueued() == nil {
		_ = w.bw.Flush()
	}
}

// Close stops the writer after writing what is queued, and waits for it.
func (w *Writer) Close() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

// SendAll queues frames to be written together, in one flush; false if
// the writer has stopped. The writer owns fs from then on.
func (w *Writer) SendAll(fs []Frame) bool {
	if w.stopped() {
		return false
	}
	select {
	case w.qAll <- fs:
		return true
	case <-w.done:
		return false
	}
}

// Send queues a frame; false if the writer has stopped.
func (w *Writer) Send(f Frame) bool {
	if w.stopped() {
		return false
	}
	select {
	case w.q <- f:
		return true
	case <-w.done:
		return false
	}
}

// TrySend queues a frame if the queue has room, without waiting: false if
// it is full (the peer stopped reading) or the writer has stopped. For a
// sender that must not be held up by one slow peer among many.
func (w *Writer) TrySend(f Frame) bool {
	if w.stopped() {
		return false
	}
	select {
	case w.q <- f:
		return true
	default:
		return false
	}
}

// SendNow writes f and flushes it on the calling goroutine when the
// writer is idle (nothing queued, no write under way), sparing the
// hand-off to the writer's goroutine: for a lone answer, as a worker's
// renewal gets, that hand-off is a goroutine wake-up per call. Otherwise it
// queues f as Send does. It reports false if the writer has stopped or the
// write failed (the failure closes the connection, as the writer's own).
func (w *Writer) SendNow(f Frame) bool {
	if w.stopped() {
		return false
	}
	if len(w.q) > 0 || len(w.qAll) > 0 || !w.mu.TryLock() {
		return w.Send(f)
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	err := WriteFrame(w.bw, f)
	if err == nil {
		err = w.bw.Flush()
	}
	w.mu.Unlock()
	if err != nil {
		w.conn.Close()
		return false
	}
	return true
}

// stopped reports whether the writer has stopped.
func (w *Writer) stopped() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}
