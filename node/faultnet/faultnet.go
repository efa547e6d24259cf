package faultnet

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrUnreachable is returned by Dial across a partition or to an address
// nobody listens on.
var ErrUnreachable = errors.New("faultnet: host unreachable")

// Switch connects the hosts of one in-memory network.
type Switch struct {
	mu        sync.Mutex
	listeners map[string]*listener
	blocked   map[[2]string]bool // directed: from → to
	conns     map[*pipeConn]struct{}
}

// New returns an empty Switch.
func New() *Switch {
	return &Switch{listeners: map[string]*listener{}, blocked: map[[2]string]bool{}, conns: map[*pipeConn]struct{}{}}
}

// Host returns the Network of the host whose address is addr. Its Listen
// must be called with addr.
func (s *Switch) Host(addr string) *Host { return &Host{s: s, self: addr} }

// Block cuts traffic from → to (one way: to can still dial from, but
// connections carry data both ways, so a one-way cut also closes existing
// connections between the two).
func (s *Switch) Block(from, to string) {
	s.mu.Lock()
	s.blocked[[2]string{from, to}] = true
	var victims []*pipeConn
	for c := range s.conns {
		if (c.local == from && c.remote == to) || (c.local == to && c.remote == from) {
			victims = append(victims, c)
		}
	}
	s.mu.Unlock()
	for _, c := range victims {
		c.Close()
	}
}

// Isolate cuts addr off from every other host, both ways.
func (s *Switch) Isolate(addr string, others []string) {
	for _, o := range others {
		if o != addr {
			s.Block(addr, o)
			s.Block(o, addr)
		}
	}
}

// Partition splits hosts into the given groups: hosts in different groups
// cannot reach each other.
func (s *Switch) Partition(groups ...[]string) {
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					s.Block(a, b)
				}
			}
		}
	}
}

// Heal removes every partition.
func (s *Switch) Heal() {
	s.mu.Lock()
	s.blocked = map[[2]string]bool{}
	s.mu.Unlock()
}

// Host is one host's view of the Switch; it implements node.Network.
type Host struct {
	s    *Switch
	self string
}

// Listen registers the host's listener. addr must be the host's address.
func (h *Host) Listen(addr string) (net.Listener, error) {
	if addr != h.self {
		return nil, fmt.Errorf("faultnet: host %s cannot listen on %s", h.self, addr)
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if l, ok := h.s.listeners[addr]; ok && !l.isClosed() {
		return nil, fmt.Errorf("faultnet: %s: address already in use", addr)
	}
	l := &listener{s: h.s, addr: addr, ch: make(chan net.Conn, 16), done: make(chan struct{})}
	h.s.listeners[addr] = l
	return l, nil
}

// Dial connects to addr unless a partition is in the way.
func (h *Host) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	h.s.mu.Lock()
	l, ok := h.s.listeners[addr]
	blocked := h.s.blocked[[2]string{h.self, addr}] || h.s.blocked[[2]string{addr, h.self}]
	if !ok || blocked || l.isClosed() {
		h.s.mu.Unlock()
		return nil, fmt.Errorf("%w: %s → %s", ErrUnreachable, h.self, addr)
	}
	// Register under the same lock as the check, so that a Block racing
	// this dial sees and closes the new connection.
	a, b := net.Pipe()
	ca := &pipeConn{Conn: a, s: h.s, local: h.self, remote: addr}
	cb := &pipeConn{Conn: b, s: h.s, local: addr, remote: h.self}
	h.s.conns[ca] = struct{}{}
	h.s.conns[cb] = struct{}{}
	h.s.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l.ch <- cb:
		return ca, nil
	case <-l.done:
	case <-t.C:
	}
	ca.Close()
	cb.Close()
	return nil, fmt.Errorf("%w: %s → %s: not accepting", ErrUnreachable, h.self, addr)
}

type addr string

func (a addr) Network() string { return "faultnet" }
func (a addr) String() string  { return string(a) }

type listener struct {
	s    *Switch
	addr string
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *listener) Addr() net.Addr { return addr(l.addr) }

func (l *listener) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

type pipeConn struct {
	net.Conn
	s             *Switch
	local, remote string
	once          sync.Once
}

func (c *pipeConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

func (c *pipeConn) LocalAddr() net.Addr  { return addr(c.local) }
func (c *pipeConn) RemoteAddr() net.Addr { return addr(c.remote) }
