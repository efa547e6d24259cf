package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"
)

// TLSNetwork runs another Network's connections over mutual TLS 1.3: the
// node's listener accepts only peers whose certificate the cluster's CA
// signed (for client authentication), and its dialer checks that the peer
// it reaches holds a certificate of the same CA for the host it dialled
// (the name or IP address in the raft address) and presents its own. A
// stranger, one without a certificate or with one of another CA, cannot
// get a byte to raft or to the forwarding server: it can neither join,
// vote, append entries nor install a snapshot. Raft and forwarding share
// the port (the mux reads the kind byte after the handshake).
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
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13},
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
// peer that fails it fails the dial.
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
