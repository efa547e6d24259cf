package httplite

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// ErrProtocol is returned for a response this client cannot parse.
var ErrProtocol = errors.New("httplite: unsupported response")

// Conn is one keep-alive connection to addr. It is not safe for concurrent
// use; give each worker its own.
type Conn struct {
	addr    string
	timeout time.Duration
	tls     *tls.Config // nil: plain TCP
	header  string      // extra header lines, each ending in "\r\n"
	c       net.Conn
	br      *bufio.Reader
	wbuf    []byte
	body    []byte
}

// New returns a Conn that dials addr lazily and bounds each request by
// timeout.
func New(addr string, timeout time.Duration) *Conn {
	return &Conn{addr: addr, timeout: timeout}
}

// NewTLS is New over TLS with conf (nil: plain TCP), sending the extra
// header lines (each "Name: value", without line ends) with every request.
func NewTLS(addr string, timeout time.Duration, conf *tls.Config, header ...string) *Conn {
	c := &Conn{addr: addr, timeout: timeout, tls: conf}
	for _, h := range header {
		c.header += h + "\r\n"
	}
	return c
}

// Close closes the connection.
func (c *Conn) Close() error {
	if c.c == nil {
		return nil
	}
	err := c.c.Close()
	c.c = nil
	return err
}

// Do sends one request and returns the status code and the body (valid until
// the next call). On any error the connection is closed and redialled by the
// next call.
func (c *Conn) Do(method, path string, body []byte) (int, []byte, error) {
	if c.c == nil {
		nc, err := net.DialTimeout("tcp", c.addr, c.timeout)
		if err != nil {
			return 0, nil, err
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		if c.tls != nil {
			conf := c.tls.Clone()
			if conf.ServerName == "" {
				conf.ServerName, _, _ = net.SplitHostPort(c.addr)
			}
			tc := tls.Client(nc, conf)
			_ = tc.SetDeadline(time.Now().Add(c.timeout))
			if err := tc.Handshake(); err != nil {
				nc.Close()
				return 0, nil, err
			}
			nc = tc
		}
		c.c = nc
		c.br = bufio.NewReaderSize(nc, 16<<10)
	}
	code, resp, err := c.do(method, path, body)
	if err != nil {
		c.Close()
	}
	return code, resp, err
}

func (c *Conn) do(method, path string, body []byte) (int, []byte, error) {
	_ = c.c.SetDeadline(time.Now().Add(c.timeout))
	w := c.wbuf[:0]
	w = append(w, method...)
	w = append(w, ' ')
	w = append(w, path...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, c.addr...)
	w = append(w, "\r\n"...)
	w = append(w, c.header...)
	w = append(w, "Content-Type: application/json\r\nContent-Length: "...)
	w = strconv.AppendInt(w, int64(len(body)), 10)
	w = append(w, "\r\n\r\n"...)
	w = append(w, body...)
	c.wbuf = w
	if _, err := c.c.Write(w); err != nil {
		return 0, nil, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, fmt.Errorf("%w: status line %q", ErrProtocol, line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: status line %q", ErrProtocol, line)
	}
	length := -1
	closeAfter := false
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		if len(h) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(h, []byte(":")); ok {
			v = bytes.TrimSpace(v)
			switch {
			case bytes.EqualFold(k, []byte("Content-Length")):
				n, err := strconv.Atoi(string(v))
				if err != nil || n < 0 || n > 1<<20 {
					return 0, nil, fmt.Errorf("%w: Content-Length %q", ErrProtocol, v)
				}
				length = n
			case bytes.EqualFold(k, []byte("Connection")) && bytes.EqualFold(v, []byte("close")):
				closeAfter = true
			case bytes.EqualFold(k, []byte("Transfer-Encoding")):
				return 0, nil, fmt.Errorf("%w: Transfer-Encoding %q", ErrProtocol, v)
			}
		}
	}
	if length < 0 {
		return 0, nil, fmt.Errorf("%w: no Content-Length", ErrProtocol)
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		return 0, nil, err
	}
	if closeAfter {
		c.Close()
	}
	return code, c.body, nil
}
