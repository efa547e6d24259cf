package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// sniff.go: the HTTP port also speaks permitd's binary, pipelined reserve
// protocol (package wire). A connection whose first byte is
// wire.ClientPreface (0x00, which starts no HTTP request) is handed to
// the binary server; any other connection goes to the HTTP server with its
// first byte intact. Both share one address, so clients need no second
// port and firewalls no second rule.

// sniffTimeout bounds the wait for a new connection's first byte.
const sniffTimeout = 10 * time.Second

// BinaryServer serves one binary connection after its preface byte
// (Binary.Serve, or AuthenticatedBinary's). It closes the connection when
// done.
type BinaryServer func(net.Conn)

// sniffListener is a net.Listener for the HTTP server that diverts binary
// connections to a BinaryServer.
type sniffListener struct {
	ln     net.Listener
	binary BinaryServer
	conns  chan net.Conn
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	err    error
}

// NewSniffListener wraps ln: Accept returns the HTTP connections, and the
// binary ones are served by serve, each in its own goroutine. Closing the
// returned listener closes ln.
func NewSniffListener(ln net.Listener, serve BinaryServer) net.Listener {
	l := &sniffListener{ln: ln, binary: serve, conns: make(chan net.Conn), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *sniffListener) acceptLoop() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.fail(err)
			return
		}
		go l.route(c)
	}
}

// route reads c's first byte and hands c to the binary or the HTTP side.
func (l *sniffListener) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	var first [1]byte
	if _, err := c.Read(first[:]); err != nil {
		answerPlainHTTP(err)
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if first[0] == wire.ClientPreface {
		l.binary(c)
		return
	}
	select {
	case l.conns <- &prefixedConn{Conn: c, first: first[0], pending: true}:
	case <-l.done:
		c.Close()
	}
}

// PlainHTTPAnswer is the body of the 400 a TLS port answers a plain HTTP
// request with.
const PlainHTTPAnswer = "this port speaks TLS: use https:// (curl --cacert CA)\n"

// plainHTTPTimeout bounds the writing of that answer.
const plainHTTPTimeout = time.Second

// answerPlainHTTP answers a plain HTTP request that reached a TLS port
// (ln was a tls.Listener, and err is the failed handshake of the
// connection's first read) with a 400 that says so, as net/http's TLS
// server does, and closes the connection; any other error is left alone.
func answerPlainHTTP(err error) {
	var re tls.RecordHeaderError
	if !errors.As(err, &re) || re.Conn == nil || !looksLikeHTTP(re.RecordHeader) {
		return
	}
	_ = re.Conn.SetWriteDeadline(time.Now().Add(plainHTTPTimeout))
	fmt.Fprintf(re.Conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		len(PlainHTTPAnswer), PlainHTTPAnswer)
	re.Conn.Close()
}

// looksLikeHTTP reports whether the first five bytes of a connection
// start a plain HTTP request line of a method the API uses.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "DELET", "PATCH", "OPTIO":
		return true
	}
	return false
}

func (l *sniffListener) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
	l.once.Do(func() { close(l.done) })
}

// Accept returns the next HTTP connection.
func (l *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		return nil, l.err
	}
}

// Close closes the underlying listener.
func (l *sniffListener) Close() error {
	err := l.ln.Close()
	l.fail(net.ErrClosed)
	return err
}

// Addr is the underlying listener's address.
func (l *sniffListener) Addr() net.Addr { return l.ln.Addr() }

// prefixedConn gives back the byte the sniffer read before the rest of the
// stream.
type prefixedConn struct {
	net.Conn
	first   byte
	pending bool
}

func (c *prefixedConn) Read(p []byte) (int, error) {
	if c.pending && len(p) > 0 {
		p[0] = c.first
		c.pending = false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the connection when the underlying one can (the
// HTTP server uses it to flush before closing).
func (c *prefixedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
