package secure

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeEnv makes the test binary act as a fake permitd (see fakePermitd).
const fakeEnv = "JL_SECURE_FAKE_PERMITD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		os.Exit(fakePermitd(mode, os.Args[1:]))
	}
	flag.Parse()
	os.Exit(m.Run())
}

// fakePermitd answers `certs create` (a real CA certificate, placeholder
// node files, its arguments in DIR/args) and `tokens create` like
// permitd; mode "bad-tokens" prints no secret.
func fakePermitd(mode string, args []string) int {
	opt := func(name string) string {
		i := slices.Index(args, name)
		if i < 0 || i+1 >= len(args) {
			return ""
		}
		return args[i+1]
	}
	switch {
	case len(args) > 2 && args[0] == "certs" && args[1] == "create":
		dir, nodes := opt("--out"), strings.Split(opt("--nodes"), ",")
		if slices.Contains(nodes, "") {
			fmt.Fprintln(os.Stderr, "permitd certs create: usage error: empty node ID")
			return 2
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake CA"}, IsCA: true, BasicConstraintsValid: true,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		files := map[string][]byte{"ca.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), "ca.key": []byte("key"),
			"args": []byte(strings.Join(args, " "))}
		for _, id := range nodes {
			files["node-"+id+".crt"], files["node-"+id+".key"] = []byte("crt"), []byte("key")
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0
	case len(args) > 2 && args[0] == "tokens" && args[1] == "create":
		if mode == "bad-tokens" {
			fmt.Println("nothing useful")
			return 0
		}
		fmt.Printf("secret: pmt_fake_%s\ntoken file line: %s %s sha256:%s\n", opt("--name"), opt("--name"), opt("--role"), strings.Repeat("0", 64))
		return 0
	}
	fmt.Fprintln(os.Stderr, "fake permitd: usage error:", args)
	return 2
}

// TestCreate: Create runs permitd's certs and tokens commands with the
// nodes and every host, removes the CA's key, writes the token file (no
// secrets) and gives the agents, clients and workers what they need.
func TestCreate(t *testing.T) {
	t.Setenv(fakeEnv, "ok")
	dir := filepath.Join(t.TempDir(), "report", "secure")
	c, err := Create(context.Background(), Request{Bin: os.Args[0], Dir: dir, Nodes: []string{"n1", "n2", "n3"},
		Addrs: []string{"10.213.7.1:7000", "10.213.7.1:8080", "10.213.7.2:7000", "127.0.0.1:9000", "localhost"}, Worker: true})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if want := "certs create --out " + dir + " --nodes n1,n2,n3 --hosts 127.0.0.1,localhost,10.213.7.1,10.213.7.2"; string(args) != want {
		t.Fatalf("certs create got %q, want %q", args, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); !os.IsNotExist(err) {
		t.Fatalf("ca.key not removed: %v", err)
	}
	tokens, _ := os.ReadFile(filepath.Join(dir, TokenFile))
	if strings.Contains(string(tokens), "pmt_") || !strings.HasPrefix(string(tokens), "jepsen-admin admin sha256:") || !strings.Contains(string(tokens), "\njepsen-worker worker sha256:") {
		t.Fatalf("token file %q", tokens)
	}
	if got, want := c.Tokens(), []Token{{AdminName, "admin"}, {WorkerName, "worker"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("tokens %v, want %v", got, want)
	}
	if got := c.AgentArgs("n2"); !reflect.DeepEqual(got, []string{"--tls-cert", filepath.Join(dir, "node-n2.crt"), "--tls-key", filepath.Join(dir, "node-n2.key"),
		"--tls-ca", filepath.Join(dir, "ca.crt"), "--token-file", filepath.Join(dir, "tokens")}) {
		t.Fatalf("agent args %q", got)
	}
	if got := c.WorkerArgs(); !reflect.DeepEqual(got, []string{"--tls-ca", filepath.Join(dir, "ca.crt")}) {
		t.Fatalf("worker args %q", got)
	}
	if got := c.WorkerEnv(); !reflect.DeepEqual(got, []string{"PERMITD_TOKEN=pmt_fake_jepsen-worker"}) {
		t.Fatalf("worker env %q", got)
	}
	if n := len(c.ClientOptions()); n != 2 {
		t.Fatalf("%d client options, want TLS and the token", n)
	}
	h := c.HTTP(&http.Transport{})
	tr := h.HC.Transport.(*http.Transport)
	if !h.HTTPS || h.Token != "pmt_fake_jepsen-admin" || tr.TLSClientConfig == nil || tr.TLSClientConfig.MinVersion != tls.VersionTLS13 || tr.TLSClientConfig.RootCAs == nil {
		t.Fatalf("raw HTTP client: https %v, token %q, TLS %+v", h.HTTPS, h.Token, tr.TLSClientConfig)
	}
}

// TestCreateErrors: a failing permitd and one whose tokens output lacks
// a secret are errors naming the command, never a secret.
func TestCreateErrors(t *testing.T) {
	t.Setenv(fakeEnv, "bad-tokens")
	_, err := Create(context.Background(), Request{Bin: os.Args[0], Dir: filepath.Join(t.TempDir(), "s"), Nodes: []string{"n1"}})
	if err == nil || !strings.Contains(err.Error(), "secure: permitd tokens create --role admin") {
		t.Fatalf("bad tokens output: %v", err)
	}
	t.Setenv(fakeEnv, "ok")
	_, err = Create(context.Background(), Request{Bin: os.Args[0], Dir: filepath.Join(t.TempDir(), "s"), Nodes: []string{"n1", ""}})
	if err == nil || !strings.HasPrefix(err.Error(), "secure: permitd certs create: exit status 2: ") || !strings.Contains(err.Error(), "empty node ID") {
		t.Fatalf("failing certs create: %v", err)
	}
	if _, err := Create(context.Background(), Request{Bin: os.Args[0], Dir: t.TempDir()}); err == nil {
		t.Fatal("no nodes: no error")
	}
}

// TestPlain: a nil *Creds adds nothing anywhere.
func TestPlain(t *testing.T) {
	var c *Creds
	if c.Dir() != "" || c.CertHosts() != nil || c.Tokens() != nil || c.AgentArgs("n1") != nil || c.ClientOptions() != nil || c.WorkerArgs() != nil || c.WorkerEnv() != nil {
		t.Fatal("a plain run got credentials")
	}
	tr := &http.Transport{}
	h := c.HTTP(tr)
	if h.HTTPS || h.Token != "" || h.HC.Transport != tr || tr.TLSClientConfig != nil {
		t.Fatalf("plain raw HTTP client: %+v", h)
	}
}
