package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/permitd/permitd/cmd/internal/testhooks"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/sidecar"
	"github.com/permitd/permitd/transport/tlsfiles"
	"github.com/permitd/permitd/transport/wire"
	"github.com/permitd/permitd/transport/worker"
)

func init() {
	register("worker", "run a worker sidecar: spend a leased limit's permits locally", runWorker)
}

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

const workerDescription = `
Runs a worker sidecar of a leased limit. The worker leases a share of the
limit's permits from the register (--servers), paces them out locally and
trades idle permits with the other workers it finds by gossip (--join), so
that a reserve costs no raft round trip and the fleet still stays within
the limit's over-grant bound. If the register cannot be reached the worker
spends what it holds, then refuses (429, Retry-After) while the register
has been silent for less than --unreachable-after (an election), and
fails closed (503) after. The worker starts at the server of
--servers its name hashes to, or the next one if that is the register's
leader, so that a fleet given the same list renews at the followers, which
forward renewals to the leader in batches. With --relay it sends its lease
commands to that relay (permitd relay) first, which sends the renewals of
all the workers it serves to the register in batches, and to --servers
when the relay cannot be reached or does not answer.

The sidecar serves, for --limit only:
  POST /v1/limits/{name}/reserve  {"permits":N,"max_wait":"250ms","request_id":"..."}
       200 {"granted":true,"wait_ns":0}: the permits are yours now (the
           sidecar waited for pacing within max_wait before answering)
       429 {"granted":false,"retry_after_ns":W,"error":...}: not within
           max_wait, also while the worker waits for the register (a
           renewal in flight, an election) for up to --unreachable-after
       503 {"error":...}: the worker fails closed (the register silent for
           --unreachable-after, or refusing the lease, and no permit left)
       404 for another limit, 400 for a bad body
  GET  /v1/status   group, holder, lease, share, counters, members
  GET  /healthz
  GET  /metrics     the worker's counters, permitd_build_info, go_* and process_*

Every flag can also be set in a JSON config file (--config FILE) by its
name, and in an environment variable PERMITD_<NAME> (--gossip-addr:
PERMITD_GOSSIP_ADDR). Flags win over the environment, which wins over the
file. --validate checks everything and prints the effective settings.

SIGINT/SIGTERM stop it gracefully: the lease is returned (its unspent permits
go back to the register) and the worker leaves the gossip cluster.

Exit status: 0 stopped by a signal; 1 failed (the register refused the
worker, a port in use, the lease could not be returned); 2 usage error.
`

func runWorker(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("worker", `worker --group NAME --limit NAME --servers HTTPADDR,...
                      --gossip-addr HOST:PORT [--join GOSSIPADDR,...] --http-addr HOST:PORT
                      [--name ID] [--weight W] [--ttl D] [--margin D] [--renew-every D]
                      [--register-timeout D] [--unreachable-after D] [--steal-bias F] [--config FILE]`, workerDescription, stdout, stderr)
	var f workerFlags
	f.define(c)
	if ok, code := c.parseSettings(args, &f.config, os.Environ(), stderr); !ok {
		return code
	}
	if err := f.check(); err != nil {
		return c.usageError(err.Error())
	}
	p := &workerProcess{f: &f, stderr: stderr}
	var err error
	if p.tls, p.tokens, err = f.sidecarSecurity(); err != nil {
		return c.usageError(err.Error())
	}
	if f.name == "" {
		f.name = f.group + "." + f.gossipAddr
	}
	p.logger = newLogger("permitd-worker", f.logLevel, f.logFormat, stderr)
	if err := p.newWorker(); err != nil {
		return c.usageError(err.Error())
	}
	if f.validate {
		c.printSettings(stdout)
		return exitOK
	}
	return p.run()
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

// workerProcess is a worker command running: its settings, the worker,
// its fault switch (--test-hooks), whether its gossip is encrypted, the
// sidecar's TLS and tokens, the logger and stderr.
type workerProcess struct {
	f         *workerFlags
	w         *worker.Worker
	faults    *testhooks.FaultyRegister
	encrypted bool
	tls       *tls.Config
	tokens    *auth.TokenStore
	logger    hclog.Logger
	stderr    io.Writer
}

// newWorker makes the worker the settings describe: its gossip, its
// register client (behind a fault switch with --test-hooks) and keys.
func (p *workerProcess) newWorker() error {
	f := p.f
	gossip, err := gossipConfig(f.gossipAddr, f.pushPull)
	if err != nil {
		return err
	}
	cl, err := f.registerClient(p.logger)
	if err != nil {
		return err
	}
	var reg worker.Register = cl
	if f.testHooks {
		p.faults = testhooks.NewFaultyRegister(reg)
		reg = p.faults
	}
	keys, err := f.gossipKeys()
	if err != nil {
		return err
	}
	p.encrypted = keys != nil
	p.w, err = worker.New(worker.Config{
		Name: f.name, Group: f.group, Weight: f.weight, Limit: f.limit, Register: reg, GossipKeys: keys,
		Gossip: gossip, Join: splitList(f.join), TTL: f.ttl, Margin: f.margin, StealBias: f.stealBias,
		RenewEvery: f.renewEvery, RequestTimeout: f.registerTimeout, UnreachableAfter: f.unreachableAfter,
		Clock: wire.NewMonotonicClock(), Logger: p.logger,
	})
	return err
}

// run starts the worker and serves its sidecar until a signal stops it
// or the server fails; it returns the command's exit status.
func (p *workerProcess) run() int {
	f := p.f
	fails := failureReporter{p.stderr, p.logger, f.logFormat, "worker"}
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		fails.report("listen on --http-addr "+f.httpAddr, err)
		return exitFailure
	}
	startCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = p.w.Start(startCtx)
	cancel()
	if err != nil {
		ln.Close()
		fails.report("start", err)
		return 1
	}
	if p.tls != nil {
		ln = tls.NewListener(ln, p.tls)
	}
	srv := server.NewHTTPServer(f.httpAddr, p.handler())
	httpErr := make(chan error, 1)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			httpErr <- err
		}
	}()
	p.logger.Info("listening", "name", f.name, "group", f.group, "limit", f.limit, "http_addr", ln.Addr().String(), "gossip_addr", f.gossipAddr,
		"tls", p.tls != nil, "tokens", p.tokens != nil, "gossip_encrypted", p.encrypted, "version", readBuildInfo().Version)

	code := 0
	reload := func() { reloadTokenFile(p.tokens, f.httpTokenFile, "--http-token-file", p.logger) }
	if signalled, err := waitForStop(p.logger, reload, httpErr); !signalled {
		fails.report("http", err)
		code = 1
	}
	// Stop the worker first: reserves still waiting answer 503 at once,
	// then the lease is returned; the HTTP server drains meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shut := make(chan struct{})
	go func() {
		_ = srv.Shutdown(ctx)
		close(shut)
	}()
	if err := p.w.Stop(ctx); err != nil {
		fails.report("returning the lease", err)
		code = 1
	}
	<-shut
	return code
}

// handler is the sidecar's HTTP handler: the worker's API (handing out
// every permit twice with --test-double-lease) and one /metrics page (the
// sidecar's series, the build, the Go runtime and the process), the test
// hooks with --test-hooks, all behind the tokens with --http-token-file.
func (p *workerProcess) handler() http.Handler {
	var sw sidecar.Worker = p.w
	if p.f.testDoubleLease {
		p.logger.Warn("--test-double-lease: this worker hands out every permit twice (a deliberately broken build for testing)")
		sw = &testhooks.DoubleSpender{Worker: p.w}
	}
	metricsReg := prometheus.NewRegistry()
	registerProcessMetrics(metricsReg)
	handler := sidecar.NewHandler(sw, sidecar.Options{Logger: p.logger.Named("http"), RequestTimeout: p.f.reqTimout, Registry: metricsReg})
	if p.faults != nil {
		handler = testhooks.WithWorkerFaultHooks(handler, p.faults)
	}
	if p.tokens != nil {
		handler = auth.Require(handler, p.tokens, sidecar.Access) // outermost: the test hooks need admin too
	}
	return handler
}

// gossipConfig is memberlist's LAN configuration bound to addr
// ("host:port"), advertising it unless the host is unspecified.
func gossipConfig(addr string, pushPull time.Duration) (*memberlist.Config, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--gossip-addr %q: %w; allowed: HOST:PORT", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("--gossip-addr %q: port %q; allowed: 1-65535", addr, portStr)
	}
	if pushPull <= 0 {
		return nil, fmt.Errorf("--gossip-push-pull %v; allowed: > 0", pushPull)
	}
	c := memberlist.DefaultLANConfig()
	if host == "" {
		host = "0.0.0.0"
	}
	c.BindAddr, c.BindPort = host, port
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		c.AdvertiseAddr, c.AdvertisePort = host, port
	}
	c.PushPullInterval = pushPull
	return c, nil
}

// spreadServers rotates the comma-separated servers to start at the one
// the worker's name hashes to (FNV-1a). A fleet's workers are usually given
// the same list; rotated, they spread their lease commands over the
// register's nodes instead of all calling the first. A follower forwards
// the lease commands it serves to the leader in batches (package node's
// forwardbatch.go), so the leader, which no node can relieve, spends about
// half as much per renewal on them as on a renewal sent to it directly.
func spreadServers(servers, name string) string {
	list := splitList(servers)
	if len(list) < 2 {
		return servers
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	k := int(h.Sum32() % uint32(len(list)))
	return strings.Join(slices.Concat(list[k:], list[:k]), ",")
}

// relayReturnAfter is how long a worker with --relay renews at the
// register's nodes after its relay failed before it tries the relay
// again.
const relayReturnAfter = 5 * time.Second

// leaderProbeTimeout bounds the worker's status call to its first server.
const leaderProbeTimeout = 2 * time.Second

// pastTheLeader returns servers rotated by one when the first is the
// register's leader (its GET /v1/status says so), else servers as they
// are (also when the status cannot be read, or there is one server). A
// renewal sent to a follower reaches the leader in a batch of them, which
// costs the leader a fraction of a renewal sent to it directly; spread
// over the followers, a fleet leaves the leader to decide. It is checked
// once, at start: after a change of leader some workers talk to the new
// one directly, which is as before.
func pastTheLeader(cl *client.Client, servers string) string {
	list := splitList(servers)
	if len(list) < 2 {
		return servers
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaderProbeTimeout)
	defer cancel()
	if st, err := cl.StatusOf(ctx, list[0]); err != nil || st.State != "leader" {
		return servers
	}
	return strings.Join(slices.Concat(list[1:], list[:1]), ",")
}
