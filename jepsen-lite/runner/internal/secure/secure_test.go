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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	require.Equal(t, "certs create --out "+dir+" --nodes n1,n2,n3 --hosts 127.0.0.1,localhost,10.213.7.1,10.213.7.2", string(args), "certs create")
	_, err = os.Stat(filepath.Join(dir, "ca.key"))
	require.True(t, os.IsNotExist(err), "ca.key not removed: %v", err)
	tokens, _ := os.ReadFile(filepath.Join(dir, TokenFile))
	require.NotContains(t, string(tokens), "pmt_", "token file")
	require.True(t, strings.HasPrefix(string(tokens), "jepsen-admin admin sha256:"), "token file %q", tokens)
	require.Contains(t, string(tokens), "\njepsen-worker worker sha256:", "token file")
	require.Equal(t, []Token{{AdminName, "admin"}, {WorkerName, "worker"}}, c.Tokens(), "tokens")
	require.Equal(t, []string{"--tls-cert", filepath.Join(dir, "node-n2.crt"), "--tls-key", filepath.Join(dir, "node-n2.key"),
		"--tls-ca", filepath.Join(dir, "ca.crt"), "--token-file", filepath.Join(dir, "tokens")}, c.AgentArgs("n2"), "agent args")
	require.Equal(t, []string{"--tls-ca", filepath.Join(dir, "ca.crt")}, c.WorkerArgs(), "worker args")
	require.Equal(t, []string{"PERMITD_TOKEN=pmt_fake_jepsen-worker"}, c.WorkerEnv(), "worker env")
	require.Len(t, c.ClientOptions(), 2, "client options: want TLS and the token")
	h := c.HTTP(&http.Transport{})
	tr := h.HC.Transport.(*http.Transport)
	require.True(t, h.HTTPS, "raw HTTP client: https")
	require.Equal(t, "pmt_fake_jepsen-admin", h.Token, "raw HTTP client: token")
	require.NotNil(t, tr.TLSClientConfig, "raw HTTP client: TLS")
	require.Equal(t, uint16(tls.VersionTLS13), tr.TLSClientConfig.MinVersion, "raw HTTP client: TLS %+v", tr.TLSClientConfig)
	require.NotNil(t, tr.TLSClientConfig.RootCAs, "raw HTTP client: TLS %+v", tr.TLSClientConfig)
}

// TestCreateErrors: a failing permitd and one whose tokens output lacks
// a secret are errors naming the command, never a secret.
func TestCreateErrors(t *testing.T) {
	t.Setenv(fakeEnv, "bad-tokens")
	_, err := Create(context.Background(), Request{Bin: os.Args[0], Dir: filepath.Join(t.TempDir(), "s"), Nodes: []string{"n1"}})
	require.ErrorContains(t, err, "secure: permitd tokens create --role admin", "bad tokens output")
	t.Setenv(fakeEnv, "ok")
	_, err = Create(context.Background(), Request{Bin: os.Args[0], Dir: filepath.Join(t.TempDir(), "s"), Nodes: []string{"n1", ""}})
	require.Error(t, err, "failing certs create")
	require.True(t, strings.HasPrefix(err.Error(), "secure: permitd certs create: exit status 2: "), "failing certs create: %v", err)
	require.ErrorContains(t, err, "empty node ID", "failing certs create")
	_, err = Create(context.Background(), Request{Bin: os.Args[0], Dir: t.TempDir()})
	require.Error(t, err, "no nodes: no error")
}

// TestPlain: a nil *Creds adds nothing anywhere.
func TestPlain(t *testing.T) {
	var c *Creds
	require.Empty(t, c.Dir(), "a plain run got credentials")
	require.Nil(t, c.CertHosts(), "a plain run got credentials")
	require.Nil(t, c.Tokens(), "a plain run got credentials")
	require.Nil(t, c.AgentArgs("n1"), "a plain run got credentials")
	require.Nil(t, c.ClientOptions(), "a plain run got credentials")
	require.Nil(t, c.WorkerArgs(), "a plain run got credentials")
	require.Nil(t, c.WorkerEnv(), "a plain run got credentials")
	tr := &http.Transport{}
	h := c.HTTP(tr)
	require.False(t, h.HTTPS, "plain raw HTTP client: %+v", h)
	require.Empty(t, h.Token, "plain raw HTTP client: %+v", h)
	require.Same(t, tr, h.HC.Transport, "plain raw HTTP client: %+v", h)
	require.Nil(t, tr.TLSClientConfig, "plain raw HTTP client: %+v", h)
}
