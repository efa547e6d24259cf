package secure

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/internal/httpjson"
	"github.com/permitd/permitd/transport/client"
)

// File names in a Creds directory (the certificates' are `permitd certs
// create`'s).
const (
	// CAFile is the CA certificate every client verifies the agents with.
	CAFile = "ca.crt"
	// caKey is the CA's key, removed once the node certificates are
	// signed (nothing else is to be signed with it).
	caKey = "ca.key"
	// TokenFile is the agents' --token-file.
	TokenFile = "tokens"
)

// Token names of a run (`permitd tokens create --name`).
const (
	// AdminName is the admin token: the runner's clients, its control
	// requests and test hooks.
	AdminName = "jepsen-admin"
	// WorkerName is the worker token: the leased workload's sidecars.
	WorkerName = "jepsen-worker"
)

// tokenEnv is the variable `permitd worker` reads its token from (it keeps
// the secret out of the command line, which the logs record).
const tokenEnv = "PERMITD_TOKEN"

// Request says which credentials Create makes.
type Request struct {
	// Bin is the permitd binary.
	Bin string
	// Dir is the directory to write to; it must not exist or be empty.
	Dir string
	// Nodes are the agents' IDs: a node certificate each.
	Nodes []string
	// Addrs are the addresses the agents listen on ("host:port" or
	// "host"); with 127.0.0.1 and localhost they are the node
	// certificates' subject alternative names.
	Addrs []string
	// Worker makes a worker token too (the leased workload).
	Worker bool
}

// Token is one token of the run's token file: its name and role (never
// its secret).
type Token struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// Creds are a secure run's credentials. The zero of *Creds (nil) is a plain
// run.
type Creds struct {
	dir    string
	nodes  []string
	hosts  []string
	tokens []Token
	admin  string // the admin token's secret
	worker string // the worker token's secret ("": none made)
	conf   *tls.Config
}

// Create makes the credentials of req with req.Bin: the certificates
// (`permitd certs create`), an admin token and, if req.Worker, a worker
// token (`permitd tokens create`), and the token file. The secrets stay in
// memory; the directory holds only certificates, node keys and the
// tokens' hashes.
func Create(ctx context.Context, req Request) (*Creds, error) {
	if len(req.Nodes) == 0 {
		return nil, errors.New("secure: no nodes")
	}
	if err := os.MkdirAll(filepath.Dir(req.Dir), 0o755); err != nil {
		return nil, fmt.Errorf("secure: %w", err)
	}
	c := &Creds{dir: req.Dir, nodes: slices.Clone(req.Nodes), hosts: Hosts(req.Addrs)}
	if _, err := permitd(ctx, req.Bin, "certs", "create", "--out", req.Dir,
		"--nodes", strings.Join(req.Nodes, ","), "--hosts", strings.Join(c.hosts, ",")); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(req.Dir, caKey)); err != nil {
		return nil, fmt.Errorf("secure: %w", err)
	}
	var lines []string
	mint := func(name, role string) (string, error) {
		secret, line, err := newToken(ctx, req.Bin, name, role)
		if err != nil {
			return "", err
		}
		lines = append(lines, line)
		c.tokens = append(c.tokens, Token{Name: name, Role: role})
		return secret, nil
	}
	var err error
	if c.admin, err = mint(AdminName, "admin"); err != nil {
		return nil, err
	}
	if req.Worker {
		if c.worker, err = mint(WorkerName, "worker"); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(req.Dir, TokenFile), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("secure: token file: %w", err)
	}
	if c.conf, err = clientTLS(filepath.Join(req.Dir, CAFile)); err != nil {
		return nil, err
	}
	return c, nil
}

// Hosts returns the hosts of addrs ("host:port" or "host") after 127.0.0.1
// and localhost, without repeats.
func Hosts(addrs []string) []string {
	out := []string{"127.0.0.1", "localhost"}
	for _, a := range addrs {
		if h, _, err := net.SplitHostPort(a); err == nil {
			a = h
		}
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// permitd runs bin with args (bounded to a minute) and returns its
// standard output, which may hold a secret: it is never in the error.
func permitd(ctx context.Context, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("secure: permitd %s %s: %w: %s", args[0], args[1], err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// newToken makes a token with `permitd tokens create` and returns its
// secret and its token file line.
func newToken(ctx context.Context, bin, name, role string) (secret, line string, err error) {
	out, err := permitd(ctx, bin, "tokens", "create", "--role", role, "--name", name)
	if err != nil {
		return "", "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "secret: "); ok {
			secret = strings.TrimSpace(s)
		} else if l, ok := strings.CutPrefix(sc.Text(), "token file line: "); ok {
			line = strings.TrimSpace(l)
		}
	}
	if secret == "" || !strings.HasPrefix(line, name+" "+role+" ") {
		return "", "", fmt.Errorf("secure: permitd tokens create --role %s --name %s: no secret and token file line in its output (%d bytes)", role, name, len(out))
	}
	return secret, line, nil
}

// clientTLS is the clients' TLS configuration: the run's CA as the only
// root, TLS 1.3.
func clientTLS(caFile string) (*tls.Config, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("secure: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("secure: %s: no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
}

// Dir is the credentials' directory ("" for a plain run).
func (c *Creds) Dir() string {
	if c == nil {
		return ""
	}
	return c.dir
}

// CertHosts are the node certificates' subject alternative names.
func (c *Creds) CertHosts() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.hosts)
}

// Tokens are the tokens of the token file.
func (c *Creds) Tokens() []Token {
	if c == nil {
		return nil
	}
	return slices.Clone(c.tokens)
}

// AgentArgs are the flags that make agent id serve TLS (the API and raft,
// with its node certificate) and require tokens; none for a plain run.
func (c *Creds) AgentArgs(id string) []string {
	if c == nil {
		return nil
	}
	return []string{
		"--tls-cert", filepath.Join(c.dir, "node-"+id+".crt"), "--tls-key", filepath.Join(c.dir, "node-"+id+".key"),
		"--tls-ca", filepath.Join(c.dir, CAFile), "--token-file", filepath.Join(c.dir, TokenFile),
	}
}

// ClientOptions are the Go client's options for the agents: TLS with the
// run's CA and the admin token; none for a plain run.
func (c *Creds) ClientOptions() []client.Option {
	if c == nil {
		return nil
	}
	return []client.Option{client.WithTLS(c.conf), client.WithToken(c.admin)}
}

// HTTP returns the raw HTTP client for the agents on tr: for a secure run
// HTTPS with the run's CA (set on tr) and the admin token, else plain
// HTTP on tr as given.
func (c *Creds) HTTP(tr *http.Transport) httpjson.Client {
	if c == nil {
		return httpjson.Client{HC: &http.Client{Transport: tr}}
	}
	tr.TLSClientConfig = c.conf.Clone()
	return httpjson.Client{HC: &http.Client{Transport: tr}, HTTPS: true, Token: c.admin}
}

// WorkerArgs are the flags that make a worker sidecar reach the agents
// over TLS; none for a plain run.
func (c *Creds) WorkerArgs() []string {
	if c == nil {
		return nil
	}
	return []string{"--tls-ca", filepath.Join(c.dir, CAFile)}
}

// RelayArgs are a lease relay's flags in a secure run: TLS to the agents
// (the run's CA; its token is the worker token of WorkerEnv) and its own
// listener over TLS, with the first node's certificate (valid for
// 127.0.0.1, where the relays listen) and the agents' token file (a
// worker must present its worker token), since a worker talks TLS to all
// its servers or to none. None for a plain run.
func (c *Creds) RelayArgs() []string {
	if c == nil {
		return nil
	}
	id := c.nodes[0]
	return []string{"--tls-ca", filepath.Join(c.dir, CAFile),
		"--listen-tls-cert", filepath.Join(c.dir, "node-"+id+".crt"), "--listen-tls-key", filepath.Join(c.dir, "node-"+id+".key"),
		"--token-file", filepath.Join(c.dir, TokenFile)}
}

// WorkerEnv is the environment that gives a worker sidecar the worker
// token (out of its command line); none for a plain run or without a
// worker token.
func (c *Creds) WorkerEnv() []string {
	if c == nil || c.worker == "" {
		return nil
	}
	return []string{tokenEnv + "=" + c.worker}
}
