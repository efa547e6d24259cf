package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"
)

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
