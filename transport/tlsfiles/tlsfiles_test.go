package tlsfiles

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/devcerts"
)

// certs makes a CA, node n1 and client alice in a temporary folder.
func certs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := devcerts.Create(devcerts.Request{Dir: dir, Nodes: []string{"n1"}, Hosts: []string{"127.0.0.1"},
		Clients: []string{"alice"}, Validity: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestServerAndClientHandshake: a server that requires client certificates
// accepts a client of the same CA with one, and refuses one without.
func TestServerAndClientHandshake(t *testing.T) {
	dir := certs(t)
	f := func(n string) string { return filepath.Join(dir, n) }
	srv, err := Server(f("node-n1.crt"), f("node-n1.key"), f(devcerts.CACert), true)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("ok"))
			}()
		}
	}()
	try := func(conf *tls.Config) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), conf)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		var b [2]byte
		_, err = c.Read(b[:]) // TLS 1.3: a refused client certificate shows on the first read
		return err
	}
	with, err := Client(f(devcerts.CACert), f("client-alice.crt"), f("client-alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := try(with); err != nil {
		t.Errorf("client with a certificate: %v", err)
	}
	without, err := Client(f(devcerts.CACert), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := try(without); err == nil {
		t.Error("client without a certificate was served")
	}
}

// TestBadFiles: each mistake is ErrInvalid with the file named.
func TestBadFiles(t *testing.T) {
	dir := certs(t)
	f := func(n string) string { return filepath.Join(dir, n) }
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"key without cert":         func() error { _, err := Client(f(devcerts.CACert), "", f("client-alice.key")); return err }(),
		"missing CA":               func() error { _, err := Client(f("nope.crt"), "", ""); return err }(),
		"CA not PEM":               func() error { _, err := Roots(junk); return err }(),
		"mismatched key":           func() error { _, err := Pair(f("node-n1.crt"), f("client-alice.key")); return err }(),
		"client auth without a CA": func() error { _, err := Server(f("node-n1.crt"), f("node-n1.key"), "", true); return err }(),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
