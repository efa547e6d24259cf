package node

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Network is the seam between a node and the wire: every byte raft and
// request forwarding exchange goes through a listener and dialer from here.
// TCPNetwork is the real one; tests and jepsen-lite's fallback mode wrap it to
// inject partitions, loss and delay (see package faultnet).
type Network interface {
	// Listen opens the node's listener on addr.
	Listen(addr string) (net.Listener, error)
	// Dial connects to addr within timeout.
	Dial(addr string, timeout time.Duration) (net.Conn, error)
}

// TCPNetwork is the plain TCP Network.
type TCPNetwork struct{}

// Listen implements Network.
func (TCPNetwork) Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

// Dial implements Network.
func (TCPNetwork) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return c, nil
}

// Connection kinds: the first byte a dialer writes on a new connection, so
// that raft and forwarding share the raft port.
const (
	connRaft    byte = 'R'
	connForward byte = 'F'
)

var errMuxClosed = errors.New("node: listener closed")

// mux accepts connections on the raft port and hands each to raft or to the
// forwarding server according to its first byte.
type mux struct {
	ln      net.Listener
	network Network
	raftCh  chan net.Conn
	fwdCh   chan net.Conn
	closed  chan struct{}
	once    sync.Once
	advAddr net.Addr
}

func newMux(network Network, addr string) (*mux, error) {
	ln, err := network.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("node: listen on raft address %s: %w", addr, err)
	}
	m := &mux{ln: ln, network: network, raftCh: make(chan net.Conn), fwdCh: make(chan net.Conn), closed: make(chan struct{}), advAddr: ln.Addr()}
	go m.serve()
	return m, nil
}

func (m *mux) serve() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// A permanent accept error: stop serving.
			m.close()
			return
		}
		go m.route(c)
	}
}

func (m *mux) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var kind [1]byte
	if _, err := io.ReadFull(c, kind[:]); err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	var ch chan net.Conn
	switch kind[0] {
	case connRaft:
		ch = m.raftCh
	case connForward:
		ch = m.fwdCh
	default:
		c.Close()
		return
	}
	select {
	case ch <- c:
	case <-m.closed:
		c.Close()
	}
}

func (m *mux) close() {
	m.once.Do(func() {
		close(m.closed)
		m.ln.Close()
	})
}

// raftLayer is the raft.StreamLayer over the mux.
type raftLayer struct{ m *mux }

var _ raft.StreamLayer = raftLayer{}

// Accept implements net.Listener.
func (l raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.m.raftCh:
		return c, nil
	case <-l.m.closed:
		return nil, errMuxClosed
	}
}

// Close implements net.Listener.
func (l raftLayer) Close() error { l.m.close(); return nil }

// Addr implements net.Listener.
func (l raftLayer) Addr() net.Addr { return l.m.advAddr }

// Dial implements raft.StreamLayer.
func (l raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return dialKind(l.m.network, string(address), timeout, connRaft)
}

func dialKind(network Network, addr string, timeout time.Duration, kind byte) (net.Conn, error) {
	c, err := network.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{kind}); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}
