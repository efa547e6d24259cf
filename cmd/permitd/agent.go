package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/permitd/permitd/cmd/internal/testhooks"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/node/faultnet"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/tlsfiles"
	"github.com/permitd/permitd/transport/wire"
)

func init() {
	register("agent", "run a register node (raft member serving the HTTP API)", runAgent)
}

// agentFlags are the agent's settings (flags, config file, environment).
type agentFlags struct {
	id, dataDir, raftAddr, advertise, httpAddr string
	advertiseHTTP                              string
	initialCluster, join                       string
	logLevel, logFormat                        string
	heartbeat, election, leaderLease, commit   time.Duration
	snapshotThreshold                          uint64
	snapshotInterval                           time.Duration
	maxBatch, maxInflight, maxPending          int
	sessionsPerToken                           int
	maxPendingJoins                            int
	metricsMaxLimits                           int
	clockOffset                                time.Duration
	clockRate                                  float64
	testHooks                                  bool
	testBreakTimeline                          bool
	trailingLogs                               uint64
	pprof                                      bool
	config                                     string
	validate                                   bool
	tls                                        serverTLSFlags
	joinToken                                  string
}

func (a *agentFlags) define(c *cmdLine) {
	c.String(&a.id, "id", "ID", "", "node ID, unique in the cluster (required)").Check(func(s string) error { return checkName("node ID", s) })
	c.String(&a.dataDir, "data-dir", "DIR", "", "directory for the raft log, stable store and snapshots (required)")
	c.String(&a.raftAddr, "raft-addr", "HOST:PORT", "127.0.0.1:7001", "address to listen on for raft and request forwarding").Check(checkHostPort)
	c.String(&a.advertise, "advertise", "HOST:PORT", "", "raft address other nodes dial (default: --raft-addr)").Check(checkHostPort)
	c.String(&a.httpAddr, "http-addr", "HOST:PORT", "127.0.0.1:8001", "address of the HTTP API (and the binary reserve protocol)").Check(checkHostPort)
	c.String(&a.advertiseHTTP, "advertise-http", "HOST:PORT", "", "HTTP address the other nodes report for this one (cluster show, and status, which asks every member there); default: --http-addr, a wildcard host replaced by the host of --advertise or --raft-addr").Check(checkHostPort)
	c.List(&a.initialCluster, "initial-cluster", "ID=HOST:PORT,...", "", "the initial voters and their raft addresses; give the same list, including this node, to every initial node").Check(checkInitialItem)
	c.List(&a.join, "join", "HTTPADDR,...", "", "HTTP addresses of running nodes: join their cluster").Check(checkServer)
	c.Choice(&a.logLevel, "log-level", "info", "log level (libraries such as raft log from one level higher)", logLevels...)
	c.Choice(&a.logFormat, "log-format", "text", "log format: text lines, or one JSON object per line", logFormats...)
	c.Duration(&a.heartbeat, "heartbeat-timeout", 500*time.Millisecond, durPositive, "raft heartbeat timeout").AtLeast(5 * time.Millisecond)
	c.Duration(&a.election, "election-timeout", 500*time.Millisecond, durPositive, "raft election timeout (>= --heartbeat-timeout)").AtLeast(5 * time.Millisecond)
	c.Duration(&a.leaderLease, "leader-lease-timeout", 300*time.Millisecond, durPositive, "raft leader lease timeout (capped at --heartbeat-timeout)").AtLeast(5 * time.Millisecond)
	c.Duration(&a.commit, "commit-timeout", 50*time.Millisecond, durPositive, "raft commit timeout: how long an idle leader waits before telling followers the commit index (new entries go out at once whatever it is; shorter makes followers apply sooner and costs an idle leader CPU)").AtLeast(time.Millisecond)
	c.Uint64(&a.snapshotThreshold, "snapshot-threshold", "N", 8192, "log entries between snapshots").Range(1, math.MaxUint64, "an integer >= 1")
	c.Duration(&a.snapshotInterval, "snapshot-interval", 20*time.Second, durPositive, "how often to check whether to snapshot").AtLeast(5 * time.Millisecond)
	c.Uint64(&a.trailingLogs, "trailing-logs", "N", 4096, "log entries kept after a snapshot (fewer makes lagging followers need a snapshot sooner)").Range(1, math.MaxUint64, "an integer >= 1")
	c.Int(&a.maxBatch, "max-batch", "N", 1024, "most reserves in one log entry").Range(1, fsm.MaxBatchReserves, fmt.Sprintf("an integer from 1 to %d", fsm.MaxBatchReserves))
	c.Int(&a.maxInflight, "max-inflight", "N", 2, "most reserve entries being committed at once").Range(1, 1024, "an integer from 1 to 1024")
	c.Int(&a.maxPending, "max-pending-reserves", "N", 0, "most reserves the node holds at once (its clients', and forwarded ones on the leader); beyond it a reserve is answered 503 with Retry-After at once instead of queueing; 0 means 5 full batches (5120 at the default --max-batch)").Range(0, 1<<20, "an integer from 0 to 1048576 (0: 5 x --max-batch)")
	c.Int(&a.sessionsPerToken, "sessions-per-token", "N", server.DefaultSessionsPerToken, fmt.Sprintf("with --token-file, the most client sessions one token may hold open at once, and %d unacknowledged answers per session of that quota; beyond it the token's new sessions are answered 503 with Retry-After until one of its sessions expires (the register holds %d sessions in all)", fsm.SessionResultsPerSession, fsm.MaxSessions)).Range(0, fsm.MaxSessions, fmt.Sprintf("an integer from 0 to %d (0: no quota)", fsm.MaxSessions))
	c.Int(&a.maxPendingJoins, "max-pending-joins", "N", 3, "most joined servers that do not vote yet (the leader promotes one once it has caught up); a join beyond is refused (409) until one is promoted or removed").Range(1, 64, "an integer from 1 to 64")
	c.Int(&a.metricsMaxLimits, "metrics-max-limits", "N", server.DefaultMetricsMaxLimits, "most limits with per-limit series on /metrics (permitd_limit_*): the first N by name; the others are counted in permitd_limits_unexported").Range(0, 1<<20, "an integer from 0 to 1048576 (0: no per-limit series)")
	c.Bool(&a.pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on the HTTP address")
	c.Duration(&a.clockOffset, "clock-offset", 0, durAny, "TESTING: skew this node's clock by an offset, ahead or behind (as POST /v1/debug/clock with --test-hooks)").Range(-node.MaxClockOffset, node.MaxClockOffset)
	c.Float(&a.clockRate, "clock-rate", "R", 1, "TESTING: run this node's clock at this rate").Check(positive, "a number > 0")
	c.Bool(&a.testHooks, "test-hooks", false, "TESTING: inject faults into raft's network (faultnet.TCPFaults) and serve POST /v1/debug/clock (change the clock skew at run time), GET /v1/debug/state (applied index and state hash), GET/POST/DELETE /v1/debug/faults (partitions, loss, delay)")
	c.Bool(&a.testBreakTimeline, "test-break-timeline", false, "TESTING, UNSAFE (needs --test-hooks): a new leader resumes the cluster timeline from its own clock instead of the last applied time: a deliberately broken register that grants early, for jepsen-lite to catch")
	a.tls.define(c)
	c.String(&a.joinToken, "token", "SECRET", "", "admin token for --join, when the cluster requires tokens (default: $PERMITD_TOKEN, which keeps it out of the process list)")
	c.String(&a.config, "config", "FILE", "", "read settings from this JSON file (default: $PERMITD_CONFIG)")
	c.Bool(&a.validate, "validate", false, "check the settings (flags, environment, config file, data directory), print them as a config file and exit")
}

// checkInitialItem validates one --initial-cluster item.
func checkInitialItem(item string) error {
	id, addr, ok := strings.Cut(item, "=")
	if !ok || id == "" || addr == "" {
		return fmt.Errorf("item %q is not ID=HOST:PORT", item)
	}
	if err := checkName("node ID", id); err != nil {
		return fmt.Errorf("item %q: %w", item, err)
	}
	if err := checkHostPort(addr); err != nil {
		return fmt.Errorf("item %q: %w", item, err)
	}
	return nil
}

func parseInitialCluster(s string) ([]raft.Server, error) {
	var out []raft.Server
	seen := map[string]bool{}
	for _, item := range splitList(s) {
		if err := checkInitialItem(item); err != nil {
			return nil, fmt.Errorf("--initial-cluster %w", err)
		}
		id, addr, _ := strings.Cut(item, "=")
		if seen[id] {
			return nil, fmt.Errorf("--initial-cluster: ID %q given twice", id)
		}
		seen[id] = true
		out = append(out, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr), Suffrage: raft.Voter})
	}
	return out, nil
}

const agentDescription = `
Runs one register node. Start a new cluster by giving every initial node the
same --initial-cluster (bootstrapping each identically is safe); add a node
to a running cluster with --join. A node restarted with its data directory
rejoins by itself and needs neither. SIGINT/SIGTERM stop it gracefully (a
leader hands over leadership first).

Every flag can also be set in a JSON config file (--config FILE) by its
name, {"id": "n1", "data-dir": "/var/lib/permitd", "heartbeat-timeout":
"500ms", "initial-cluster": ["n1=10.0.0.1:7001", ...]}, and in an
environment variable PERMITD_<NAME> (--data-dir: PERMITD_DATA_DIR). Flags
win over the environment, which wins over the file. --validate checks
everything and prints the effective settings as a config file.

Logs go to stderr; at the default level, one line when the node listens,
becomes leader, loses leadership, or the membership changes.

Exit status: 0 stopped by a signal; 1 failed while running (a port in use,
a data directory it cannot open, a failed join); 2 usage error: a bad flag,
config file, environment variable, or a data directory with no state and
neither --initial-cluster nor --join.
`

// agentSettings parses the agent's command line, environment and config
// file and checks them. ok false: exit with code (reported).
func agentSettings(args []string, environ []string, stdout, stderr io.Writer) (a agentFlags, initial []raft.Server, ok bool, code int) {
	c := newCmdLine("agent", `agent --id ID --data-dir DIR --raft-addr HOST:PORT --http-addr HOST:PORT
                     (--initial-cluster ID=RAFTADDR,... | --join HTTPADDR,...) [--config FILE]`, agentDescription, stdout, stderr)
	a.define(c)
	if ok, code := c.parseSettings(args, &a.config, environ, stderr); !ok {
		return a, nil, false, code
	}
	fail := func(format string, args ...any) (agentFlags, []raft.Server, bool, int) {
		return a, nil, false, c.usageErrorf(format, args...)
	}
	if a.id == "" || a.dataDir == "" {
		return fail("--id and --data-dir are required")
	}
	var err error
	if initial, err = parseInitialCluster(a.initialCluster); err != nil {
		return fail("%v", err)
	}
	if len(initial) > 0 && a.join != "" {
		return fail("give --initial-cluster or --join, not both")
	}
	if len(initial) > 0 && !slices.ContainsFunc(initial, func(s raft.Server) bool { return string(s.ID) == a.id }) {
		return fail("--initial-cluster %s does not contain this node's --id %s; list every initial voter, this one included, or start it with --join to add it to a running cluster", a.initialCluster, a.id)
	}
	if a.election < a.heartbeat {
		return fail("--election-timeout %v is shorter than --heartbeat-timeout %v; allowed: >= --heartbeat-timeout", a.election, a.heartbeat)
	}
	if a.testBreakTimeline && !a.testHooks {
		return fail("--test-break-timeline is a test-only fault and needs --test-hooks")
	}
	if err := a.tls.check(map[string]string{"--http-addr": a.httpAddr, "--raft-addr": a.raftAddr, "--advertise": a.advertise}, a.testHooks); err != nil {
		return fail("%v", err)
	}
	if a.tls.tokenFile != "" {
		if _, err := loadTokens(a.tls.tokenFile); err != nil {
			return fail("%v", err)
		}
	}
	has, err := node.HasExistingState(a.dataDir)
	if err != nil {
		return fail("--data-dir: %v", err)
	}
	if !has && len(initial) == 0 && a.join == "" {
		return fail("--data-dir %s holds no node state: give --initial-cluster ID=RAFTADDR,... (the same list to every initial node) to start a new cluster, or --join HTTPADDR,... to join a running one", a.dataDir)
	}
	if a.validate {
		c.printSettings(stdout)
		return a, nil, false, exitOK
	}
	return a, initial, true, exitOK
}

func runAgent(args []string, stdout, stderr io.Writer) int {
	a, initial, ok, code := agentSettings(args, os.Environ(), stdout, stderr)
	if !ok {
		return code
	}
	logger := newLogger("permitd", a.logLevel, a.logFormat, stderr)
	fails := failureReporter{stderr, logger, a.logFormat, "agent"}
	ag, err := startAgent(a, initial, logger)
	if err != nil {
		fails.report("start", err)
		return exitFailure
	}
	if a.join != "" {
		if err := joinCluster(a, logger); err != nil {
			fails.report("join", err)
			ag.stop()
			return exitFailure
		}
	}
	if signalled, err := waitForStop(logger, func() { ag.reloadTokens(a.tls.tokenFile, logger) }, ag.httpErr); !signalled {
		fails.report("http", err)
		ag.stop()
		return exitFailure
	}
	if err := ag.stop(); err != nil {
		fails.report("stop", err)
		return exitFailure
	}
	logger.Info("stopped")
	return exitOK
}

// agent is a running node with its HTTP server.
type agent struct {
	tokens  *auth.TokenStore // nil without --token-file
	node    *node.Node
	http    *http.Server
	httpErr chan error
	clock   *node.SkewedClock
	faults  *faultnet.TCPFaults // nil without --test-hooks
}

// startAgent starts the node of a (a new cluster's initial voters, or
// none) and its HTTP server, which also serves the binary protocol; the
// server's failure arrives on the agent's httpErr.
func startAgent(a agentFlags, initial []raft.Server, logger hclog.Logger) (*agent, error) {
	clock, err := node.NewSkewedClock(wire.NewMonotonicClock(), a.clockOffset, a.clockRate)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	registerProcessMetrics(reg)
	registerDataDirMetrics(reg, a.dataDir)
	ag := &agent{clock: clock, httpErr: make(chan error, 1)}
	var network node.Network // default: plain TCP
	if a.testHooks {
		self := a.advertise
		if self == "" {
			self = a.raftAddr
		}
		ag.faults = faultnet.NewTCP(self)
		network = ag.faults
	}
	sec, err := a.tls.load(network)
	if err != nil {
		return nil, err
	}
	if sec != nil {
		network = sec.raft
	}
	if a.testBreakTimeline {
		logger.Warn("UNSAFE --test-break-timeline: a new leader resumes the timeline from its own clock; this node may grant permits early")
	}
	metrics, err := ag.startNode(a, initial, network, reg, logger)
	if err != nil {
		return nil, err
	}
	h, serveBinary, err := ag.handlers(a, metrics, logger)
	if err != nil {
		ag.node.Shutdown()
		return nil, err
	}
	ln, err := net.Listen("tcp", a.httpAddr)
	if err != nil {
		ag.node.Shutdown()
		return nil, fmt.Errorf("listen on --http-addr %s: %w", a.httpAddr, err)
	}
	if sec != nil {
		ln = tls.NewListener(ln, sec.api)
	}
	// The HTTP port also serves the binary reserve protocol (inside TLS
	// when it is on).
	ln = server.NewSniffListener(ln, serveBinary)
	ag.http = server.NewHTTPServer(a.httpAddr, h)
	go func() {
		if err := ag.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ag.httpErr <- err
		}
	}()
	ag.node.SetHTTPAddr(advertisedHTTP(a, ln.Addr().String()))
	logger.Info("listening", "id", a.id, "http_addr", ln.Addr().String(), "raft_addr", ag.node.RaftAddr(), "tls", sec != nil, "client_cert_auth", a.tls.clientCertAuth, "tokens", a.tls.tokenFile != "", "version", readBuildInfo().Version)
	return ag, nil
}

// advertisedHTTP is the HTTP address the other nodes learn for this one:
// --advertise-http, else the address the API listens on (listening), its
// wildcard host (all interfaces) replaced by the host of the raft address
// the other nodes dial.
func advertisedHTTP(a agentFlags, listening string) string {
	if a.advertiseHTTP != "" {
		return a.advertiseHTTP
	}
	host, port, err := net.SplitHostPort(listening)
	if err != nil {
		return listening
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		raftAddr := a.advertise
		if raftAddr == "" {
			raftAddr = a.raftAddr
		}
		if rh, _, err := net.SplitHostPort(raftAddr); err == nil && rh != "" {
			if rip := net.ParseIP(rh); rip == nil || !rip.IsUnspecified() {
				return net.JoinHostPort(rh, port)
			}
		}
	}
	return listening
}

// startNode starts the agent's node on network, its metrics registered
// in reg.
func (ag *agent) startNode(a agentFlags, initial []raft.Server, network node.Network, reg *prometheus.Registry, logger hclog.Logger) (*server.Metrics, error) {
	var metrics *server.Metrics
	limitMetrics := server.NewLimitMetrics(a.metricsMaxLimits)
	n, err := node.New(node.Config{
		ID: a.id, DataDir: a.dataDir, RaftAddr: a.raftAddr, AdvertiseAddr: a.advertise,
		InitialCluster: initial, Clock: ag.clock, Logger: logger, Network: network,
		HeartbeatTimeout: a.heartbeat, ElectionTimeout: a.election, LeaderLeaseTimeout: a.leaderLease, CommitTimeout: a.commit,
		SnapshotThreshold: a.snapshotThreshold, SnapshotInterval: a.snapshotInterval, TrailingLogs: a.trailingLogs,
		MaxBatch: a.maxBatch, MaxInflight: a.maxInflight, MaxPendingReserves: a.maxPending, MaxPendingJoins: a.maxPendingJoins,
		UnsafeResumeFromOwnClock: a.testBreakTimeline,
		Applied:                  limitMetrics,
		OnBatch: func(size int, d time.Duration) {
			if metrics != nil {
				metrics.ObserveBatch(size, d)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	ag.node = n
	metrics = server.NewMetrics(reg, n.Status)
	server.RegisterShadowMetrics(reg, n.LocalShadowLimits)
	limitMetrics.Register(reg, n)
	return metrics, nil
}

// handlers are the agent's HTTP handler (the API, the test hooks with
// --test-hooks, the profiler with --pprof) and its binary protocol's,
// both behind the tokens with --token-file.
func (ag *agent) handlers(a agentFlags, metrics *server.Metrics, logger hclog.Logger) (http.Handler, server.BinaryServer, error) {
	n := ag.node
	var h http.Handler = server.NewHandler(n, server.HandlerOptions{Logger: logger.Named("http"), Metrics: metrics, SessionsPerToken: a.sessionsPerToken})
	if a.testHooks {
		h = testhooks.WithClockHook(h, ag.clock, n)
		h = testhooks.WithFaultHooks(h, ag.faults)
	}
	if a.pprof {
		h = withPprof(h)
	}
	bin := server.NewBinary(n).WithMetrics(metrics)
	serveBinary := server.BinaryServer(bin.Serve)
	if a.tls.tokenFile != "" {
		ts, err := loadTokens(a.tls.tokenFile)
		if err != nil {
			return nil, nil, err
		}
		ag.tokens = auth.NewTokenStore(ts)
		h = server.RequireTokens(h, ag.tokens)
		serveBinary = server.AuthenticatedBinary(ag.tokens, a.sessionsPerToken, bin.ServeAs)
	}
	return h, serveBinary, nil
}

// reloadTokens re-reads the agent's token file (on SIGHUP); see
// reloadTokenFile.
func (ag *agent) reloadTokens(file string, logger hclog.Logger) {
	reloadTokenFile(ag.tokens, file, "--token-file", logger)
}

func (ag *agent) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := ag.node.Shutdown()
	_ = ag.http.Shutdown(ctx)
	return err
}

// joinCluster asks a running node to add this one, retrying until it works
// or a minute has passed.
func joinCluster(a agentFlags, logger hclog.Logger) error {
	adv := a.advertise
	if adv == "" {
		adv = a.raftAddr
	}
	var opts []client.Option
	if a.tls.enabled() {
		conf, err := tlsfiles.Client(a.tls.ca, a.tls.cert, a.tls.key)
		if err != nil {
			return err
		}
		opts = append(opts, client.WithTLS(conf))
	}
	if a.joinToken != "" {
		opts = append(opts, client.WithToken(a.joinToken))
	}
	c, err := client.New(splitList(a.join), opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		j, err := c.Join(ctx, a.id, adv)
		if err == nil {
			logger.Info("joined cluster; a non-voter until the leader has seen it caught up", "via", a.join, "voter", j.Voter)
			return nil
		}
		logger.Warn("join failed, retrying", "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("join via %s: %w", a.join, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
