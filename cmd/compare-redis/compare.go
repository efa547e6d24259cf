package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/permitd/permitd/transport/client"
)

// compare.go: one comparison — for each concurrency level, rounds that
// alternate the peers (Redis, etcd) and permitd's protocols on the same
// load generator, checking after each run that no child process died.

// compareSides sets every side up, runs the alternating measurements and
// tears everything down (on every path) before returning.
func compareSides(ctx context.Context, cfg config, progress io.Writer) (rep report, err error) {
	if !cfg.Verbose {
		redis.SetLogger(quietLogger{})
	}
	sup := &supervisor{}
	defer func() {
		if serr := sup.stopAll(); serr != nil {
			fmt.Fprintln(progress, serr)
		}
	}()
	tmp, err := os.MkdirTemp("", "compare-redis-")
	if err != nil {
		return report{}, fmt.Errorf("compare-redis: %w", err)
	}
	sup.removeOnStop(tmp)

	rep.Config = cfg
	rep.Environment = environment{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvgStart: loadAvg()}
	m := &measurer{cfg: cfg, sup: sup, progress: progress}

	if slices.Contains(cfg.Peers, sideRedis) {
		redisBin, err := ensureTool(ctx, cfg.RedisServer, defaultRedisName, "redis-server", cfg.Install, progress)
		if err != nil {
			return report{}, err
		}
		if m.rs, err = startRedis(ctx, sup, redisSpec{bin: redisBin, dir: tmp, rate: cfg.Rate, per: cfg.Per, burst: cfg.Burst}); err != nil {
			return report{}, err
		}
		rep.Environment.RedisVersion = m.rs.version
		fmt.Fprintf(progress, "redis-server %s on %s (pid %d), GCRA script %s\n", m.rs.version, m.rs.addr, m.rs.proc.cmd.Process.Pid, m.rs.sha)
	}
	if slices.Contains(cfg.Peers, sideEtcd) {
		etcdBin, err := ensureTool(ctx, cfg.Etcd, defaultEtcdName, "etcd-server", cfg.InstallEtcd, progress)
		if err != nil {
			return report{}, err
		}
		if m.ec, err = startEtcd(ctx, sup, etcdBin, tmp, cfg.Rate, cfg.Per, cfg.Burst); err != nil {
			return report{}, err
		}
		m.etcdTargets = m.ec.endpoints
		if cfg.Target == targetLeader {
			m.etcdTargets = []string{m.ec.leader}
		}
		rep.Environment.EtcdVersion = m.ec.version
		rep.Environment.EtcdTarget = fmt.Sprintf("%s: %s", cfg.Target, strings.Join(m.etcdTargets, ","))
		fmt.Fprintf(progress, "etcd %s cluster %s ready, leader %s\n", m.ec.version, strings.Join(m.ec.endpoints, ","), m.ec.leader)
	}
	if slices.Contains(cfg.Peers, sideRaft) {
		if m.rc, err = startRaft(ctx, tmp); err != nil {
			return report{}, err
		}
		defer func() {
			if serr := m.rc.stop(); serr != nil {
				fmt.Fprintln(progress, "compare-redis: stopping raft:", serr)
			}
		}()
		fmt.Fprintf(progress, "raft cluster of %d nodes ready in this process\n", raftMembers)
	}
	if slices.Contains(cfg.Peers, sideNetHTTP) {
		if m.ns, err = startCeiling(ctx, sup, tmp); err != nil {
			return report{}, err
		}
		fmt.Fprintf(progress, "net/http ceiling server on %s (pid %d)\n", m.ns.addr, m.ns.proc.cmd.Process.Pid)
	}
	permitdBin := cfg.PermitdBin
	if permitdBin == "" {
		if permitdBin, err = buildPermitd(ctx, tmp, progress); err != nil {
			return report{}, err
		}
	}
	if m.pc, err = startCluster(ctx, sup, permitdBin, tmp); err != nil {
		return report{}, err
	}
	if err := m.pc.createLimit(ctx, cfg.Rate, cfg.Per, cfg.Burst); err != nil {
		return report{}, err
	}
	m.targets = m.pc.httpAddrs
	if cfg.Target == targetLeader {
		m.targets = []string{m.pc.leader}
	}
	rep.Environment.PermitdTarget = fmt.Sprintf("%s: %s", cfg.Target, strings.Join(m.targets, ","))
	fmt.Fprintf(progress, "permitd cluster %s ready, leader %s; sending to %s\n", strings.Join(m.pc.httpAddrs, ","), m.pc.leader, rep.Environment.PermitdTarget)

	for _, c := range cfg.Concurrency {
		samples, err := m.measureLevel(ctx, c)
		rep.Runs = append(rep.Runs, samples...)
		if err != nil {
			return report{}, err
		}
	}
	rep.Environment.LoadAvgEnd = loadAvg()
	rep.Results = compare(cfg.Concurrency, slices.Concat(cfg.Peers, cfg.Protocols), rep.Runs)
	return rep, nil
}

// measurer is what each concurrency level is measured with: the
// configuration, every side (a nil peer was not asked for), the targets
// of permitd and etcd, the supervisor of their processes and where
// progress goes.
type measurer struct {
	cfg         config
	rs          *redisServer
	ec          *etcdCluster
	rc          *raftCluster
	ns          *ceilingServer
	pc          *permitdCluster
	targets     []string
	etcdTargets []string
	sup         *supervisor
	progress    io.Writer
}

// measuredSide is one side of a concurrency level: how it decides, whose
// CPU it uses, and what closes its connections.
type measuredSide struct {
	name   string
	decide decideFunc
	meter  *cpuMeter
	close  func()
}

// levelSides opens every side's connections for concurrency c, in
// sideOrder; on an error it closes those already open.
func (m *measurer) levelSides(c int) ([]measuredSide, error) {
	var sides []measuredSide
	fail := func(err error) ([]measuredSide, error) {
		for _, s := range sides {
			s.close()
		}
		return nil, err
	}
	for _, name := range sideOrder(m.cfg) {
		switch name {
		case sideRedis:
			decide, rdb := m.rs.decider(c)
			sides = append(sides, measuredSide{name, decide, &cpuMeter{pids: []int{m.rs.proc.cmd.Process.Pid}}, func() { rdb.Close() }})
		case sideEtcd:
			decide, cli, err := m.ec.decider(m.etcdTargets)
			if err != nil {
				return fail(err)
			}
			meter := &cpuMeter{}
			for _, e := range m.ec.members {
				meter.pids = append(meter.pids, e.cmd.Process.Pid)
			}
			sides = append(sides, measuredSide{name, decide, meter, func() { cli.Close() }})
		case sideRaft:
			// It runs in this process: no CPU apart from the load
			// generator's to measure.
			sides = append(sides, measuredSide{name, m.rc.decider(), nil, func() {}})
		case sideNetHTTP:
			sides = append(sides, measuredSide{name, httpDecider([]string{m.ns.addr}), &cpuMeter{pids: []int{m.ns.proc.cmd.Process.Pid}}, func() {}})
		default:
			decide, closeDecider, err := m.pc.protocolDecider(name, m.targets)
			if err != nil {
				return fail(err)
			}
			meter := &cpuMeter{}
			for _, a := range m.pc.agents {
				meter.pids = append(meter.pids, a.cmd.Process.Pid)
			}
			sides = append(sides, measuredSide{name, decide, meter, closeDecider})
		}
	}
	return sides, nil
}

// measureLevel runs the alternating rounds at one concurrency.
func (m *measurer) measureLevel(ctx context.Context, c int) ([]runSample, error) {
	cfg, sup, progress := m.cfg, m.sup, m.progress
	sides, err := m.levelSides(c)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range sides {
			s.close()
		}
	}()
	var out []runSample
	for round := 1; round <= cfg.Rounds; round++ {
		for _, side := range sides {
			if err := checkChildren(sup); err != nil {
				return out, err
			}
			s, err := runClosedLoop(ctx, closedLoop{concurrency: c, warmup: cfg.Warmup, duration: cfg.Duration}, side.decide, side.meter)
			if err != nil {
				return out, err
			}
			s.Side, s.Round = side.name, round
			out = append(out, s)
			sum := summarize([]runSample{s})
			fmt.Fprintf(progress, "concurrency %d round %d %-7s %8.0f decisions/s  p50 %s ms  p99 %s ms  errors %d  refused %d  server cores %s  client cores %s  load %s\n",
				c, round, side.name, sum.ThroughputDPS, fmtMs(sum.P50Ms), fmtMs(sum.P99Ms), s.Errors, s.Refused,
				fmtCPU(sum.ServerCores, sum.ServerCPUUsPerDec), fmtCPU(sum.ClientCores, sum.ClientCPUUsPerDec), loadAvg())
			if s.FirstError != "" {
				fmt.Fprintf(progress, "  first error: %s\n", s.FirstError)
			}
		}
	}
	return out, nil
}

// protocolDecider returns the decideFunc of the permitd side for protocol
// (protocolBinary, protocolClient or protocolHTTP) sending to targets,
// and what closes its connections.
func (pc *permitdCluster) protocolDecider(protocol string, targets []string) (decideFunc, func(), error) {
	switch protocol {
	case protocolClient:
		bc, err := client.New(targets, client.WithBinaryReserves(1))
		if err != nil {
			return nil, nil, err
		}
		return clientDecider(bc), func() { bc.Close() }, nil
	case protocolBinary:
		conns, err := dialBinary(targets)
		if err != nil {
			return nil, nil, err
		}
		return binaryDecider(conns), func() {
			for _, c := range conns {
				c.Close()
			}
		}, nil
	}
	return httpDecider(targets), func() {}, nil
}

// checkChildren fails when a child process has exited mid-comparison.
func checkChildren(sup *supervisor) error {
	sup.mu.Lock()
	defer sup.mu.Unlock()
	for _, c := range sup.children {
		if !c.running() {
			return fmt.Errorf("compare-redis: %s (pid %d) exited during the comparison: %v\n%s", c.name, c.cmd.Process.Pid, c.waitErr, c.logTail(2000))
		}
	}
	return nil
}
