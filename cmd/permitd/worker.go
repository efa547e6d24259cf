package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/node/worker"
	"github.com/permitd/permitd/transport"
	"github.com/permitd/permitd/transport/client"
)

func init() {
	register("worker", "run a worker sidecar: spend a leased limit's permits locally", runWorker)
}

// workerFlags are the worker's command-line options.
type workerFlags struct {
	name, group, limit               string
	gossipAddr, join, servers        string
	httpAddr, logLevel               string
	weight                           int64
	ttl, margin, pushPull, reqTimout time.Duration
	stealBias                        float64
	testHooks, testDoubleLease       bool
}

func (f *workerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.group, "group", "", "the worker's group: shares are divided between groups first, stealing prefers the own group (required; 1-128 of [A-Za-z0-9_.:-])")
	fs.StringVar(&f.limit, "limit", "", "name of the leased limit to serve (required; make it leased with PUT /v1/limits/{name}/lease-policy)")
	fs.StringVar(&f.name, "name", "", "holder ID, unique in the fleet (default: GROUP.GOSSIPADDR)")
	fs.StringVar(&f.gossipAddr, "gossip-addr", "127.0.0.1:7946", "HOST:PORT to gossip on (memberlist, TCP and UDP) with the other workers")
	fs.StringVar(&f.join, "join", "", "GOSSIPADDR[,GOSSIPADDR...] of other workers to join (rejoined while alone)")
	fs.StringVar(&f.servers, "servers", "", "HTTPADDR[,HTTPADDR...] of the register's agents (required)")
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8101", "HOST:PORT of the sidecar's HTTP API (reserve, status, healthz)")
	fs.Int64Var(&f.weight, "weight", 1, "the group's weight in the fair division (1-1000000)")
	fs.DurationVar(&f.ttl, "ttl", worker.DefaultTTL, "lease TTL asked of the register (100ms-60s); the lease is renewed every TTL/2")
	fs.DurationVar(&f.margin, "margin", 0, "safety margin subtracted from every local deadline (0: 10% of --ttl, at least 50ms; must leave TTL-margin > TTL/2)")
	fs.Float64Var(&f.stealBias, "steal-bias", 0, "fraction of its spare permits a worker keeps for its own group when another group asks (0: default 0.5; -1: none; else 0 < F <= 1)")
	fs.DurationVar(&f.pushPull, "gossip-push-pull", 2*time.Second, "memberlist push/pull interval (short, so that a small fleet converges quickly)")
	fs.DurationVar(&f.reqTimout, "max-reserve-wait", transport.DefaultRequestTimeout, "longest max_wait a reserve may ask of the sidecar")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level: trace, debug, info, warn, error")
	fs.BoolVar(&f.testHooks, "test-hooks", false, "testing only: serve /v1/debug/faults to cut this worker off from the register (jepsen-lite)")
	fs.BoolVar(&f.testDoubleLease, "test-double-lease", false, "testing only, BROKEN on purpose: hand out every permit twice (jepsen-lite shows it is caught)")
}

func runWorker(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f workerFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: permitd worker --group NAME --limit NAME --servers HTTPADDR,...
                      --gossip-addr HOST:PORT [--join GOSSIPADDR,...] --http-addr HOST:PORT
                      [--name ID] [--weight W] [--ttl D] [--margin D] [--steal-bias F] [--log-level L]

Runs a worker sidecar of a leased limit. The worker leases a share of the
limit's permits from the register (--servers), paces them out locally and
trades idle permits with the other workers it finds by gossip (--join), so
that a reserve costs no raft round trip and the fleet still stays within
the limit's over-grant bound. If the register cannot be reached the worker
spends what it holds, then fails closed.

The sidecar serves, for --limit only:
  POST /v1/limits/{name}/reserve  {"permits":N,"max_wait":"250ms","request_id":"..."}
       200 {"granted":true,"wait_ns":0}: the permits are yours now (the
           sidecar waited for pacing within max_wait before answering)
       429 {"granted":false,"retry_after_ns":W,"error":...}: not within max_wait
       503 {"error":...}: the worker fails closed (register unreachable or
           refusing the lease, and no permit left)
       404 for another limit, 400 for a bad body
  GET  /v1/status   group, holder, lease, share, counters, members
  GET  /healthz

SIGINT/SIGTERM stop it gracefully: the lease is returned (its unspent permits
go back to the register) and the worker leaves the gossip cluster.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "permitd worker: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if f.group == "" || f.limit == "" || f.servers == "" {
		fmt.Fprintln(stderr, "permitd worker: --group, --limit and --servers are required")
		return 2
	}
	if f.name == "" {
		f.name = f.group + "." + f.gossipAddr
	}
	gossip, err := gossipConfig(f.gossipAddr, f.pushPull)
	if err != nil {
		fmt.Fprintln(stderr, "permitd worker:", err)
		return 2
	}
	if f.reqTimout <= 0 {
		fmt.Fprintf(stderr, "permitd worker: --max-reserve-wait %v; allowed: > 0\n", f.reqTimout)
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "permitd-worker", Level: hclog.LevelFromString(f.logLevel), Output: stderr})
	attempt := max(f.ttl/4, 50*time.Millisecond)
	c, err := client.New(splitList(f.servers), client.WithLogger(logger.Named("client")), client.WithAttemptTimeout(attempt))
	if err != nil {
		fmt.Fprintln(stderr, "permitd worker: --servers:", err)
		return 2
	}
	var reg worker.Register = clientRegister{c: c}
	var faults *faultyRegister
	if f.testHooks {
		faults = newFaultyRegister(reg)
		reg = faults
	}
	w, err := worker.New(worker.Config{
		Name: f.name, Group: f.group, Weight: f.weight, Limit: f.limit, Register: reg,
		Gossip: gossip, Join: splitList(f.join), TTL: f.ttl, Margin: f.margin, StealBias: f.stealBias,
		Clock: node.NewMonotonicClock(), Logger: logger,
	})
	if err != nil {
		fmt.Fprintln(stderr, "permitd worker:", err)
		return 2
	}
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		fmt.Fprintf(stderr, "permitd worker: listen on --http-addr %s: %v\n", f.httpAddr, err)
		return 1
	}
	startCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = w.Start(startCtx)
	cancel()
	if err != nil {
		ln.Close()
		fmt.Fprintln(stderr, "permitd worker:", err)
		return 1
	}
	var sw transport.SidecarWorker = w
	if f.testDoubleLease {
		logger.Warn("--test-double-lease: this worker hands out every permit twice (a deliberately broken build for testing)")
		sw = &doubleSpender{SidecarWorker: w}
	}
	handler := transport.NewSidecarHandler(sw, transport.HandlerOptions{Logger: logger.Named("http"), RequestTimeout: f.reqTimout})
	if faults != nil {
		handler = withWorkerFaultHooks(handler, faults)
	}
	srv := transport.NewServer(f.httpAddr, handler)
	httpErr := make(chan error, 1)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			httpErr <- err
		}
	}()
	logger.Info("worker started", "name", f.name, "group", f.group, "limit", f.limit, "gossip_addr", f.gossipAddr, "http_addr", ln.Addr().String())

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	code := 0
	select {
	case s := <-sig:
		logger.Info("stopping", "signal", s.String())
	case err := <-httpErr:
		fmt.Fprintln(stderr, "permitd worker: http:", err)
		code = 1
	}
	go func() {
		<-sig
		logger.Warn("second signal: exiting now")
		os.Exit(1)
	}()
	// Stop the worker first: reserves still waiting answer 503 at once,
	// then the lease is returned; the HTTP server drains meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shut := make(chan struct{})
	go func() {
		_ = srv.Shutdown(ctx)
		close(shut)
	}()
	if err := w.Stop(ctx); err != nil {
		fmt.Fprintln(stderr, "permitd worker: returning the lease:", err)
		code = 1
	}
	<-shut
	return code
}

// gossipConfig is memberlist's LAN configuration bound to addr
// ("host:port"), advertising it unless the host is unspecified.
func gossipConfig(addr string, pushPull time.Duration) (*memberlist.Config, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--gossip-addr %q: %v; allowed: HOST:PORT", addr, err)
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
