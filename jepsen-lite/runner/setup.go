package runner

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/transport/client"
)

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
	} else {
		b := cfg.BurstSeconds
		spec.Algorithm, spec.MaxBurstSeconds = "bursty", &b
	}
	put := history.PutRequest(name, spec)
	li.Config = put.Config
	c, err := r.client(servers)
	if err != nil {
		return li, err
	}
	proc := cfg.Workers // the runner's own process, after the workers
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		inv, err := hw.Invoke(proc, "", history.FPut, "", put)
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
		if wait.Sleep(ctx, 500*time.Millisecond) != nil {
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
func (r *run) clusterTime(ctx context.Context, ct *cluster.Control, cl *cluster.Cluster) (clusterReading, bool) {
	sts := ct.Statuses(ctx, cl.Nodes, time.Second)
	id, _ := cluster.LeaderOf(sts)
	if id == "" {
		return clusterReading{}, false
	}
	return clusterReading{real: int64(time.Since(r.start)), cluster: sts[id].ClusterNanos}, true
}

// probeClusterTime writes a probe limit (not in the history) so that the
// leader's last applied time is now, then reads it.
func (r *run) probeClusterTime(ctx context.Context, ct *cluster.Control, cl *cluster.Cluster, servers []string) (clusterReading, bool) {
	c, err := r.client(servers)
	if err != nil {
		return clusterReading{}, false
	}
	for attempt := 0; attempt < 30 && ctx.Err() == nil; attempt++ {
		if _, err := c.PutLimit(ctx, "jl-probe", client.LimitSpec{Algorithm: "strict", Rate: 1, Per: time.Second}); err == nil {
			if rd, ok := r.clusterTime(ctx, ct, cl); ok {
				return rd, true
			}
		}
		_ = wait.Sleep(ctx, 500*time.Millisecond)
	}
	return clusterReading{}, false
}

// collect reads every node's final status, limits and state. Limits are
// read first on every node: a linearizable read is a raft barrier, a log
// entry, so the nodes settle again before their applied indexes and state
// hashes are read.
func (r *run) collect(ctx context.Context, ct *cluster.Control, cl *cluster.Cluster) ([]checker.NodeFinal, []NodeReport) {
	finals := make([]checker.NodeFinal, len(cl.Nodes))
	reports := make([]NodeReport, len(cl.Nodes))
	errs := make([][]string, len(cl.Nodes))
	for i, n := range cl.Nodes {
		reports[i] = NodeReport{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Log: filepath.Join("nodes", n.ID+".log")}
		finals[i] = checker.NodeFinal{Name: n.ID}
		var limits []byte
		// A linearizable read: a leadership change right then (an
		// election after the final heal) answers 503; read again. The
		// unpaged list answers at most 10 000 limits (past that, 400):
		// no workload makes more (--templated-keys is at most 4 096).
		err := ct.Do(ctx, n, "GET", "/v1/limits", nil, &limits, 5*time.Second)
		for attempt := 0; err != nil && cluster.AnswerCode(err) == http.StatusServiceUnavailable && attempt < 5; attempt++ {
			if wait.Sleep(ctx, 500*time.Millisecond) != nil {
				break
			}
			limits = nil
			err = ct.Do(ctx, n, "GET", "/v1/limits", nil, &limits, 5*time.Second)
		}
		if err != nil {
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
	if err := ct.Settle(ctx, cl.Nodes, 30*time.Second); err != nil {
		errs[0] = append(errs[0], "after the limit reads: "+err.Error())
	}
	for i, n := range cl.Nodes {
		var status []byte
		if err := ct.Do(ctx, n, "GET", "/v1/status", nil, &status, 2*time.Second); err != nil {
			errs[i] = append(errs[i], err.Error())
		}
		st, rawState, err := ct.State(ctx, n)
		if err != nil {
			errs[i] = append(errs[i], err.Error())
		}
		reports[i].Status, reports[i].State = rawJSON(status), rawJSON(rawState)
		finals[i].Status = checker.NodeStatus{AppliedIndex: st.AppliedIndex, StateHash: st.StateHash}
		reports[i].Error = strings.Join(errs[i], "; ")
	}
	return finals, reports
}

// nodeReports fills in restarts and the remote snapshots the observer
// saw (and the node list when collection did not run).
func nodeReports(cl *cluster.Cluster, reps []NodeReport, installs []cluster.SnapshotInstall) []NodeReport {
	if len(reps) == 0 {
		for _, n := range cl.Nodes {
			reps = append(reps, NodeReport{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Log: filepath.Join("nodes", n.ID+".log")})
		}
	}
	for i, n := range cl.Nodes {
		if i >= len(reps) {
			continue
		}
		reps[i].Restarts = n.Proc.Restarts()
		reps[i].RemoteSnapshots, reps[i].SnapshotInstalls = 0, nil
		for _, in := range installs {
			if in.Node == n.ID {
				reps[i].RemoteSnapshots++
				reps[i].SnapshotInstalls = append(reps[i].SnapshotInstalls, in)
			}
		}
	}
	return reps
}

// binary returns the permitd binary to run: Config.PermitdBin, or one
// built from the source tree into its tmp/permitd.
func (r *run) binary(ctx context.Context) (string, error) {
	bin := r.cfg.PermitdBin
	if bin == "" {
		root := r.cfg.ModuleRoot
		if root == "" {
			wd, _ := os.Getwd()
			var err error
			if root, err = FindModuleRoot(wd); err != nil {
				return "", err
			}
		}
		bin = filepath.Join(root, "tmp", "permitd")
		r.logf("building %s", bin)
		if err := BuildPermitd(ctx, root, bin); err != nil {
			return "", err
		}
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	return bin, nil
}

// startAPI starts the fake API on a unix socket in dir, with the
// history's time base and the workload's bound; stop shuts it down.
func (r *run) startAPI(dir string) (api *fakeapi.Server, sock string, stop func(), err error) {
	cfg := r.cfg
	apiCfg := fakeapi.Config{Start: r.start, Mode: fakeapi.Spacing, IntervalNanos: int64(cfg.Interval - cfg.Expiry)}
	switch cfg.Workload {
	case WorkloadWindow:
		apiCfg = fakeapi.Config{Start: r.start, Mode: fakeapi.Window, WindowNanos: int64(time.Second),
			Bound: limitInfo{IntervalNanos: int64(cfg.Interval), MaxStoredNanos: int64(cfg.BurstSeconds * 1e9), MaxPermits: cfg.MaxPermits}.mustBound(cfg.Workload)}
	case WorkloadMulti:
		apiCfg = multiAPIConfig(cfg, r.start)
	case WorkloadTemplated:
		apiCfg = templatedAPIConfig(cfg, r.start)
	case WorkloadLeased:
		if apiCfg, err = leasedAPIConfig(cfg, r.start); err != nil {
			return nil, "", nil, err
		}
	}
	if api, err = fakeapi.New(apiCfg); err != nil {
		return nil, "", nil, err
	}
	sock = filepath.Join(dir, "api.sock")
	ln, err := fakeapi.ListenUnix(sock)
	if err != nil {
		return nil, "", nil, err
	}
	go func() { _ = api.Serve(ln) }()
	return api, sock, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = api.Shutdown(sctx)
	}, nil
}
