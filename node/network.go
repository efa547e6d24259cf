package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// network.go: the connections of the raft port: the Network seam (TCP, and
// mutual TLS around any Network, TLSNetwork), and the port's multiplexing
// of raft and forwarding (mux).

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

// TLSNetwork runs another Network's connections over mutual TLS 1.3: the
// node's listener accepts only peers whose certificate the cluster's CA
// signed for both server and client authentication (a node certificate
// of `permitd certs create`; an API client certificate of the same CA,
// client authentication only, is refused), and its dialer checks that the
// peer it reaches holds a certificate of the same CA for the host it
// dialled (the name or IP address in the raft address) and presents its
// own. A stranger, one without a certificate, with one of another CA or
// with a client certificate, cannot get a byte to raft or to the
// forwarding server: it can neither join, vote, append entries nor
// install a snapshot. Raft and forwarding share the port (the mux reads
// the kind byte after the handshake).
type TLSNetwork struct {
	inner  Network
	server *tls.Config
	client *tls.Config
}

// NewTLSNetwork returns inner over mutual TLS with the node's certificate
// cert (server and client authentication) and the cluster's CA roots.
func NewTLSNetwork(inner Network, cert tls.Certificate, roots *x509.CertPool) *TLSNetwork {
	return &TLSNetwork{
		inner: inner,
		server: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: roots,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
			VerifyConnection: requireNodeCertificate},
		client: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS13},
	}
}

// Listen implements Network: connections accepted on addr handshake on
// their first read (the mux's kind byte, under its deadline).
func (n *TLSNetwork) Listen(addr string) (net.Listener, error) {
	ln, err := n.inner.Listen(addr)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(ln, n.server), nil
}

// Dial implements Network: the handshake completes within timeout, so a
// peer whose certificate this node refuses fails the dial; a peer that
// refuses this node's certificate closes the connection after it (TLS
// 1.3), which its first read reports.
func (n *TLSNetwork) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("node: tls dial %s: %w", addr, err)
	}
	start := time.Now()
	c, err := n.inner.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	conf := n.client.Clone()
	conf.ServerName = host
	tc := tls.Client(c, conf)
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout-time.Since(start), time.Millisecond))
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("node: tls handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// requireNodeCertificate refuses a peer whose (already verified)
// certificate is not a node's: one valid for server authentication too,
// as every node certificate is (it also serves the node's listener).
func requireNodeCertificate(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("node: tls: no peer certificate")
	}
	for _, u := range cs.PeerCertificates[0].ExtKeyUsage {
		if u == x509.ExtKeyUsageServerAuth {
			return nil
		}
	}
	return fmt.Errorf("node: tls: peer certificate %q is not a node certificate (no server authentication usage): raft and forwarding accept nodes only", cs.PeerCertificates[0].Subject.CommonName)
}
