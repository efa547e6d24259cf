package workload

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Cut modes of a cutProxy: what a partition between its clients and its
// target does to their TCP connections.
const (
	// CutDrop closes every connection at once (reset) and every new one
	// as soon as it is accepted: calls fail fast.
	CutDrop = "drop"
	// CutBlackhole forwards nothing either way: open connections hang
	// (their bytes are held, and delivered if the cut is lifted before
	// either end gives up, as TCP would), new ones are accepted but never
	// reach the target: calls time out, outcome unknown.
	CutBlackhole = "blackhole"
)

// cutProxy forwards TCP connections from a loopback listener to one
// target and can cut them (Cut), as a network partition between its
// clients and the target would. A relay reaches each register node
// through one, so that a fault can cut the relays off from the register
// and from nothing else, in either mode of the run.
type cutProxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	mode    string        // "", CutDrop or CutBlackhole
	changed chan struct{} // closed and replaced at every change of mode
	closed  bool
	conns   map[*proxyConn]struct{}
}

// proxyConn is one client connection and, once dialled, its target's.
type proxyConn struct {
	client, target net.Conn
	dead           bool // closed by a drop or Close
}

// newCutProxy listens on a free loopback port for target; serve starts
// forwarding.
func newCutProxy(target string) (*cutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("workload: no free port for a proxy to %s: %w", target, err)
	}
	return &cutProxy{target: target, ln: ln, changed: make(chan struct{}), conns: map[*proxyConn]struct{}{}}, nil
}

// Addr is the address the proxy's clients dial.
func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

// serve accepts and forwards until Close.
func (p *cutProxy) serve() {
	p.wg.Go(func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			pc := &proxyConn{client: c}
			if !p.track(pc) {
				return
			}
			p.wg.Go(func() { p.forward(pc) })
		}
	})
}

// track registers pc; false (pc closed) once the proxy is closed.
func (p *cutProxy) track(pc *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		pc.client.Close()
		return false
	}
	p.conns[pc] = struct{}{}
	return true
}

// forward connects pc to the target once the proxy passes traffic and
// copies both ways until either side ends or pc is dropped.
func (p *cutProxy) forward(pc *proxyConn) {
	defer p.release(pc)
	if !p.pass(pc) {
		return
	}
	t, err := net.Dial("tcp", p.target)
	if err != nil {
		return // the target is down: the client sees its connection close
	}
	p.mu.Lock()
	if pc.dead {
		p.mu.Unlock()
		t.Close()
		return
	}
	pc.target = t
	p.mu.Unlock()
	var both sync.WaitGroup
	both.Go(func() { p.copy(pc, t, pc.client) })
	both.Go(func() { p.copy(pc, pc.client, t) })
	both.Wait()
}

// copy copies src to dst while the proxy passes traffic, then half-closes
// dst (the other direction may still be answering).
func (p *cutProxy) copy(pc *proxyConn, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(pc) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite()
				return
			}
			// A reset or a drop: end both directions.
			pc.client.Close()
			dst.Close()
			return
		}
	}
}

// pass waits while the proxy blackholes traffic and reports whether pc
// may go on (false: it was dropped or the proxy closed).
func (p *cutProxy) pass(pc *proxyConn) bool {
	for {
		p.mu.Lock()
		mode, changed, dead := p.mode, p.changed, pc.dead || p.closed
		p.mu.Unlock()
		switch {
		case dead || mode == CutDrop:
			return false
		case mode == "":
			return true
		}
		<-changed
	}
}

// release closes pc and forgets it.
func (p *cutProxy) release(pc *proxyConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	closeConn(pc)
	delete(p.conns, pc)
}

// closeConn closes both of pc's connections with a reset (linger 0), as a
// cut does, and marks it dead. Called with p.mu held.
func closeConn(pc *proxyConn) {
	pc.dead = true
	for _, c := range []net.Conn{pc.client, pc.target} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		if c != nil {
			c.Close()
		}
	}
}

// Cut sets the proxy's mode: CutDrop, CutBlackhole, or "" to pass traffic
// again. A drop closes every open connection at once.
func (p *cutProxy) Cut(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	if mode == CutDrop {
		for pc := range p.conns {
			closeConn(pc)
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// Close stops the proxy: no new connections, every open one closed; it
// returns when its goroutines are done.
func (p *cutProxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.ln.Close()
		for pc := range p.conns {
			closeConn(pc)
		}
		close(p.changed)
		p.changed = make(chan struct{})
	}
	p.mu.Unlock()
	p.wg.Wait()
}
