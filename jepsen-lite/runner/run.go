package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/transport/client"
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
	// RemoteSnapshots counts the snapshots the node installed from a leader
	// (raft's "Installed remote snapshot" log lines): a follower that fell
	// behind a compacted log.
	RemoteSnapshots int    `json:"remote_snapshots"`
	Error           string `json:"error,omitempty"`
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
	if err := prepareOut(cfg.OutDir); err != nil {
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

// prepareOut creates dir, which must be absent or empty.
func prepareOut(dir string) error {
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

// execute does the run; harness failures end up in sum.Errors.
func (r *run) execute(ctx context.Context) *Summary {
	cfg := r.cfg
	wall := time.Now()
	sum := &Summary{
		Mode: ModeFallback, Config: cfg, Nemesis: formatNemeses(cfg.Nemeses),
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
			if err := netEnv.cleanup(context.WithoutCancel(ctx)); err != nil {
				sum.Errors = append(sum.Errors, "namespace cleanup: "+err.Error())
			}
		}()
	}
	if err != nil {
		return fail("%v", err)
	}

	// The binary.
	bin := cfg.PermitdBin
	if bin == "" {
		root := cfg.ModuleRoot
		if root == "" {
			wd, _ := os.Getwd()
			var err error
			if root, err = FindModuleRoot(wd); err != nil {
				return fail("%v", err)
			}
		}
		bin = filepath.Join(root, "tmp", "permitd")
		r.logf("building %s", bin)
		if err := BuildPermitd(ctx, root, bin); err != nil {
			return fail("%v", err)
		}
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	sum.Binary = bin

	// The cluster. Every exit path below stops every agent by pid.
	cl, distinct, err := newCluster(bin, cfg.OutDir, cfg.Nodes, agentFlags(cfg), cfg.AgentFlagsFor, r.logf)
	if err != nil {
		return fail("%v", err)
	}
	sum.DistinctIPs = distinct
	if netEnv != nil {
		netEnv.adopt(cl) // every node on its own address in its namespace
		sum.DistinctIPs = true
	}
	defer func() {
		cl.stopAll(5 * time.Second)
		sum.Nodes = nodeReports(cl, sum.Nodes)
	}()
	for _, n := range cl.nodes {
		if err := cl.start(n); err != nil {
			return fail("%v", err)
		}
	}
	ct := newControl()
	ct.kernel = netEnv
	if _, err := ct.waitLeader(ctx, cl.nodes, 30*time.Second); err != nil {
		return fail("cluster did not come up: %v", err)
	}

	// The fake API, on a unix socket outside the fault layer's reach.
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
	apiCfg := fakeapi.Config{Start: r.start, Mode: fakeapi.Spacing, IntervalNanos: int64(cfg.Interval - cfg.Expiry)}
	if cfg.Workload == WorkloadWindow {
		apiCfg = fakeapi.Config{Start: r.start, Mode: fakeapi.Window, WindowNanos: int64(time.Second),
			Bound: limitInfo{IntervalNanos: int64(cfg.Interval), MaxStoredNanos: int64(cfg.BurstSeconds * 1e9), MaxPermits: cfg.MaxPermits}.mustBound(cfg.Workload)}
	}
	if cfg.Workload == WorkloadLeased {
		if apiCfg, err = leasedAPIConfig(cfg, r.start); err != nil {
			return fail("%v", err)
		}
	}
	api, err := fakeapi.New(apiCfg)
	if err != nil {
		return fail("%v", err)
	}
	sock := filepath.Join(sockDir, "api.sock")
	ln, err := fakeapi.ListenUnix(sock)
	if err != nil {
		return fail("%v", err)
	}
	go func() { _ = api.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = api.Shutdown(sctx)
	}()

	// The limit.
	servers := make([]string, len(cl.nodes))
	for i, n := range cl.nodes {
		servers[i] = n.HTTPAddr
	}
	putLimit := r.putLimit
	if cfg.Workload == WorkloadLeased {
		putLimit = r.putLeasedLimit
	}
	li, err := putLimit(ctx, hw, servers)
	if err != nil {
		return fail("creating the limit: %v", err)
	}
	sum.Limit = li
	admin, err := client.New(servers, client.WithAttemptTimeout(2*time.Second)) // the nemesis's puts
	if err != nil {
		return fail("%v", err)
	}
	lag0, lagOK0 := r.clusterTime(ctx, ct, cl)

	// Workload, leader monitor, nemesis.
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	pool := newWorkerPool(cfg.Workers)
	wl := &workload{cfg: cfg, start: r.start, hw: hw, api: fakeapi.NewUnixClient(sock), limit: li.Name, servers: servers, pool: pool}
	runWorker := wl.run
	fl, err := r.startFleet(ctx, bin, li, servers) // leased: worker sidecars
	if err != nil {
		return fail("starting the worker sidecars: %v", err)
	}
	if fl != nil {
		defer fl.stopAll(5 * time.Second)
		runWorker = fl.client(wl)
	}
	mon := &leaderMonitor{cl: cl, ct: ct, start: r.start}
	var bg sync.WaitGroup
	bg.Go(func() { mon.run(wctx) })
	if fl != nil {
		bg.Go(func() { fl.poll(wctx) })
	}
	var workers sync.WaitGroup
	var werrMu sync.Mutex
	var werrs []string
	for id := range cfg.Workers {
		workers.Go(func() {
			if err := runWorker(wctx, id); err != nil {
				werrMu.Lock()
				werrs = append(werrs, fmt.Sprintf("worker %d: %v", id, err))
				werrMu.Unlock()
			}
		})
	}
	nm := newNemesis(cfg, cl, ct, hw, r.start, pool, r.logf)
	nm.fleet = fl
	nm.limit, nm.admin = li, admin
	healAt := cfg.Duration - cfg.Tail
	nemDone := make(chan struct{})
	go func() { defer close(nemDone); nm.run(ctx, sum.Schedule, healAt) }()
	r.logf("workload: %d workers on %s, %d scheduled faults, final heal at %v, end at %v", cfg.Workers, li.Name, len(sum.Schedule), healAt, cfg.Duration)

	_ = sleepCtx(ctx, time.Until(r.start.Add(cfg.Duration)))
	<-nemDone // heals (without ctx) even when interrupted
	sum.HealNanos = int64(healAt)
	for _, rec := range nm.recordsCopy() {
		if rec.EndNanos > sum.HealNanos {
			sum.HealNanos = rec.EndNanos
		}
	}
	stopWorkers()
	if !waitGroup(&workers, 30*time.Second) {
		sum.Errors = append(sum.Errors, "workers did not stop within 30s")
	}
	werrMu.Lock()
	sum.Errors = append(sum.Errors, werrs...)
	werrMu.Unlock()
	sum.EndNanos = int64(time.Since(r.start))
	bg.Wait()
	sum.Nemeses = nm.recordsCopy()
	sum.LeaderChanges = mon.snapshot()
	sum.Workers = wl.counters.snapshot()
	r.finishFleet(context.WithoutCancel(ctx), fl, li, sum)
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
	if err := r.settle(fctx, ct, cl); err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	}
	for _, n := range cl.unexpectedExits() {
		sum.Errors = append(sum.Errors, "agent "+n+" exited on its own (see its log)")
	}
	finals, reports := r.collect(fctx, ct, cl)
	sum.Nodes = reports
	cl.stopAll(5 * time.Second)

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
	logs, lerrs := readLogs(cl.nodes)
	sum.Errors = append(sum.Errors, lerrs...)
	wlogs, wlerrs := fleetLogs(fl)
	logs, sum.Errors = append(logs, wlogs...), append(sum.Errors, wlerrs...)
	r.logf("checking %d ops, %d API calls", len(ops), len(calls))
	co := runChecks(checkInput{
		cfg: cfg, limit: li, ops: ops, calls: calls, finals: finals, logs: logs,
		healNanos: sum.HealNanos, endNanos: sum.EndNanos, lagNanos: sum.TimelineLagNanos, lagSpan: r.lagSpan,
		visualizer: cfg.OutDir, leased: fleetObservations(fl), nemeses: sum.Nemeses,
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

// mustBound is bound for configurations already validated.
func (li limitInfo) mustBound(workload string) bound.Bound {
	b, err := li.bound(workload)
	if err != nil {
		panic(err) // unreachable: the interval was validated > 0
	}
	return b
}

// agentFlags are the flags every agent of a run gets.
func agentFlags(cfg Config) []string {
	flags := []string{"--heartbeat-timeout", "500ms", "--election-timeout", "500ms"}
	if cfg.hasFault(FaultSnapshot) {
		// Snapshot and compact often, so an isolated follower falls behind
		// the leader's log and needs InstallSnapshot when it comes back.
		flags = append(flags, "--snapshot-threshold", "16", "--trailing-logs", "8", "--snapshot-interval", "1s")
	}
	return append(flags, cfg.AgentFlags...)
}

// putLimit creates the run's limit, recording the put in the history.
func (r *run) putLimit(ctx context.Context, hw *history.Writer, servers []string) (limitInfo, error) {
	cfg := r.cfg
	name := "jl-" + cfg.Workload
	spec := client.LimitSpec{Algorithm: "strict", Rate: 1, Per: cfg.Interval}
	li := limitInfo{Name: name, MaxPermits: cfg.MaxPermits}
	if cfg.Workload == WorkloadStrict {
		m, e := cfg.MaxReserved, cfg.Expiry
		spec.MaxReserved, spec.Expiry = &m, &e
		li.Config = map[string]any{"algorithm": "strict", "rate": 1, "per": cfg.Interval.String(), "max_reserved": m, "expiry": e.String()}
	} else {
		b := cfg.BurstSeconds
		spec.Algorithm, spec.MaxBurstSeconds = "bursty", &b
		li.Config = map[string]any{"algorithm": "bursty", "rate": 1, "per": cfg.Interval.String(), "max_burst_seconds": b}
	}
	c, err := client.New(servers, client.WithAttemptTimeout(2*time.Second))
	if err != nil {
		return li, err
	}
	proc := cfg.Workers // the runner's own process, after the workers
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		inv, err := hw.Invoke(proc, "", history.FPut, "", history.LimitRequest{Limit: name, Config: li.Config})
		if err != nil {
			return li, err
		}
		l, err := c.PutLimit(ctx, name, spec)
		if err == nil {
			if _, err := hw.Complete(inv, history.OK, "", "", nil); err != nil {
				return li, err
			}
			li.IntervalNanos = l.IntervalNanos
			li.RatePerSecond = 1e9 / float64(l.IntervalNanos)
			if cfg.Workload == WorkloadStrict {
				li.MaxReserved = *l.MaxReserved
				li.ExpiryNanos = int64(*l.Expiry)
				li.SpacingFormula = fmt.Sprintf("t[i+1] - t[i] >= I - expiry - jitter with I=%v expiry=%v", time.Duration(li.IntervalNanos), time.Duration(li.ExpiryNanos))
			} else {
				li.MaxStoredNanos = int64(*l.MaxBurstSeconds * 1e9)
			}
			b, _ := li.bound(cfg.Workload)
			li.WindowFormula = b.Formula
			r.logf("limit %s: interval %v", name, time.Duration(l.IntervalNanos))
			return li, nil
		}
		lastErr = err
		if _, err := hw.Complete(inv, history.Info, "", "", map[string]string{"error": lastErr.Error()}); err != nil {
			return li, err
		}
		if sleepCtx(ctx, 500*time.Millisecond) != nil {
			break
		}
	}
	return li, fmt.Errorf("runner: put limit %s: %w", name, lastErr)
}

// clusterReading is the cluster time and the real (history) time it was
// read at.
type clusterReading struct{ real, cluster int64 }

// clusterTime reads the leader's cluster_now_ns (the last applied
// command's time: read it right after a write).
func (r *run) clusterTime(ctx context.Context, ct *control, cl *cluster) (clusterReading, bool) {
	sts := ct.statuses(ctx, cl.nodes, time.Second)
	id, _ := leaderOf(sts)
	if id == "" {
		return clusterReading{}, false
	}
	return clusterReading{real: int64(time.Since(r.start)), cluster: sts[id].ClusterNanos}, true
}

// probeClusterTime writes a probe limit (not in the history) so that the
// leader's last applied time is now, then reads it.
func (r *run) probeClusterTime(ctx context.Context, ct *control, cl *cluster, servers []string) (clusterReading, bool) {
	c, err := client.New(servers, client.WithAttemptTimeout(2*time.Second))
	if err != nil {
		return clusterReading{}, false
	}
	for attempt := 0; attempt < 30 && ctx.Err() == nil; attempt++ {
		if _, err := c.PutLimit(ctx, "jl-probe", client.LimitSpec{Algorithm: "strict", Rate: 1, Per: time.Second}); err == nil {
			if rd, ok := r.clusterTime(ctx, ct, cl); ok {
				return rd, true
			}
		}
		_ = sleepCtx(ctx, 500*time.Millisecond)
	}
	return clusterReading{}, false
}

// settle waits until every node answers with the same applied index twice
// in a row (the cluster is quiet and caught up), up to 30s.
func (r *run) settle(ctx context.Context, ct *control, cl *cluster) error {
	deadline := time.Now().Add(30 * time.Second)
	var last []uint64
	stable := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var idx []uint64
		for _, n := range cl.nodes {
			st, _, err := ct.state(ctx, n)
			if err != nil {
				idx = nil
				break
			}
			idx = append(idx, st.AppliedIndex)
		}
		same := len(idx) == len(cl.nodes)
		for _, v := range idx {
			same = same && v == idx[0]
		}
		if same && fmt.Sprint(idx) == fmt.Sprint(last) {
			stable++
			if stable >= 2 {
				return nil
			}
		} else {
			stable = 0
		}
		last = idx
		_ = sleepCtx(ctx, 250*time.Millisecond)
	}
	return fmt.Errorf("runner: nodes did not settle at one applied index within 30s (last: %v)", last)
}

// collect reads every node's final status, limits and state. Limits are
// read first on every node: a linearizable read is a raft barrier, a log
// entry, so the nodes settle again before their applied indexes and state
// hashes are read.
func (r *run) collect(ctx context.Context, ct *control, cl *cluster) ([]checker.NodeFinal, []NodeReport) {
	finals := make([]checker.NodeFinal, len(cl.nodes))
	reports := make([]NodeReport, len(cl.nodes))
	errs := make([][]string, len(cl.nodes))
	for i, n := range cl.nodes {
		reports[i] = NodeReport{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Log: filepath.Join("nodes", n.ID+".log")}
		finals[i] = checker.NodeFinal{Name: n.ID}
		var limits []byte
		if err := ct.do(ctx, n, "GET", "/v1/limits", nil, &limits, 5*time.Second); err != nil {
			errs[i] = append(errs[i], err.Error())
		}
		reports[i].Limits = rawJSON(limits)
		if limits != nil {
			if ls, err := checker.ParseLimits(limits); err == nil {
				finals[i].Limits = ls
			} else {
				errs[i] = append(errs[i], err.Error())
			}
		}
	}
	if err := r.settle(ctx, ct, cl); err != nil {
		errs[0] = append(errs[0], "after the limit reads: "+err.Error())
	}
	for i, n := range cl.nodes {
		var status []byte
		if err := ct.do(ctx, n, "GET", "/v1/status", nil, &status, 2*time.Second); err != nil {
			errs[i] = append(errs[i], err.Error())
		}
		st, rawState, err := ct.state(ctx, n)
		if err != nil {
			errs[i] = append(errs[i], err.Error())
		}
		reports[i].Status, reports[i].State = rawJSON(status), rawJSON(rawState)
		finals[i].Status = checker.NodeStatus{AppliedIndex: st.AppliedIndex, StateHash: st.StateHash}
		reports[i].Error = strings.Join(errs[i], "; ")
	}
	return finals, reports
}

// nodeReports fills in restarts (and the node list when collection did
// not run).
func nodeReports(cl *cluster, reps []NodeReport) []NodeReport {
	if len(reps) == 0 {
		for _, n := range cl.nodes {
			reps = append(reps, NodeReport{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Log: filepath.Join("nodes", n.ID+".log")})
		}
	}
	for i, n := range cl.nodes {
		if i < len(reps) {
			n.mu.Lock()
			reps[i].Restarts = n.restarts
			n.mu.Unlock()
			if b, err := os.ReadFile(n.LogPath); err == nil {
				reps[i].RemoteSnapshots = strings.Count(string(b), "Installed remote snapshot")
			}
		}
	}
	return reps
}

// waitGroup waits for wg up to timeout.
func waitGroup(wg *sync.WaitGroup, timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}
