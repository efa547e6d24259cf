package demo

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/devcerts"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/tlsfiles"
)

// secure.go: `permitd demo --secure` runs the demo as a secured
// cluster would run: a CA and node certificates from devcerts, raft over
// mutual TLS, the API over TLS, and an admin token every client presents.

// demoSecurity is the secured demo's material (nil: the plain demo).
type demoSecurity struct {
	dir    string
	roots  *x509.CertPool
	api    map[string]*tls.Config // by node ID
	nodes  map[string]tls.Certificate
	client *tls.Config
	secret string
	tokens *auth.TokenStore
}

// newDemoSecurity makes certificates for ids (valid for 127.0.0.1) in a
// temporary folder, and one admin token.
func newDemoSecurity(ids []string) (*demoSecurity, error) {
	dir, err := os.MkdirTemp("", "permitd-demo-certs-")
	if err != nil {
		return nil, err
	}
	s := &demoSecurity{dir: dir, api: map[string]*tls.Config{}, nodes: map[string]tls.Certificate{}}
	if _, err := devcerts.Create(devcerts.Request{Dir: dir, Nodes: ids, Hosts: []string{"127.0.0.1"}, Validity: time.Hour, Now: time.Now()}); err != nil {
		return nil, err
	}
	ca := filepath.Join(dir, devcerts.CACert)
	if s.roots, err = tlsfiles.Roots(ca); err != nil {
		return nil, err
	}
	for _, id := range ids {
		cert, key := devcerts.NodeFiles(id)
		pair, err := tlsfiles.Pair(filepath.Join(dir, cert), filepath.Join(dir, key))
		if err != nil {
			return nil, err
		}
		s.nodes[id] = pair
		if s.api[id], err = tlsfiles.Server(filepath.Join(dir, cert), filepath.Join(dir, key), "", false); err != nil {
			return nil, err
		}
	}
	if s.client, err = tlsfiles.Client(ca, "", ""); err != nil {
		return nil, err
	}
	secret, line, err := auth.NewSecret("demo", auth.RoleAdmin, nil)
	if err != nil {
		return nil, err
	}
	ts, err := auth.ParseTokenFile(strings.NewReader(line + "\n"))
	if err != nil {
		return nil, err
	}
	s.secret, s.tokens = secret, auth.NewTokenStore(ts)
	return s, nil
}

// close removes the certificates.
func (s *demoSecurity) close() {
	if s != nil {
		os.RemoveAll(s.dir)
	}
}

// network is node id's raft network: mutual TLS (nil for the plain demo:
// plain TCP).
func (s *demoSecurity) network(id string) node.Network {
	if s == nil {
		return nil
	}
	return node.NewTLSNetwork(node.TCPNetwork{}, s.nodes[id], s.roots)
}

// serve wraps node id's API listener and handler.
func (s *demoSecurity) serve(id string, ln net.Listener, h http.Handler) (net.Listener, http.Handler) {
	if s == nil {
		return ln, h
	}
	return tls.NewListener(ln, s.api[id]), server.RequireTokens(h, s.tokens)
}

// clientOptions are the options every demo client adds.
func (s *demoSecurity) clientOptions() []client.Option {
	if s == nil {
		return nil
	}
	return []client.Option{client.WithTLS(s.client), client.WithToken(s.secret)}
}

// describe is the line the secured demo prints first.
func (s *demoSecurity) describe() string {
	return fmt.Sprintf("secure: raft over mutual TLS 1.3 and the API over TLS 1.3 (a CA and node certificates from `permitd certs create`'s code, in %s), every request with an admin token (wrong or missing: 401)\n", s.dir)
}
