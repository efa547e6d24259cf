package wire

import (
	"bufio"
	"net"
	"sync"
	"time"
)

// writeTimeout bounds one flush to a peer that stopped reading.
const writeTimeout = 10 * time.Second

// writerQueue is the number of frames that may wait for the writer.
const writerQueue = 1024

// Writer owns a connection's write side: frames are queued, written into a
// buffer, and flushed when the queue is empty, so that a burst of frames
// shares one write system call while a lone frame leaves at once. A write
// error closes the connection.
type Writer struct {
	conn     net.Conn
	bw       *bufio.Writer
	q        chan Frame
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// NewWriter starts the writer of c.
func NewWriter(c net.Conn) *Writer {
	w := &Writer{conn: c, bw: bufio.NewWriterSize(c, 64<<10), q: make(chan Frame, writerQueue), stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *Writer) loop() {
	defer close(w.done)
	for {
		var f Frame
		select {
		case f = <-w.q:
		case <-w.stop:
			w.drain()
			return
		}
		_ = w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		err := WriteFrame(w.bw, f)
	more:
		for err == nil {
			select {
			case f = <-w.q:
				err = WriteFrame(w.bw, f)
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

// drain writes what is queued and flushes.
func (w *Writer) drain() {
	for {
		select {
		case f := <-w.q:
			if WriteFrame(w.bw, f) != nil {
				return
			}
		default:
			_ = w.bw.Flush()
			return
		}
	}
}

// Close stops the writer after writing what is queued, and waits for it.
func (w *Writer) Close() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

// Send queues a frame; false if the writer has stopped.
func (w *Writer) Send(f Frame) bool {
	select {
	case w.q <- f:
		return true
	case <-w.done:
		return false
	}
}
