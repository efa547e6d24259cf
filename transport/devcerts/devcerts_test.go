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

// TestCreateReusesTheCAAndKeepsWhatFits: a second Create in the same
// folder signs a new node with the existing CA and keeps the files that
// fit; the same request again keeps every file, byte for byte, and
// writes nothing.
func TestCreateReusesTheCAAndKeepsWhatFits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "certs") // parents made too
	if _, err := Create(request(dir)); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	res, err := Create(Request{Dir: dir, Nodes: []string{"n3", "n1"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.ReusedCA || strings.Join(res.Written, ",") != "node-n3.crt,node-n3.key" ||
		strings.Join(res.Kept, ",") != "ca.crt,ca.key,node-n1.crt,node-n1.key" {
		t.Fatalf("second Create: %+v", res)
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(dir, CACert)))
	if _, err := readCert(t, filepath.Join(dir, "node-n3.crt")).Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("n3 does not verify against the first CA: %v", err)
	}
	res, err = Create(request(dir))
	if err != nil {
		t.Fatalf("the first request again: %v", err)
	}
	want := "ca.crt,ca.key,node-n1.crt,node-n1.key,node-n2.crt,node-n2.key,client-admin.crt,client-admin.key"
	if len(res.Written) != 0 || strings.Join(res.Kept, ",") != want {
		t.Fatalf("the first request again: %+v, want all kept: %s", res, want)
	}
	after := snapshotDir(t, dir)
	for name, b := range before {
		if !bytes.Equal(b, after[name]) {
			t.Errorf("%s changed", name)
		}
	}
}

// snapshotDir returns the contents of every file in dir.
func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestCreateRefusesWhatDoesNotFit: an existing file that does not fit the
// request (a host missing, another CA's, a key of another certificate,
// garbage, expired, half a pair, node files without their CA, a CA
// without its key) is an UnfitError naming the file, what is wrong and
// the fix, and nothing is written.
func TestCreateRefusesWhatDoesNotFit(t *testing.T) {
	now := time.Now()
	base := func(t *testing.T) string {
		dir := t.TempDir()
		if _, err := Create(request(dir)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	copyTo := func(t *testing.T, from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T) (dir string, r Request)
		file    string
		problem string
	}{
		{"a host missing", func(t *testing.T) (string, Request) {
			dir := base(t)
			r := request(dir)
			r.Hosts = append(r.Hosts, "example.com")
			return dir, r
		}, "node-n1.crt", "does not cover host example.com (it covers 127.0.0.1,localhost)"},
		{"another CA", func(t *testing.T) (string, Request) {
			dir, other := base(t), base(t)
			copyTo(t, filepath.Join(other, "node-n2.crt"), filepath.Join(dir, "node-n2.crt"))
			copyTo(t, filepath.Join(other, "node-n2.key"), filepath.Join(dir, "node-n2.key"))
			return dir, request(dir)
		}, "node-n2.crt", "was not signed by the CA in the folder"},
		{"a key of another certificate", func(t *testing.T) (string, Request) {
			dir := base(t)
			copyTo(t, filepath.Join(dir, "node-n2.key"), filepath.Join(dir, "node-n1.key"))
			return dir, request(dir)
		}, "node-n1.key", "is not the key of node-n1.crt"},
		{"garbage", func(t *testing.T) (string, Request) {
			dir := base(t)
			if err := os.WriteFile(filepath.Join(dir, "client-admin.crt"), []byte("not a certificate\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir, request(dir)
		}, "client-admin.crt", "is not a PEM certificate"},
		{"expired", func(t *testing.T) (string, Request) {
			dir := t.TempDir()
			if _, err := Create(Request{Dir: dir, Clients: []string{"a"}, Validity: 48 * time.Hour, Now: now}); err != nil {
				t.Fatal(err)
			}
			if _, err := Create(Request{Dir: dir, Nodes: []string{"n1"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour, Now: now}); err != nil {
				t.Fatal(err)
			}
			return dir, Request{Dir: dir, Nodes: []string{"n2", "n1"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour, Now: now.Add(2 * time.Hour)}
		}, "node-n1.crt", "expired at"},
		{"a certificate without its key", func(t *testing.T) (string, Request) {
			dir := base(t)
			if err := os.Remove(filepath.Join(dir, "node-n2.key")); err != nil {
				t.Fatal(err)
			}
			return dir, request(dir)
		}, "node-n2.crt", "has no node-n2.key beside it"},
		{"node files without their CA", func(t *testing.T) (string, Request) {
			dir := base(t)
			for _, f := range []string{CACert, CAKey} {
				if err := os.Remove(filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
			return dir, request(dir)
		}, "node-n1.crt", "was signed by a CA that is not in the folder"},
		{"a CA without its key", func(t *testing.T) (string, Request) {
			dir := base(t)
			if err := os.Remove(filepath.Join(dir, CAKey)); err != nil {
				t.Fatal(err)
			}
			return dir, Request{Dir: dir, Hosts: []string{"127.0.0.1"}, Clients: []string{"c9"}, Validity: time.Hour, Now: now}
		}, "ca.crt", "has no ca.key beside it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, r := tc.setup(t)
			r.Nodes = append(r.Nodes, "fresh")
			before := snapshotDir(t, dir)
			_, err := Create(r)
			var unfit *UnfitError
			if !errors.Is(err, ErrUnfit) || !errors.As(err, &unfit) {
				t.Fatalf("Create: %v, want an UnfitError", err)
			}
			if unfit.Path != filepath.Join(dir, tc.file) || !strings.Contains(unfit.Problem, tc.problem) ||
				!strings.Contains(err.Error(), "delete "+filepath.Join(dir, tc.file)) || !strings.Contains(err.Error(), "nothing was written") {
				t.Errorf("Create: %v; want %s: %q, and the fix", err, tc.file, tc.problem)
			}
			if after := snapshotDir(t, dir); len(after) != len(before) {
				t.Errorf("a refused request wrote files: %d before, %d after", len(before), len(after))
			}
		})
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
