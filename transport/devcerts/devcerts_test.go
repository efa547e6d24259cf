package devcerts

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func request(dir string) Request {
	return Request{Dir: dir, Nodes: []string{"n1", "n2"}, Hosts: []string{"127.0.0.1", "localhost"},
		Clients: []string{"admin"}, Validity: 24 * time.Hour, Now: time.Now()}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: not a PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCreateMakesAVerifiableSet: the node certificates verify against the
// CA for server and client authentication, for every host; the client
// certificate for client authentication only; keys are private (0600).
func TestCreateMakesAVerifiableSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	res, err := Create(request(dir))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ca.crt", "ca.key", "node-n1.crt", "node-n1.key", "node-n2.crt", "node-n2.key", "client-admin.crt", "client-admin.key"}
	if res.ReusedCA || strings.Join(res.Written, ",") != strings.Join(want, ",") {
		t.Fatalf("Create wrote %v (reused CA %v), want %v", res.Written, res.ReusedCA, want)
	}
	for _, name := range want {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		wantMode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".key") {
			wantMode = 0o600
		}
		if st.Mode().Perm() != wantMode {
			t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), wantMode)
		}
	}
	ca := readCert(t, filepath.Join(dir, CACert))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	node := readCert(t, filepath.Join(dir, "node-n1.crt"))
	if node.Subject.CommonName != "n1" {
		t.Errorf("node certificate subject %q, want n1", node.Subject.CommonName)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := node.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("node certificate for %s, usage %v: %v", host, usage, err)
			}
		}
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: roots, DNSName: "example.com"}); err == nil {
		t.Errorf("node certificate verified for a host it was not made for")
	}
	client := readCert(t, filepath.Join(dir, "client-admin.crt"))
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Errorf("client certificate verified for server authentication")
	}
}

// TestMutualTLSHandshake: a server with a node certificate that requires
// client certificates from the CA accepts the client certificate and a
// node certificate, and refuses a client certificate from another CA.
func TestMutualTLSHandshake(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	if _, err := Create(request(dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(request(other)); err != nil {
		t.Fatal(err)
	}
	pool := func(d string) *x509.CertPool {
		p := x509.NewCertPool()
		p.AddCert(readCert(t, filepath.Join(d, CACert)))
		return p
	}
	pair := func(d, cert, key string) tls.Certificate {
		c, err := tls.LoadX509KeyPair(filepath.Join(d, cert), filepath.Join(d, key))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	nc, nk := NodeFiles("n1")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair(dir, nc, nk)},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool(dir), MinVersion: tls.VersionTLS13})
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
				_, _ = io.Copy(c, c) // echo; the handshake runs on the first read
			}()
		}
	}()
	dial := func(cert tls.Certificate) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool(dir), ServerName: "127.0.0.1",
			Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3 reports a refused client certificate on the first read.
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		b := make([]byte, 1)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, b); err != nil {
			return err
		}
		if !bytes.Equal(b, []byte("x")) {
			return errors.New("echo mismatch")
		}
		return nil
	}
	cc, ck := ClientFiles("admin")
	n2c, n2k := NodeFiles("n2")
	if err := dial(pair(dir, cc, ck)); err != nil {
		t.Errorf("client certificate of the CA: %v", err)
	}
	if err := dial(pair(dir, n2c, n2k)); err != nil {
		t.Errorf("node certificate of the CA as a client (the Raft transport's dial): %v", err)
	}
	if err := dial(pair(other, cc, ck)); err == nil {
		t.Errorf("a client certificate of another CA was accepted")
	}
}

// TestCreateReusesTheCAAndNeverReplaces: a second Create in the same
// folder signs a new node with the existing CA; asking for an existing
// file writes nothing and says which file.
func TestCreateReusesTheCAAndNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create(request(dir)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, CACert))
	res, err := Create(Request{Dir: dir, Nodes: []string{"n3"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.ReusedCA || strings.Join(res.Written, ",") != "node-n3.crt,node-n3.key" {
		t.Fatalf("second Create: %+v", res)
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(dir, CACert)))
	if _, err := readCert(t, filepath.Join(dir, "node-n3.crt")).Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("n3 does not verify against the first CA: %v", err)
	}
	_, err = Create(Request{Dir: dir, Nodes: []string{"n4", "n1"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour, Now: time.Now()})
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "node-n1.crt") {
		t.Fatalf("Create over an existing node: %v, want ErrExists naming node-n1.crt", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node-n4.crt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node-n4.crt was written although the request was refused")
	}
	after, _ := os.ReadFile(filepath.Join(dir, CACert))
	if !bytes.Equal(before, after) {
		t.Errorf("the CA certificate changed")
	}
	if err := os.Remove(filepath.Join(dir, CAKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(Request{Dir: dir, Clients: []string{"c9"}, Validity: time.Hour, Now: time.Now()}); err == nil || !strings.Contains(err.Error(), CAKey) {
		t.Errorf("Create with a CA certificate and no key: %v, want an error naming %s", err, CAKey)
	}
}

// TestValidateRejectsBadRequests: every rejection says what was wrong and
// what is allowed, and nothing is written.
func TestValidateRejectsBadRequests(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never")
	base := request(dir)
	tests := []struct {
		name    string
		mod     func(*Request)
		mention string
	}{
		{"nothing to make", func(r *Request) { r.Nodes, r.Clients = nil, nil }, "no node and no client"},
		{"nodes without hosts", func(r *Request) { r.Hosts = nil }, "at least one host"},
		{"a name with a slash", func(r *Request) { r.Nodes = []string{"../n1"} }, "allowed: 1-63 letters"},
		{"an empty name", func(r *Request) { r.Clients = []string{""} }, "allowed: 1-63 letters"},
		{"a name twice", func(r *Request) { r.Nodes = []string{"n1", "n1"} }, "given twice"},
		{"a bad host", func(r *Request) { r.Hosts = []string{"not a host"} }, "an IP address or a DNS name"},
		{"no validity", func(r *Request) { r.Validity = 0 }, "validity"},
		{"too long a validity", func(r *Request) { r.Validity = MaxValidity + time.Hour }, "at most"},
		{"no folder", func(r *Request) { r.Dir = "" }, "no output folder"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			tc.mod(&r)
			_, err := Create(r)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("Create: %v, want ErrInvalid mentioning %q", err, tc.mention)
			}
		})
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a rejected request created the output folder")
	}
}

// TestCreateRefusesAnExpiredCA: a CA past its end is not reused (its
// certificates would end before they start); the error says what to do.
func TestCreateRefusesAnExpiredCA(t *testing.T) {
	dir := t.TempDir()
	past := time.Now().Add(-48 * time.Hour)
	if _, err := Create(Request{Dir: dir, Clients: []string{"a"}, Validity: time.Hour, Now: past}); err != nil {
		t.Fatal(err)
	}
	_, err := Create(Request{Dir: dir, Clients: []string{"b"}, Validity: time.Hour, Now: time.Now()})
	if err == nil || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "remove ca.crt and ca.key") {
		t.Fatalf("Create with an expired CA: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "client-b.crt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("client-b.crt written with an expired CA")
	}
}
