package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/tlsfiles"
	"github.com/permitd/permitd/transport/worker"
)

// workerFlags are the worker's settings (flags, config file, environment).
type workerFlags struct {
	name, group, limit               string
	gossipAddr, join, servers        string
	relayAddr                        string
	httpAddr, logLevel, logFormat    string
	weight                           int64
	ttl, margin, pushPull, reqTimout time.Duration
	renewEvery, registerTimeout      time.Duration
	unreachableAfter                 time.Duration
	registerProtocol                 string
	stealBias                        float64
	testHooks, testDoubleLease       bool
	config                           string
	validate                         bool
	tls                              clientTLSFlags
	insecure                         bool
	gossipKeyFile                    string
	httpTLSCert, httpTLSKey          string
	httpTokenFile                    string
}

func (f *workerFlags) define(c *cmdLine) {
	c.String(&f.group, "group", "NAME", "", "the worker's group: shares are divided between groups first, stealing prefers the own group (required; 1-128 of [A-Za-z0-9_.:-])").Check(func(s string) error { return checkName("group", s) })
	c.String(&f.limit, "limit", "NAME", "", "name of the leased limit to serve (required; make it leased with permitd limits lease-policy NAME --leased=true)").Check(func(s string) error { return checkName("limit name", s) })
	c.String(&f.name, "name", "ID", "", "holder ID, unique in the fleet (default: GROUP.GOSSIPADDR)").Check(func(s string) error { return checkName("holder ID", s) })
	c.String(&f.gossipAddr, "gossip-addr", "HOST:PORT", "127.0.0.1:7946", "address to gossip on (memberlist, TCP and UDP) with the other workers").Check(checkHostPort)
	c.List(&f.join, "join", "GOSSIPADDR,...", "", "gossip addresses of other workers to join (rejoined while alone)").Check(checkHostPort)
	c.List(&f.servers, "servers", "HTTPADDR,...", "", "HTTP addresses of the register's agents (required)").Check(checkServer)
	c.fromEnv("servers")
	c.String(&f.relayAddr, "relay", "HOST:PORT", "", "send the lease commands to this lease relay first (permitd relay, on this host), and to --servers when it cannot be reached or does not answer; needs --register-protocol binary").Check(checkServer)
	c.String(&f.httpAddr, "http-addr", "HOST:PORT", "127.0.0.1:8101", "address of the sidecar's HTTP API (reserve, status, healthz, metrics)").Check(checkHostPort)
	c.Int64(&f.weight, "weight", "W", 1, "the group's weight in the fair division").Range(1, 1_000_000, "an integer from 1 to 1000000")
	c.Duration(&f.ttl, "ttl", worker.DefaultTTL, durPositive, "lease TTL asked of the register (100ms-60s); the lease is renewed every --renew-every").Range(100*time.Millisecond, time.Minute)
	c.Duration(&f.margin, "margin", 0, durNonNegative, "safety margin subtracted from every local deadline (0: 10% of --ttl, at least 50ms; must leave TTL-margin > the renewal period)")
	c.Duration(&f.renewEvery, "renew-every", 0, durNonNegative, "renewal period (0: TTL/2; must be below TTL-margin): longer renews less often (less register CPU per worker), a grant then covers more time")
	c.Duration(&f.registerTimeout, "register-timeout", 0, durNonNegative, "longest wait for one register call before the worker counts it failed and retries it (0: TTL-margin, so that a renewal rides out a register election; at most 24h)").Range(0, worker.MaxPeriod)
	c.Duration(&f.unreachableAfter, "unreachable-after", worker.DefaultUnreachableAfter, durPositive, "how long the register may leave the worker's calls unanswered before a reserve finding no permit gets 503 (the register is unreachable) rather than 429 with Retry-After, whatever the TTL (default: six of the agents' default election timeouts, so that an election is not an outage; shorter reports a cut-off register sooner; at most 24h)").Range(0, worker.MaxPeriod)
	c.Float(&f.stealBias, "steal-bias", "F", 0, "fraction of its spare permits a worker keeps for its own group when another group asks (0: default 0.5; -1: none)").Check(func(x float64) bool { return x == -1 || (x >= 0 && x <= 1) }, "-1, 0, or a number in (0, 1]")
	c.Duration(&f.pushPull, "gossip-push-pull", 2*time.Second, durPositive, "memberlist push/pull interval (short, so that a small fleet converges quickly)")
	c.Duration(&f.reqTimout, "max-reserve-wait", server.DefaultRequestTimeout, durPositive, "longest max_wait a reserve may ask of the sidecar")
	c.Choice(&f.registerProtocol, "register-protocol", "binary", "protocol of the lease commands to the register: binary (pipelined; a little less of the leader's CPU per renewal) or http (JSON)", "binary", "http")
	c.Choice(&f.logLevel, "log-level", "info", "log level (memberlist logs from one level higher)", logLevels...)
	c.Choice(&f.logFormat, "log-format", "text", "log format: text lines, or one JSON object per line", logFormats...)
	c.Bool(&f.testHooks, "test-hooks", false, "testing only: serve /v1/debug/faults to cut this worker off from the register (jepsen-lite)")
	c.Bool(&f.testDoubleLease, "test-double-lease", false, "testing only, BROKEN on purpose: hand out every permit twice (jepsen-lite shows it is caught)")
	f.tls.define(c)
	c.String(&f.gossipKeyFile, "gossip-key-file", "FILE", "", "encrypt the gossip with these keys (one base64 AES key of 16, 24 or 32 bytes a line, the first the primary; add a new key second, then make it first, then drop the old one to rotate without downtime): a process without a key can neither join the group nor send a steal message")
	c.String(&f.httpTLSCert, "http-tls-cert", "FILE", "", "serve the sidecar over TLS with this certificate (PEM; needs --http-tls-key)")
	c.String(&f.httpTLSKey, "http-tls-key", "FILE", "", "the private key of --http-tls-cert (PEM)")
	c.String(&f.httpTokenFile, "http-token-file", "FILE", "", "API tokens the sidecar requires (the agents' format): a reserve needs a client token that may use the limit, status and metrics any token; re-read on SIGHUP")
	c.Bool(&f.insecure, "insecure", false, "allow the sidecar to listen on a non-loopback address without TLS and tokens (anyone who reaches it could spend the group's permits), and --test-hooks on one")
	c.String(&f.config, "config", "FILE", "", "read settings from this JSON file (default: $PERMITD_CONFIG)")
	c.Bool(&f.validate, "validate", false, "check the settings (flags, environment, config file), print them as a config file and exit")
}

// check rejects the settings that cannot work together: the required
// flags, --relay without the binary protocol, half of the sidecar's TLS
// pair, and an exposed sidecar without TLS and tokens (or with test hooks)
// unless --insecure.
func (f *workerFlags) check() error {
	if f.group == "" || f.limit == "" || f.servers == "" {
		return errors.New("--group, --limit and --servers are required")
	}
	if f.relayAddr != "" && f.registerProtocol != "binary" {
		return errors.New("--relay needs --register-protocol binary: a relay serves the binary protocol's lease commands only")
	}
	if (f.httpTLSCert == "") != (f.httpTLSKey == "") {
		return fmt.Errorf("--http-tls-cert and --http-tls-key go together (got cert %q, key %q)", f.httpTLSCert, f.httpTLSKey)
	}
	if !f.insecure && !isLoopback(f.httpAddr) {
		switch {
		case f.httpTLSCert == "" || f.httpTokenFile == "":
			return fmt.Errorf("--http-addr %s is not a loopback address and the sidecar has no TLS or no tokens: anyone who reaches it could spend the group's permits; give --http-tls-cert, --http-tls-key and --http-token-file, or --insecure to expose it anyway", f.httpAddr)
		case f.testHooks:
			return fmt.Errorf("--test-hooks on --http-addr %s, a non-loopback address: the hooks let anyone cut the worker off; use a loopback address, or add --insecure", f.httpAddr)
		}
	}
	return nil
}

// sidecarSecurity loads the sidecar's TLS configuration and its tokens
// (nil without --http-tls-cert, --http-token-file).
func (f *workerFlags) sidecarSecurity() (*tls.Config, *auth.TokenStore, error) {
	var conf *tls.Config
	if f.httpTLSCert != "" {
		c, err := tlsfiles.Server(f.httpTLSCert, f.httpTLSKey, "", false)
		if err != nil {
			return nil, nil, err
		}
		c.NextProtos = []string{"http/1.1"}
		conf = c
	}
	var tokens *auth.TokenStore
	if f.httpTokenFile != "" {
		ts, err := loadTokens(f.httpTokenFile)
		if err != nil {
			return nil, nil, errors.New(strings.Replace(err.Error(), "--token-file", "--http-token-file", 1))
		}
		tokens = auth.NewTokenStore(ts)
	}
	return conf, tokens, nil
}

// registerClient returns the client of the worker's lease commands: to
// --servers, starting at the one the worker's name hashes to, or the next
// when that one is the register's leader; with --relay, to the relay
// first.
func (f *workerFlags) registerClient(logger hclog.Logger) (*client.Client, error) {
	attempt := max(f.ttl/4, 50*time.Millisecond)
	opts := []client.Option{client.WithLogger(logger.Named("client")), client.WithAttemptTimeout(attempt)}
	if f.registerProtocol == "binary" {
		opts = append(opts, client.WithBinaryLeases())
	}
	tlsOpts, err := f.tls.options()
	if err != nil {
		return nil, err
	}
	opts = append(opts, tlsOpts...)
	servers := spreadServers(f.servers, f.name)
	cl, err := newClient(servers, opts...)
	if err != nil {
		return nil, err
	}
	if past := pastTheLeader(cl, servers); past != servers {
		logger.Debug("the first server is the register's leader: starting at the next", "servers", past)
		cl.Close()
		if cl, err = newClient(past, opts...); err != nil {
			return nil, err
		}
		servers = past
	}
	if f.relayAddr != "" {
		cl.Close()
		opts = append(opts, client.WithReturnToFirst(relayReturnAfter))
		return newClient(relayFirst(f.relayAddr, servers), opts...)
	}
	return cl, nil
}

// gossipKeys reads --gossip-key-file (nil without it).
func (f *workerFlags) gossipKeys() (*memberlist.Keyring, error) {
	if f.gossipKeyFile == "" {
		return nil, nil
	}
	fh, err := os.Open(f.gossipKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file: %v", err)
	}
	keys, err := worker.ParseGossipKeys(fh)
	fh.Close()
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file %s: %v", f.gossipKeyFile, err)
	}
	return keys, nil
}
