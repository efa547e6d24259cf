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
	"github.com/permitd/permitd/transport/wire"
	"github.com/permitd/permitd/transport/worker"
)

func init() {
	register("worker", "run a worker sidecar: spend a leased limit's permits locally", runWorker)
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
