package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/secure"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/jepsen-lite/runner/nemesis"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
)

// Exit codes of a run (Summary.ExitCode, and the jepsen command's status).
const (
	// ExitValid: every checker passed.
	ExitValid = 0
	// ExitSafety: a safety checker found a violation.
	ExitSafety = 1
	// ExitUsage: bad flags or configuration.
	ExitUsage = 2
	// ExitHarness: the run could not be carried out or judged completely
	// (no safety violation found in what could be judged).
	ExitHarness = 3
	// ExitLiveness: safe, but throughput did not recover after the heal.
	ExitLiveness = 4
)

// Summary is a run's result, written as summary.json.
type Summary struct {
	// Verdict is "valid", "unsafe" (a safety violation), "not recovered"
	// (liveness only) or "incomplete" (harness errors).
	Verdict       string `json:"verdict"`
	SafetyValid   bool   `json:"safety_valid"`
	LivenessValid bool   `json:"liveness_valid"`
	ExitCode      int    `json:"exit_code"`
	// Mode is the cluster mode that ran (namespaces or fallback);
	// ModeDetail says why and how faults were injected.
	Mode       string           `json:"mode"`
	ModeDetail string           `json:"mode_detail"`
	Namespaces NamespaceSupport `json:"namespaces"`
	// DistinctIPs reports that each node had its own IP (fallback: its
	// own loopback IP, inbound connections recognisable by the fault
	// layer; always true in the namespace mode).
	DistinctIPs bool `json:"distinct_loopback_ips"`
	// Command is the command line (set by the jepsen command).
	Command string `json:"command,omitempty"`
	Config  Config `json:"config"`
	Nemesis string `json:"nemesis"`
	Binary  string `json:"permitd_bin"`

	StartedAt   time.Time `json:"started_at"`
	WallSeconds float64   `json:"wall_seconds"`
	// HealNanos is the final heal, EndNanos the end of the workload, in
	// the history's time base.
	HealNanos int64 `json:"heal_ns"`
	EndNanos  int64 `json:"end_ns"`

	Limit         limitInfo       `json:"limit"`
	Schedule      []Event         `json:"schedule"`
	Nemeses       []NemesisRecord `json:"nemeses"`
	LeaderChanges []LeaderChange  `json:"leader_changes"`
	Workers       WorkerStats     `json:"workers"`
	APICalls      int             `json:"api_calls"`
	Jitter        checker.Jitter  `json:"jitter"`
	// TimelineLagNanos is real time minus cluster time elapsed over the
	// run (negative: the timeline ran ahead).
	TimelineLagNanos int64            `json:"timeline_lag_ns"`
	Checkers         []checker.Result `json:"checkers"`
	Phases           []Phase          `json:"phases"`
	Nodes            []NodeReport     `json:"nodes"`
	Files            []string         `json:"files"`
	// Leased reports the worker sidecars (leased workload only).
	Leased *LeasedSummary `json:"leased,omitempty"`
	// Multi reports the multi workload's settlements, releases and live
	// judge (multi workload only).
	Multi *MultiSummary `json:"multi,omitempty"`
	// Security reports a secure run's credentials and what the agents
	// said of their listeners (Config.Secure only).
	Security *SecurityReport `json:"security,omitempty"`
	// Errors are harness problems (not violations).
	Errors []string `json:"errors,omitempty"`
}

// NodeReport is one node's final state.
type NodeReport struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Restarts int    `json:"restarts"`
	// Status, Limits and State are the node's final GET /v1/status,
	// /v1/limits and /v1/debug/state (raw JSON).
	Status any    `json:"status,omitempty"`
	Limits any    `json:"limits,omitempty"`
	State  any    `json:"state,omitempty"`
	Log    string `json:"log"`
	// RemoteSnapshots counts the snapshots the node was seen to install
	// from a leader, through GET /v1/status (cluster.SnapshotInstall: it
	// needed an entry no other node still had, then its snapshot covered
	// it); a lower bound. SnapshotInstalls are those installs.
	RemoteSnapshots  int                       `json:"remote_snapshots"`
	SnapshotInstalls []cluster.SnapshotInstall `json:"snapshot_installs,omitempty"`
	Error            string                    `json:"error,omitempty"`
}

// Run carries out one run: it starts the cluster, the fake API, the
// workers and the nemesis, heals, waits for the cluster to settle, judges
// the history and writes the report to cfg.OutDir. It returns an error
// (and no summary) only for a bad configuration or output directory; every
// other problem is in the summary, whose ExitCode is the verdict. Every
// process it starts is stopped before it returns.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := PrepareOut(cfg.OutDir); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, log: cfg.Log}
	if r.log == nil {
		r.log = io.Discard
	}
	sum := r.execute(ctx)
	r.finish(sum)
	return sum, nil
}

// PrepareOut creates dir, which must be absent or empty (a report
// directory). Its error for a directory that is not empty wraps ErrInvalid.
func PrepareOut(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("runner: output directory: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("runner: output directory: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("%w: output directory %s is not empty; give a new --out", ErrInvalid, dir)
	}
	return nil
}

// run is one run's state.
type run struct {
	cfg   Config
	log   io.Writer
	logMu sync.Mutex
	start time.Time
	// lagSpan is the real time the timeline lag was measured over.
	lagSpan int64
	// creds are a secure run's credentials (nil: a plain run).
	creds *secure.Creds
}

func (r *run) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	at := "setup"
	if !r.start.IsZero() {
		at = fmt.Sprintf("%6.2fs", time.Since(r.start).Seconds())
	}
	fmt.Fprintf(r.log, "jepsen [%s] %s\n", at, fmt.Sprintf(format, args...))
}

// execute does the run; harness failures end up in sum.Errors. The
// deferred steps stop every process and remove the namespace network on
// every exit path, in reverse order of their creation.
func (r *run) execute(ctx context.Context) *Summary {
	cfg := r.cfg
	wall := time.Now()
	sum := &Summary{
		Mode: ModeFallback, Config: cfg, Nemesis: nemesis.Format(cfg.Nemeses),
		StartedAt: wall, Schedule: Generate(cfg), Command: cfg.Command,
	}
	defer func() { sum.WallSeconds = time.Since(wall).Seconds() }()
	fail := func(format string, args ...any) *Summary {
		sum.Errors = append(sum.Errors, fmt.Sprintf(format, args...))
		r.logf("ERROR: "+format, args...)
		return sum
	}

	// The mode. In the namespace mode the network is removed on every
	// exit path, after the agents are stopped (defers run last first).
	netEnv, err := r.chooseMode(ctx, sum)
	if netEnv != nil {
		defer func() {
			if err := netEnv.Cleanup(context.WithoutCancel(ctx)); err != nil {
				sum.Errors = append(sum.Errors, "namespace cleanup: "+err.Error())
			}
		}()
	}
	if err != nil {
		return fail("%v", err)
	}
	bin, err := r.binary(ctx)
	if err != nil {
		return fail("%v", err)
	}
	sum.Binary = bin

	// The cluster. Every exit path below stops every agent by pid.
	cl, distinct, err := cluster.New(bin, cfg.OutDir, cfg.Nodes, agentFlags(cfg), cfg.AgentFlagsFor, r.logf)
	if err != nil {
		return fail("%v", err)
	}
	sum.DistinctIPs = distinct
	if netEnv != nil { // every node on its own address in its namespace
		cl.Relocate(netEnv.NodeAddrs, func(node *cluster.Node, bin string, args []string) (string, []string) {
			return netEnv.Command(node.Index, bin, args)
		})
		sum.DistinctIPs = true
	}
	// A secure run's credentials, for the agents' final addresses.
	creds, err := r.secureCluster(ctx, bin, cl, sum)
	if err != nil {
		return fail("%v", err)
	}
	ct := cluster.NewControl(creds)
	if netEnv != nil {
		ct.Kernel = netEnv
	}
	var obs *cluster.Observer
	defer func() {
		cl.StopAll(5 * time.Second)
		var installs []cluster.SnapshotInstall
		if obs != nil {
			installs = obs.SnapshotInstalls()
		}
		sum.Nodes = nodeReports(cl, sum.Nodes, installs)
	}()
	for _, n := range cl.Nodes {
		if err := cl.Start(n); err != nil {
			return fail("%v", err)
		}
	}
	if _, err := ct.WaitLeader(ctx, cl.Nodes, 30*time.Second); err != nil {
		return fail("cluster did not come up: %v", err)
	}

	// The fake API, on a unix socket outside the faults' reach.
	sockDir, err := os.MkdirTemp("", "jl-api-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(sockDir)
	histPath := filepath.Join(cfg.OutDir, "history.jsonl")
	hf, err := os.Create(histPath)
	if err != nil {
		return fail("%v", err)
	}
	defer hf.Close()
	r.start = time.Now()
	sum.StartedAt = r.start
	hw := history.NewWriter(hf, history.SinceStart(r.start))
	api, sock, stopAPI, err := r.startAPI(sockDir)
	if err != nil {
		return fail("%v", err)
	}
	defer stopAPI()

	// The limit.
	servers := cl.Servers()
	putLimit := r.putLimit
	if cfg.Workload == WorkloadLeased {
		putLimit = r.putLeasedLimit
	}
	if cfg.Workload == WorkloadMulti {
		putLimit = r.putMultiLimits
	}
	// The timeline check needs the real time elapsed between two stamps
	// from above: the start reading counts from before the put whose
	// stamp it reads (the status read that follows may be slow under
	// load), the end reading from after its status read.
	realBeforePut := int64(time.Since(r.start))
	li, err := putLimit(ctx, hw, servers)
	if err != nil {
		return fail("creating the limit: %v", err)
	}
	sum.Limit = li
	admin, err := r.client(servers) // the nemesis's puts
	if err != nil {
		return fail("%v", err)
	}
	lag0, lagOK0 := r.clusterTime(ctx, ct, cl)
	lag0.real = realBeforePut

	// Workload, observer, nemesis.
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var fl *workload.Fleet
	if cfg.Workload == WorkloadLeased {
		if fl, err = workload.NewFleet(bin, r.workloadConfig(), li.Name, servers, r.logf); err != nil {
			return fail("laying out the worker sidecars: %v", err)
		}
		defer fl.StopAll(5 * time.Second)
		if err := fl.Launch(ctx, r.start); err != nil {
			return fail("starting the worker sidecars: %v", err)
		}
		r.logf("leased: %v", fl)
	}
	wl := workload.New(r.workloadConfig(), r.start, hw, fakeapi.NewUnixClient(sock), li.Name, servers, fl)
	obs = cluster.NewObserver(cl, ct, r.start)
	var bg sync.WaitGroup
	bg.Go(func() { obs.Run(wctx) })
	if fl != nil {
		bg.Go(func() { fl.Poll(wctx) })
	}
	var workers sync.WaitGroup
	var werrMu sync.Mutex
	var werrs []string
	for id := range cfg.Workers {
		workers.Go(func() {
			if err := wl.Run(wctx, id); err != nil {
				werrMu.Lock()
				werrs = append(werrs, fmt.Sprintf("worker %d: %v", id, err))
				werrMu.Unlock()
			}
		})
	}
	deps := nemesis.Deps{Cluster: cl, Control: ct, History: hw, Start: r.start, Workers: wl.Pool(), Admin: admin, Logf: r.logf,
		Limit: nemesis.Limit{Name: li.Name, Strict: cfg.Workload == WorkloadStrict, IntervalNanos: li.IntervalNanos, MaxReserved: li.MaxReserved, ExpiryNanos: li.ExpiryNanos}}
	if fl != nil {
		deps.Sidecars = fl
	}
	nm := nemesis.New(cfg.nemesisConfig(), deps)
	healAt := cfg.Duration - cfg.Tail
	nemDone := make(chan struct{})
	go func() { defer close(nemDone); nm.Run(ctx, sum.Schedule, healAt) }()
	r.logf("workload: %d workers on %s, %d scheduled faults, final heal at %v, end at %v", cfg.Workers, li.Name, len(sum.Schedule), healAt, cfg.Duration)

	_ = wait.Sleep(ctx, time.Until(r.start.Add(cfg.Duration)))
	<-nemDone // heals (without ctx) even when interrupted
	sum.HealNanos = int64(healAt)
	for _, rec := range nm.Records() {
		sum.HealNanos = max(sum.HealNanos, rec.EndNanos)
	}
	stopWorkers()
	if !wait.Group(&workers, 30*time.Second) {
		sum.Errors = append(sum.Errors, "workers did not stop within 30s")
	}
	werrMu.Lock()
	sum.Errors = append(sum.Errors, werrs...)
	werrMu.Unlock()
	sum.EndNanos = int64(time.Since(r.start))
	bg.Wait()
	sum.Nemeses = nm.Records()
	sum.LeaderChanges = obs.LeaderChanges()
	sum.Workers = wl.Stats()
	r.logf("workers: %d grants of %d permits, %d of several permits (in %d multi-permit turns); %d refused, %d failed (%d never delivered), %d unknown",
		sum.Workers.Granted, sum.Workers.PermitsGranted, sum.Workers.MultiPermitGrants, sum.Workers.MultiPermitTurns,
		sum.Workers.Refused, sum.Workers.Failed, sum.Workers.NotDelivered, sum.Workers.Unknown)
	if fl != nil {
		fl.Finish(context.WithoutCancel(ctx))
		sum.Leased = fl.Summary(li.BurstPermits, li.MaxOutstandingPermits, li.WindowFormula)
		for _, rr := range sum.Leased.Relays {
			r.logf("relay %s (upstream %s, for %v, %d restarts): %d commands in %d batches (%d batched), %d failed batches, %d refused",
				rr.Name, rr.Upstream, rr.Workers, rr.Restarts, rr.Stats.Commands, rr.Stats.Batches, rr.Stats.BatchedCommands, rr.Stats.FailedBatches, rr.Stats.Refused)
		}
		for _, x := range fl.UnexpectedExits() {
			sum.Errors = append(sum.Errors, "worker "+x+" exited on its own (see its log)")
		}
	}
	if ctx.Err() != nil {
		sum.Errors = append(sum.Errors, "interrupted: "+ctx.Err().Error())
	}

	// Settle and collect the final state of every node.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	lag1, lagOK1 := r.probeClusterTime(fctx, ct, cl, servers)
	if lagOK0 && lagOK1 {
		realSpan := lag1.real - lag0.real
		sum.TimelineLagNanos = realSpan - (lag1.cluster - lag0.cluster)
		r.logf("timeline: real %v, cluster %v, lag %v", time.Duration(realSpan), time.Duration(lag1.cluster-lag0.cluster), time.Duration(sum.TimelineLagNanos))
		r.lagSpan = realSpan
	} else {
		sum.Errors = append(sum.Errors, "timeline lag not measured (no leader status at the start or the end)")
	}
	if err := ct.Settle(fctx, cl.Nodes, 30*time.Second); err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	}
	for _, n := range cl.UnexpectedExits() {
		sum.Errors = append(sum.Errors, "agent "+n+" exited on its own (see its log)")
	}
	finals, reports := r.collect(fctx, ct, cl)
	sum.Nodes = reports
	var multiNodes []checker.MultiNodeCounts
	if li.Multi != nil {
		multiNodes = r.collectMulti(fctx, ct, cl, li.Multi)
		ms := api.Stats().Multi
		sum.Multi = &MultiSummary{Workers: wl.MultiStats(), Live: ms, Nodes: multiNodes}
		mw := sum.Multi.Workers
		r.logf("multi: refusals by limit %v; %d settles (%d with refunds, %d tokens refunded), %d duplicate answers, %d conflicts, %d settle errors; %d releases (%d permits), %d repeated, %d errors; tokens estimated %d, used %d",
			mw.Blocking, mw.Settles, mw.SettlesWithRefund, mw.TokensRefunded, mw.SettleDuplicates, mw.SettleConflicts, mw.SettleErrors,
			mw.Releases, mw.Released, mw.ReleaseRepeats, mw.ReleaseErrors, mw.TokensEstimated, mw.TokensUsed)
		if ms != nil {
			r.logf("multi live judge: %d calls, violations: spacing %d, tokens %d, in-flight %d; min gap %v, max in flight %d",
				ms.Calls, ms.SpacingViolations, ms.TokenViolations, ms.InFlightViolations, time.Duration(ms.MinGapNanos), ms.MaxInFlight)
		}
	}
	cl.StopAll(5 * time.Second)

	// Judge.
	if err := hw.Flush(); err != nil {
		return fail("history: %v", err)
	}
	ops, err := history.ReadFile(histPath)
	if err != nil {
		return fail("reading the history back: %v", err)
	}
	calls := api.Calls()
	sum.APICalls = len(calls)
	logs, lerrs := readLogs(cl.Nodes)
	sum.Errors = append(sum.Errors, lerrs...)
	sum.Errors = append(sum.Errors, checkSecureListeners(logs, sum.Security)...)
	var leased *checker.LeasedInput
	if fl != nil {
		wlogs, wlerrs := fl.Logs()
		logs, sum.Errors = append(logs, wlogs...), append(sum.Errors, wlerrs...)
		leased = fl.Observations()
	}
	r.logf("checking %d ops, %d API calls", len(ops), len(calls))
	co := runChecks(checkInput{
		cfg: cfg, limit: li, ops: ops, calls: calls, finals: finals, logs: logs,
		healNanos: sum.HealNanos, endNanos: sum.EndNanos, lagNanos: sum.TimelineLagNanos, lagSpan: r.lagSpan,
		visualizer: cfg.OutDir, leased: leased, nemeses: sum.Nemeses, multiNodes: multiNodes,
	})
	sum.Checkers, sum.Jitter = co.results, co.jitter
	sum.Errors = append(sum.Errors, co.errors...)
	sum.SafetyValid, sum.LivenessValid = co.safetyValid, co.livenessValid
	sum.Phases = phases(ops, sum)
	if err := writeCalls(filepath.Join(cfg.OutDir, "api-calls.jsonl"), calls); err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	}
	return sum
}
