package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/tlsfiles"
)

// serverTLSFlags are an agent's TLS settings: its node certificate and
// key (served on the API port and presented to other nodes), the
// cluster's CA (which verifies other nodes, and clients with
// --client-cert-auth).
type serverTLSFlags struct {
	cert, key, ca  string
	clientCertAuth bool
	insecure       bool
	tokenFile      string
	// cmd is the command line that defined them, for where a value came
	// from.
	cmd *cmdLine
}

func (f *serverTLSFlags) define(c *cmdLine) {
	f.cmd = c
	c.String(&f.cert, "tls-cert", "FILE", "", "this node's certificate (PEM; `permitd certs create` makes one): serves the API (HTTP and binary) over TLS and authenticates the node to the others over mutual TLS; needs --tls-key and --tls-ca")
	c.String(&f.key, "tls-key", "FILE", "", "the private key of --tls-cert (PEM)")
	c.String(&f.ca, "tls-ca", "FILE", "", "the cluster's CA certificate (PEM): raft and forwarding accept only node certificates it signed; with --client-cert-auth it also verifies API clients")
	c.Bool(&f.clientCertAuth, "client-cert-auth", false, "require API clients to present a certificate signed by --tls-ca")
	c.String(&f.tokenFile, "token-file", "FILE", "", "API tokens (hashes and roles; `permitd tokens create` makes the lines): every request but /healthz and /readyz then needs \"Authorization: Bearer TOKEN\" with a role that allows it, binary connections authenticate first; re-read on SIGHUP")
	c.Bool(&f.insecure, "insecure", false, "allow listening on a non-loopback address without TLS (anyone who reaches the ports can read and change everything), and --test-hooks on one")
}

// fromEnv returns the environment variables that set the TLS files.
func (f *serverTLSFlags) fromEnv() []string {
	var out []string
	if f.cmd == nil {
		return nil
	}
	for _, name := range []string{"tls-cert", "tls-key", "tls-ca"} {
		if v := f.cmd.envSources[name]; v != "" {
			out = append(out, v)
		}
	}
	return out
}

// enabled reports whether TLS is configured.
func (f *serverTLSFlags) enabled() bool { return f.cert != "" || f.key != "" || f.ca != "" }

// check validates the combination: all three files or none;
// --client-cert-auth only with TLS; a non-loopback listener (of addrs,
// flag name to address) only with TLS, or with --insecure; --test-hooks
// on a non-loopback address only with --insecure.
func (f *serverTLSFlags) check(addrs map[string]string, testHooks bool) error {
	if f.enabled() && (f.cert == "" || f.key == "" || f.ca == "") {
		err := fmt.Errorf("--tls-cert, --tls-key and --tls-ca go together (got cert %q, key %q, ca %q)", f.cert, f.key, f.ca)
		if vars := f.fromEnv(); len(vars) > 0 {
			err = fmt.Errorf("%w; %s came from the environment, where the client commands read it too: unset %s to start this agent without TLS, or give all three",
				err, strings.Join(vars, " and "), strings.Join(vars, " "))
		}
		return err
	}
	if f.clientCertAuth && !f.enabled() {
		return fmt.Errorf("--client-cert-auth needs --tls-cert, --tls-key and --tls-ca")
	}
	if f.insecure {
		return nil
	}
	for _, name := range []string{"--http-addr", "--raft-addr", "--advertise"} {
		addr, ok := addrs[name]
		if !ok || addr == "" || isLoopback(addr) {
			continue
		}
		if !f.enabled() || (name == "--http-addr" && f.tokenFile == "") {
			return fmt.Errorf("%s %s is not a loopback address and TLS or API tokens are off: anyone who reaches it could read and change every limit (and, without TLS, join the cluster); give --tls-cert, --tls-key and --tls-ca (see `permitd certs create`) and --token-file (see `permitd tokens create`), or --insecure to run so anyway", name, addr)
		}
		if testHooks {
			return fmt.Errorf("--test-hooks on %s %s, a non-loopback address: the hooks let anyone who reaches it partition the node and skew its clock; use a loopback address, or add --insecure", name, addr)
		}
	}
	return nil
}

// isLoopback reports whether the host of addr ("host:port") is a loopback
// name or address. An empty host or a wildcard (all interfaces) is not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// agentTLS is an agent's loaded TLS material.
type agentTLS struct {
	api  *tls.Config // the API listener's
	node tls.Certificate
	raft node.Network // raft and forwarding over mutual TLS
}

// load reads the files (nil, nil without TLS). inner is the raft network
// to wrap in mutual TLS.
func (f *serverTLSFlags) load(inner node.Network) (*agentTLS, error) {
	if !f.enabled() {
		return nil, nil
	}
	api, err := tlsfiles.Server(f.cert, f.key, f.ca, f.clientCertAuth)
	if err != nil {
		return nil, err
	}
	api.NextProtos = []string{"http/1.1"}
	cert, err := tlsfiles.Pair(f.cert, f.key)
	if err != nil {
		return nil, err
	}
	roots, err := tlsfiles.Roots(f.ca)
	if err != nil {
		return nil, err
	}
	if inner == nil {
		inner = node.TCPNetwork{}
	}
	return &agentTLS{api: api, node: cert, raft: node.NewTLSNetwork(inner, cert, roots)}, nil
}

// clientTLSFlags are a client's TLS settings (CLI commands, the worker's
// register calls).
type clientTLSFlags struct {
	ca, cert, key string
	token         string
}

func (f *clientTLSFlags) define(c *cmdLine) {
	c.String(&f.ca, "tls-ca", "FILE", "", "talk TLS to the servers, verifying them with this CA certificate (PEM); \"host:port\" servers are then reached over https")
	c.String(&f.cert, "tls-cert", "FILE", "", "client certificate to present (PEM; for agents run with --client-cert-auth); needs --tls-key")
	c.String(&f.key, "tls-key", "FILE", "", "the private key of --tls-cert (PEM)")
	c.String(&f.token, "token", "SECRET", "", "API token to present (default: $PERMITD_TOKEN, which keeps it out of the process list)")
	c.fromEnv("tls-ca", "tls-cert", "tls-key")
}

// options returns the client options the flags select (none without
// them).
func (f *clientTLSFlags) options() ([]client.Option, error) {
	var opts []client.Option
	if token := f.secret(); token != "" {
		opts = append(opts, client.WithToken(token))
	}
	conf, err := f.config()
	if err != nil || conf == nil {
		return opts, err
	}
	return append(opts, client.WithTLS(conf)), nil
}

// secret returns the token: --token, else $PERMITD_TOKEN.
func (f *clientTLSFlags) secret() string {
	if f.token != "" {
		return f.token
	}
	return os.Getenv("PERMITD_TOKEN")
}

// config returns the TLS configuration the flags select (nil without
// TLS flags).
func (f *clientTLSFlags) config() (*tls.Config, error) {
	if f.ca == "" && f.cert == "" && f.key == "" {
		return nil, nil
	}
	if (f.cert == "") != (f.key == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together (got cert %q, key %q)", f.cert, f.key)
	}
	return tlsfiles.Client(f.ca, f.cert, f.key)
}

// loadTokens reads a token file.
// reloadTokenFile re-reads file into store (on SIGHUP): a valid file
// replaces the tokens at once, for open binary connections too; an
// invalid one is logged and the old tokens stay. A nil store (no flag
// given) is logged as nothing to reload; flag names it.
func reloadTokenFile(store *auth.TokenStore, file, flag string, logger hclog.Logger) {
	if store == nil {
		logger.Info("SIGHUP: no " + flag + " to reload")
		return
	}
	ts, err := loadTokens(file)
	if err != nil {
		logger.Error("SIGHUP: token file not reloaded; the previous tokens stay in force", "error", err)
		return
	}
	store.Replace(ts)
	logger.Info("SIGHUP: tokens reloaded", "file", file, "tokens", ts.Len())
}

func loadTokens(file string) (*auth.Tokens, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	defer fh.Close()
	ts, err := auth.ParseTokenFile(fh)
	if err != nil {
		return nil, fmt.Errorf("--token-file %s: %w", file, err)
	}
	return ts, nil
}
