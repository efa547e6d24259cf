package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Bounds of the Redis side's setup steps.
const (
	aptTimeout        = 10 * time.Minute
	redisReadyTimeout = 15 * time.Second
	redisKey          = "compare-redis:gcra"
)

// ensureTool returns the path of bin, installing the Debian package pkg
// first when bin is that package's default name defaultName, is not on
// PATH and install is true. Output of apt-get goes to progress.
func ensureTool(ctx context.Context, bin, defaultName, pkg string, install bool, progress io.Writer) (string, error) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	if !install || bin != defaultName {
		return "", fmt.Errorf("compare-redis: %s not found (install it, e.g. apt-get install %s, or pass --%s PATH)", bin, pkg, defaultName)
	}
	fmt.Fprintf(progress, "%s is not on PATH: installing the Debian package (apt-get update && apt-get install -y %s)\n", bin, pkg)
	ctx, cancel := context.WithTimeout(ctx, aptTimeout)
	defer cancel()
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", pkg}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout = progress
		cmd.Stderr = progress
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("compare-redis: apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("compare-redis: installed %s but %s is still not on PATH: %w", pkg, bin, err)
	}
	return p, nil
}

// redisServer is a running redis-server and the loaded GCRA script.
type redisServer struct {
	proc    *child
	addr    string
	version string
	sha     string
	params  gcraParams
}

// redisSpec is what startRedis starts: the redis-server binary, the
// directory it runs in, and the limit its GCRA script enforces.
type redisSpec struct {
	bin, dir string
	rate     float64
	per      time.Duration
	burst    int64
}

// startRedis starts redis-server on a free loopback port with persistence
// off, waits until it answers PING, and loads the GCRA script.
func startRedis(ctx context.Context, sup *supervisor, spec redisSpec) (*redisServer, error) {
	bin, dir := spec.bin, spec.dir
	ports, err := freeLoopbackPorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	proc, err := sup.start("redis-server", filepath.Join(dir, "redis.log"), bin,
		"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", dir, "--maxclients", "10000")
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(redisOptions(addr, 1))
	defer rdb.Close()
	deadline := time.Now().Add(redisReadyTimeout)
	for {
		if !proc.running() {
			return nil, fmt.Errorf("compare-redis: redis-server exited at start: %v\n%s", proc.waitErr, proc.logTail(2000))
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("compare-redis: redis-server on %s not answering PING after %v: %w\n%s", addr, redisReadyTimeout, err, proc.logTail(2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	rs := &redisServer{proc: proc, addr: addr}
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				rs.version = v
			}
		}
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("compare-redis: redis TIME: %w", err)
	}
	if rs.params, err = newGCRAParams(spec.rate, spec.per, spec.burst, now.Unix()); err != nil {
		return nil, err
	}
	if rs.sha, err = rdb.ScriptLoad(ctx, gcraScript).Result(); err != nil {
		return nil, fmt.Errorf("compare-redis: SCRIPT LOAD: %w", err)
	}
	// One decision to check the script end to end before measuring.
	granted, err := rs.decide(ctx, rdb)
	if err != nil {
		return nil, fmt.Errorf("compare-redis: first GCRA decision: %w", err)
	}
	if !granted {
		return nil, errors.New("compare-redis: first GCRA decision was refused on an idle key; the script or its arguments are wrong")
	}
	return rs, nil
}

// redisOptions are the client options: RESP2, no identity or maintenance
// handshakes (plain EVALSHA round trips), exactly poolSize connections.
func redisOptions(addr string, poolSize int) *redis.Options {
	return &redis.Options{
		Addr:                     addr,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		PoolSize:                 poolSize,
		MaxActiveConns:           poolSize,
		DialTimeout:              2 * time.Second,
		ReadTimeout:              3 * time.Second,
		WriteTimeout:             3 * time.Second,
		ContextTimeoutEnabled:    true,
	}
}

// decide makes one GCRA decision with one EVALSHA.
func (rs *redisServer) decide(ctx context.Context, rdb *redis.Client) (bool, error) {
	p := rs.params
	res, err := rdb.EvalSha(ctx, rs.sha, []string{redisKey}, p.emissionNanos, p.burst, 1, p.epochSeconds).Slice()
	if err != nil {
		return false, err
	}
	if len(res) != 4 {
		return false, fmt.Errorf("GCRA script returned %d values, want 4", len(res))
	}
	allowed, ok := res[0].(int64)
	if !ok {
		return false, fmt.Errorf("GCRA script returned allowed=%v (%T), want an integer", res[0], res[0])
	}
	return allowed > 0, nil
}

// decider returns a decideFunc over a client whose pool has concurrency
// connections, and the client to close after the run.
func (rs *redisServer) decider(concurrency int) (decideFunc, *redis.Client) {
	rdb := redis.NewClient(redisOptions(rs.addr, concurrency))
	return func(ctx context.Context, _, _ int) (bool, error) {
		return rs.decide(ctx, rdb)
	}, rdb
}
