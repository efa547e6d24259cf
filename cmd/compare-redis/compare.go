package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/permitd/permitd/transport/client"
)

// compare.go: one comparison — for each concurrency level, rounds that
// alternate the Redis side and the permitd side on the same load
// generator, checking after each that no child process died.

// compareSides sets both sides up, runs the alternating measurements and
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

	redisBin, err := ensureRedisServer(ctx, cfg.RedisServer, cfg.Install, progress)
	if err != nil {
		return report{}, err
	}
	permitdBin := cfg.PermitdBin
	if permitdBin == "" {
		if permitdBin, err = buildPermitd(ctx, tmp, progress); err != nil {
			return report{}, err
		}
	}
	rs, err := startRedis(ctx, sup, redisSpec{bin: redisBin, dir: tmp, rate: cfg.Rate, per: cfg.Per, burst: cfg.Burst})
	if err != nil {
		return report{}, err
	}
	rep.Environment.RedisVersion = rs.version
	fmt.Fprintf(progress, "redis-server %s on %s (pid %d), GCRA script %s\n", rs.version, rs.addr, rs.proc.cmd.Process.Pid, rs.sha)
	pc, err := startCluster(ctx, sup, permitdBin, tmp)
	if err != nil {
		return report{}, err
	}
	if err := pc.createLimit(ctx, cfg.Rate, cfg.Per, cfg.Burst); err != nil {
		return report{}, err
	}
	targets := pc.httpAddrs
	if cfg.Target == targetLeader {
		targets = []string{pc.leader}
	}
	rep.Environment.PermitdTarget = fmt.Sprintf("%s: %s", cfg.Target, strings.Join(targets, ","))
	fmt.Fprintf(progress, "permitd cluster %s ready, leader %s; sending to %s\n", strings.Join(pc.httpAddrs, ","), pc.leader, rep.Environment.PermitdTarget)

	m := &measurer{cfg: cfg, rs: rs, pc: pc, targets: targets, sup: sup, progress: progress}
	for _, c := range cfg.Concurrency {
		samples, err := m.measureLevel(ctx, c)
		rep.Runs = append(rep.Runs, samples...)
		if err != nil {
			return report{}, err
		}
	}
	rep.Environment.LoadAvgEnd = loadAvg()
	rep.Results = compare(cfg.Concurrency, rep.Runs)
	return rep, nil
}

// measurer is what each concurrency level is measured with: the
// configuration, both sides, the permitd side's targets, the supervisor of
// their processes and where progress goes.
type measurer struct {
	cfg      config
	rs       *redisServer
	pc       *permitdCluster
	targets  []string
	sup      *supervisor
	progress io.Writer
}

// measureLevel runs the alternating rounds at one concurrency.
func (m *measurer) measureLevel(ctx context.Context, c int) ([]runSample, error) {
	cfg, rs, pc, targets, sup, progress := m.cfg, m.rs, m.pc, m.targets, m.sup, m.progress
	redisMeter := &cpuMeter{pids: []int{rs.proc.cmd.Process.Pid}}
	permitdMeter := &cpuMeter{}
	for _, a := range pc.agents {
		permitdMeter.pids = append(permitdMeter.pids, a.cmd.Process.Pid)
	}
	redisDecide, rdb := rs.decider(c)
	defer rdb.Close()
	permitdDecide, closeDecider, err := pc.protocolDecider(cfg.Protocol, targets)
	if err != nil {
		return nil, err
	}
	defer closeDecider()
	sides := []struct {
		name   string
		decide decideFunc
		meter  *cpuMeter
	}{{sideRedis, redisDecide, redisMeter}, {sidePermitd, permitdDecide, permitdMeter}}

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
	return pc.decider(targets), func() {}, nil
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
