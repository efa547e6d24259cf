package faultnet

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// tcpconn.go: the listener and connection wrappers of TCPFaults. A
// connection's writes pass through its fault schedule: a lost write is
// dropped whole, a delayed one queued and written in order by the
// connection's pump.

type tcpListener struct {
	net.Listener
	f *TCPFaults
}

// Accept returns the next connection from a peer that is not blocked;
// connections from blocked peers are closed as they arrive.
func (l *tcpListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := ""
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			host = a.IP.String()
		}
		tc, err := l.f.track(c, c.RemoteAddr().String(), host, false)
		if err != nil {
			continue // refused: a blocked peer
		}
		return tc, nil
	}
}

// chunk is a write held back until due.
type chunk struct {
	data []byte
	due  time.Time
}

// tcpConn is a tracked connection: Close unregisters it; Write applies loss
// and delay.
type tcpConn struct {
	net.Conn
	f        *TCPFaults
	peer     string // outbound: the address dialed; inbound: the remote address
	peerHost string
	outbound bool
	once     sync.Once

	qmu     sync.Mutex
	cond    *sync.Cond
	queue   []chunk
	queued  int
	pumping bool
	lastDue time.Time
	werr    error
	closed  bool
}

// Write sends b, or queues it when a delay is set; with loss it may break
// the connection instead.
func (c *tcpConn) Write(b []byte) (int, error) {
	lost, hold := c.f.writeFault()
	if lost {
		c.Close()
		return 0, fmt.Errorf("%w: connection %s ↔ %s broken (loss)", ErrBlocked, c.f.self, c.peer)
	}
	c.qmu.Lock()
	if c.werr != nil {
		err := c.werr
		c.qmu.Unlock()
		return 0, err
	}
	if hold <= 0 && !c.pumping {
		c.qmu.Unlock()
		return c.Conn.Write(b)
	}
	for c.queued > 0 && c.queued+len(b) > maxQueuedBytes && c.werr == nil && !c.closed {
		c.cond.Wait()
	}
	if c.werr != nil || c.closed {
		err := c.werr
		c.qmu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return 0, err
	}
	due := time.Now().Add(hold)
	if due.Before(c.lastDue) {
		due = c.lastDue // keep the stream in order
	}
	c.lastDue = due
	c.queue = append(c.queue, chunk{data: append([]byte(nil), b...), due: due})
	c.queued += len(b)
	if !c.pumping {
		c.pumping = true
		go c.pump()
	}
	c.qmu.Unlock()
	return len(b), nil
}

// pump writes queued chunks when due, until the queue is empty.
func (c *tcpConn) pump() {
	for {
		c.qmu.Lock()
		if len(c.queue) == 0 || c.closed || c.werr != nil {
			c.pumping = false
			c.queue, c.queued = nil, 0
			c.cond.Broadcast()
			c.qmu.Unlock()
			return
		}
		next := c.queue[0]
		c.qmu.Unlock()
		if d := time.Until(next.due); d > 0 {
			time.Sleep(d) // bounded by the largest delay + jitter set
		}
		_, err := c.Conn.Write(next.data)
		c.qmu.Lock()
		c.queue = c.queue[1:]
		c.queued -= len(next.data)
		if err != nil && c.werr == nil {
			c.werr = err
		}
		c.cond.Broadcast()
		c.qmu.Unlock()
		if err != nil {
			c.Close()
		}
	}
}

// Close closes the connection and forgets it.
func (c *tcpConn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
		c.qmu.Lock()
		c.closed = true
		c.cond.Broadcast()
		c.qmu.Unlock()
	})
	return c.Conn.Close()
}
