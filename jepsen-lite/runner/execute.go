package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/nemesis"
	"github.com/permitd/permitd/jepsen-lite/runner/netns"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
	"github.com/permitd/permitd/transport/client"
)

// execution is one execute call's state, shared by its steps: what each
// step made for the next ones, and the cleanups they registered.
type execution struct {
	r   *run
	ctx context.Context
	sum *Summary
	// cleanups run last first when execute returns (as defers would).
	cleanups []func()

	netEnv     *netns.Env
	bin        string
	cl         *cluster.Cluster
	ct         *cluster.Control
	obs        *cluster.Observer
	histPath   string
	hw         *history.Writer
	api        *fakeapi.Server
	sock       string
	servers    []string
	li         limitInfo
	admin      *client.Client
	lag0       clusterReading
	lagOK0     bool
	fl         *workload.Fleet
	wl         *workload.Workers
	finals     []checker.NodeFinal
	multiNodes []checker.MultiNodeCounts
}

// execute does the run; harness failures end up in sum.Errors. The
// registered cleanups stop every process and remove the namespace network
// on every exit path, in reverse order of their creation.
func (r *run) execute(ctx context.Context) *Summary {
	cfg := r.cfg
	wall := time.Now()
	x := &execution{r: r, ctx: ctx, sum: &Summary{
		Mode: ModeFallback, Config: cfg, Nemesis: nemesis.Format(cfg.Nemeses),
		StartedAt: wall, Schedule: Generate(cfg), Command: cfg.Command,
	}}
	defer func() { x.sum.WallSeconds = time.Since(wall).Seconds() }()
	defer x.cleanUp()
	steps := []func() error{
		x.prepare, x.startCluster, x.openHistory, x.createLimit,
		x.runWorkload, x.settle, x.judge,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return x.fail(err)
		}
	}
	return x.sum
}

// onExit registers a cleanup for when execute returns.
func (x *execution) onExit(f func()) { x.cleanups = append(x.cleanups, f) }

// cleanUp runs the registered cleanups, last first.
func (x *execution) cleanUp() {
	for i := len(x.cleanups) - 1; i >= 0; i-- {
		x.cleanups[i]()
	}
}

// fail records a harness failure that ends the run.
func (x *execution) fail(err error) *Summary {
	x.sum.Errors = append(x.sum.Errors, fmt.Sprintf("%v", err))
	x.r.logf("ERROR: %v", err)
	return x.sum
}

// prepare chooses the mode and finds the binary. In the namespace mode
// the network is removed on every exit path, after the agents are stopped
// (cleanups run last first).
func (x *execution) prepare() error {
	netEnv, err := x.r.chooseMode(x.ctx, x.sum)
	if netEnv != nil {
		x.netEnv = netEnv
		x.onExit(func() {
			if err := netEnv.Cleanup(context.WithoutCancel(x.ctx)); err != nil {
				x.sum.Errors = append(x.sum.Errors, "namespace cleanup: "+err.Error())
			}
		})
	}
	if err != nil {
		return err
	}
	bin, err := x.r.binary(x.ctx)
	if err != nil {
		return err
	}
	x.sum.Binary = bin
	x.bin = bin
	return nil
}

// startCluster lays out the cluster, starts every agent and waits for a
// leader. Every exit path after it stops every agent by pid.
func (x *execution) startCluster() error {
	cfg, sum, netEnv := x.r.cfg, x.sum, x.netEnv
	cl, distinct, err := cluster.New(x.bin, cfg.OutDir, cfg.Nodes, agentFlags(cfg), cfg.AgentFlagsFor, x.r.logf)
	if err != nil {
		return err
	}
	sum.DistinctIPs = distinct
	if netEnv != nil { // every node on its own address in its namespace
		cl.Relocate(netEnv.NodeAddrs, func(node *cluster.Node, bin string, args []string) (string, []string) {
			return netEnv.Command(node.Index, bin, args)
		})
		sum.DistinctIPs = true
	}
	// A secure run's credentials, for the agents' final addresses.
	creds, err := x.r.secureCluster(x.ctx, x.bin, cl, sum)
	if err != nil {
		return err
	}
	ct := cluster.NewControl(creds)
	if netEnv != nil {
		ct.Kernel = netEnv
	}
	x.cl, x.ct = cl, ct
	x.onExit(func() {
		cl.StopAll(5 * time.Second)
		var installs []cluster.SnapshotInstall
		if x.obs != nil {
			installs = x.obs.SnapshotInstalls()
		}
		sum.Nodes = nodeReports(cl, sum.Nodes, installs)
	})
	for _, n := range cl.Nodes {
		if err := cl.Start(n); err != nil {
			return err
		}
	}
	if _, err := ct.WaitLeader(x.ctx, cl.Nodes, 30*time.Second); err != nil {
		return fmt.Errorf("cluster did not come up: %w", err)
	}
	return nil
}

// openHistory opens the history file and starts the fake API, on a unix
// socket outside the faults' reach. The run's clock starts here.
func (x *execution) openHistory() error {
	sockDir, err := os.MkdirTemp("", "jl-api-")
	if err != nil {
		return err
	}
	x.onExit(func() { os.RemoveAll(sockDir) })
	x.histPath = filepath.Join(x.r.cfg.OutDir, "history.jsonl")
	hf, err := os.Create(x.histPath)
	if err != nil {
		return err
	}
	x.onExit(func() { hf.Close() })
	x.r.start = time.Now()
	x.sum.StartedAt = x.r.start
	x.hw = history.NewWriter(hf, history.SinceStart(x.r.start))
	api, sock, stopAPI, err := x.r.startAPI(sockDir)
	if err != nil {
		return err
	}
	x.onExit(stopAPI)
	x.api, x.sock = api, sock
	return nil
}

// createLimit puts the workload's limit, makes the nemesis's client and
// takes the first cluster time reading.
func (x *execution) createLimit() error {
	cfg := x.r.cfg
	x.servers = x.cl.Servers()
	putLimit := x.r.putLimit
	if cfg.Workload == WorkloadLeased {
		putLimit = x.r.putLeasedLimit
	}
	if cfg.Workload == WorkloadMulti {
		putLimit = x.r.putMultiLimits
	}
	if cfg.Workload == WorkloadTemplated {
		putLimit = x.r.putTemplate
	}
	// The timeline check needs the real time elapsed between two stamps
	// from above: the start reading counts from before the put whose
	// stamp it reads (the status read that follows may be slow under
	// load), the end reading from after its status read.
	realBeforePut := int64(time.Since(x.r.start))
	li, err := putLimit(x.ctx, x.hw, x.servers)
	if err != nil {
		return fmt.Errorf("creating the limit: %w", err)
	}
	x.sum.Limit = li
	x.li = li
	admin, err := x.r.client(x.servers) // the nemesis's puts
	if err != nil {
		return err
	}
	x.admin = admin
	x.lag0, x.lagOK0 = x.r.clusterTime(x.ctx, x.ct, x.cl)
	x.lag0.real = realBeforePut
	return nil
}
