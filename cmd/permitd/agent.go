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
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/node/faultnet"
	"github.com/permitd/permitd/transport"
	"github.com/permitd/permitd/transport/client"
)

func init() {
	register("agent", "run a register node (raft member serving the HTTP API)", runAgent)
}

// agentFlags are the agent's command-line options.
type agentFlags struct {
	id, dataDir, raftAddr, advertise, httpAddr string
	initialCluster, join                       string
	logLevel                                   string
	heartbeat, election, leaderLease, commit   time.Duration
	snapshotThreshold                          uint64
	snapshotInterval                           time.Duration
	maxBatch, maxInflight                      int
	clockOffset                                time.Duration
	clockRate                                  float64
	testHooks                                  bool
	testBreakTimeline                          bool
	trailingLogs                               uint64
	pprof                                      bool
}

func (a *agentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.id, "id", "", "node ID, unique in the cluster (required)")
	fs.StringVar(&a.dataDir, "data-dir", "", "directory for the raft log, stable store and snapshots (required)")
	fs.StringVar(&a.raftAddr, "raft-addr", "127.0.0.1:7001", "HOST:PORT to listen on for raft and request forwarding")
	fs.StringVar(&a.advertise, "advertise", "", "raft HOST:PORT other nodes dial (default: --raft-addr)")
	fs.StringVar(&a.httpAddr, "http-addr", "127.0.0.1:8001", "HOST:PORT of the HTTP API")
	fs.StringVar(&a.initialCluster, "initial-cluster", "", "ID=RAFTADDR,... of the initial voters; give the same list to every initial node")
	fs.StringVar(&a.join, "join", "", "HTTPADDR[,HTTPADDR...] of running nodes: join their cluster")
	fs.StringVar(&a.logLevel, "log-level", "warn", "log level: trace, debug, info, warn, error")
	fs.DurationVar(&a.heartbeat, "heartbeat-timeout", 500*time.Millisecond, "raft heartbeat timeout")
	fs.DurationVar(&a.election, "election-timeout", 500*time.Millisecond, "raft election timeout")
	fs.DurationVar(&a.leaderLease, "leader-lease-timeout", 300*time.Millisecond, "raft leader lease timeout (<= heartbeat timeout)")
	fs.DurationVar(&a.commit, "commit-timeout", 5*time.Millisecond, "raft commit timeout")
	fs.Uint64Var(&a.snapshotThreshold, "snapshot-threshold", 8192, "log entries between snapshots")
	fs.DurationVar(&a.snapshotInterval, "snapshot-interval", 20*time.Second, "how often to check whether to snapshot")
	fs.IntVar(&a.maxBatch, "max-batch", 1024, "most reserves in one log entry")
	fs.IntVar(&a.maxInflight, "max-inflight", 2, "most reserve entries being committed at once")
	fs.DurationVar(&a.clockOffset, "clock-offset", 0, "TESTING: skew this node's clock by an offset")
	fs.Float64Var(&a.clockRate, "clock-rate", 1, "TESTING: run this node's clock at this rate")
	fs.Uint64Var(&a.trailingLogs, "trailing-logs", 4096, "log entries kept after a snapshot (fewer makes lagging followers need a snapshot sooner)")
	fs.BoolVar(&a.testHooks, "test-hooks", false, "TESTING: inject faults into raft's network (faultnet.TCPFaults) and serve POST /v1/debug/clock (change the clock skew at run time), GET /v1/debug/state (applied index and state hash), GET/POST/DELETE /v1/debug/faults (partitions, loss, delay)")
	fs.BoolVar(&a.testBreakTimeline, "test-break-timeline", false, "TESTING, UNSAFE (needs --test-hooks): a new leader resumes the cluster timeline from its own clock instead of the last applied time: a deliberately broken register that grants early, for jepsen-lite to catch")
	fs.BoolVar(&a.pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on the HTTP address")
}

func parseInitialCluster(s string) ([]raft.Server, error) {
	var out []raft.Server
	seen := map[string]bool{}
	for _, item := range splitList(s) {
		id, addr, ok := strings.Cut(item, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--initial-cluster item %q: want ID=HOST:PORT", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--initial-cluster item %q: %v", item, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("--initial-cluster: ID %q given twice", id)
		}
		seen[id] = true
		out = append(out, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr), Suffrage: raft.Voter})
	}
	return out, nil
}

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a agentFlags
	a.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: permitd agent --id ID --data-dir DIR --raft-addr HOST:PORT --http-addr HOST:PORT
                     (--initial-cluster ID=RAFTADDR,... | --join HTTPADDR)

Runs one register node. Start a new cluster by giving every initial node the
same --initial-cluster; add a node to a running cluster with --join. A node
restarted with its data directory rejoins by itself (no flag needed).
SIGINT/SIGTERM stop it gracefully (a leader hands over leadership first).

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
	if a.id == "" || a.dataDir == "" {
		fmt.Fprintln(stderr, "permitd agent: --id and --data-dir are required")
		return 2
	}
	initial, err := parseInitialCluster(a.initialCluster)
	if err != nil {
		fmt.Fprintln(stderr, "permitd agent:", err)
		return 2
	}
	if len(initial) > 0 && a.join != "" {
		fmt.Fprintln(stderr, "permitd agent: give --initial-cluster or --join, not both")
		return 2
	}
	if a.testBreakTimeline && !a.testHooks {
		fmt.Fprintln(stderr, "permitd agent: --test-break-timeline is a test-only fault and needs --test-hooks")
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "permitd", Level: hclog.LevelFromString(a.logLevel), Output: stderr})
	ag, err := startAgent(a, initial, logger)
	if err != nil {
		fmt.Fprintln(stderr, "permitd agent:", err)
		return 1
	}
	if a.join != "" {
		if err := joinCluster(a, logger); err != nil {
			fmt.Fprintln(stderr, "permitd agent:", err)
			ag.stop()
			return 1
		}
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		logger.Info("stopping", "signal", s.String())
	case err := <-ag.httpErr:
		fmt.Fprintln(stderr, "permitd agent: http:", err)
		ag.stop()
		return 1
	}
	go func() {
		<-sig
		logger.Warn("second signal: exiting now")
		os.Exit(1)
	}()
	if err := ag.stop(); err != nil {
		fmt.Fprintln(stderr, "permitd agent:", err)
		return 1
	}
	return 0
}

// agent is a running node with its HTTP server.
type agent struct {
	node    *node.Node
	http    *http.Server
	httpErr chan error
	clock   *node.SkewedClock
	faults  *faultnet.TCPFaults // nil without --test-hooks
}

func startAgent(a agentFlags, initial []raft.Server, logger hclog.Logger) (*agent, error) {
	clock, err := node.NewSkewedClock(node.NewMonotonicClock(), a.clockOffset, a.clockRate)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
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
	if a.testBreakTimeline {
		logger.Warn("UNSAFE --test-break-timeline: a new leader resumes the timeline from its own clock; this node may grant permits early")
	}
	var metrics *transport.Metrics
	n, err := node.New(node.Config{
		ID: a.id, DataDir: a.dataDir, RaftAddr: a.raftAddr, AdvertiseAddr: a.advertise,
		InitialCluster: initial, Clock: clock, Logger: logger, Network: network,
		HeartbeatTimeout: a.heartbeat, ElectionTimeout: a.election, LeaderLeaseTimeout: a.leaderLease, CommitTimeout: a.commit,
		SnapshotThreshold: a.snapshotThreshold, SnapshotInterval: a.snapshotInterval, TrailingLogs: a.trailingLogs,
		MaxBatch: a.maxBatch, MaxInflight: a.maxInflight,
		UnsafeResumeFromOwnClock: a.testBreakTimeline,
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
	metrics = transport.NewMetrics(reg, n.Status)
	var h http.Handler = transport.NewHandler(n, transport.HandlerOptions{Logger: logger.Named("http"), Metrics: metrics})
	if a.testHooks {
		h = withClockHook(h, clock, n)
		h = withFaultHooks(h, ag.faults)
	}
	if a.pprof {
		h = withPprof(h)
	}
	ln, err := net.Listen("tcp", a.httpAddr)
	if err != nil {
		n.Shutdown()
		return nil, fmt.Errorf("listen on --http-addr %s: %w", a.httpAddr, err)
	}
	// The HTTP port also serves the binary reserve protocol.
	ln = transport.NewSniffListener(ln, n.ServeClient)
	ag.http = transport.NewServer(a.httpAddr, h)
	go func() {
		if err := ag.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ag.httpErr <- err
		}
	}()
	logger.Info("agent started", "id", a.id, "raft_addr", n.RaftAddr(), "http_addr", ln.Addr().String())
	return ag, nil
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
	c, err := client.New(splitList(a.join))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		err := c.Join(ctx, a.id, adv)
		if err == nil {
			logger.Info("joined cluster", "via", a.join)
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
