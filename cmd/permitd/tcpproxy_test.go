package main

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// tcpProxy forwards loopback TCP connections to one target until it is
// cut: then it closes every connection it forwards and holds new ones
// open without forwarding or answering anything (a blackhole: the
// connection opens, the request gets no answer, as behind a firewall that
// drops the packets of established flows, or a hung proxy).
type tcpProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newTCPProxy listens on a free loopback port and forwards to target; it
// is closed when the test ends.
func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// addr is the proxy's address.
func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

// track adds c to the open connections, or reports false once closed.
func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tcpProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			continue // held open, never answered (closed by close)
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward pipes c to a new connection to the target.
func (p *tcpProxy) forward(c net.Conn) {
	defer p.wg.Done()
	up, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		p.untrack(c)
		c.Close()
		return
	}
	if !p.track(up) {
		up.Close()
		c.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
	p.untrack(c)
	p.untrack(up)
}

// cutOff closes every forwarded connection and blackholes new ones (a
// worker's client then finds its pooled connections gone and its new ones
// unanswered until its attempt timeout).
func (p *tcpProxy) cutOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// heal forwards new connections again (the held ones are closed).
func (p *tcpProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// close stops the proxy and closes every connection.
func (p *tcpProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
