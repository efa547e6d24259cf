package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Flag bounds: every run is bounded in count and in time.
const (
	maxConcurrency   = 4096
	maxLevels        = 16
	maxRounds        = 100
	maxRunDuration   = 10 * time.Minute
	maxWarmup        = time.Minute
	minRunDuration   = 100 * time.Millisecond
	targetAll        = "all"
	targetLeader     = "leader"
	protocolBinary   = "binary"
	protocolClient   = "client"
	protocolHTTP     = "http"
	defaultLevels    = "1,16,128,512"
	defaultRate      = 1e9
	defaultBurst     = 1000000
	defaultRedisName = "redis-server"
)

// config is the command line.
type config struct {
	Concurrency []int         `json:"concurrency"`
	Rounds      int           `json:"rounds"`
	Duration    time.Duration `json:"-"`
	Warmup      time.Duration `json:"-"`
	DurationSec float64       `json:"duration_s"`
	WarmupSec   float64       `json:"warmup_s"`
	Target      string        `json:"target"`
	Protocol    string        `json:"protocol"`
	Rate        float64       `json:"rate"`
	Per         time.Duration `json:"-"`
	PerSec      float64       `json:"per_s"`
	Burst       int64         `json:"burst"`
	JSON        bool          `json:"-"`
	RedisServer string        `json:"-"`
	Install     bool          `json:"-"`
	PermitdBin  string        `json:"-"`
	Verbose     bool          `json:"-"`
}

// environment is what the numbers depend on besides the two sides.
type environment struct {
	GOOS          string `json:"goos"`
	GOARCH        string `json:"goarch"`
	CPUs          int    `json:"cpus"`
	GoVersion     string `json:"go_version"`
	LoadAvgStart  string `json:"loadavg_start"`
	LoadAvgEnd    string `json:"loadavg_end"`
	RedisVersion  string `json:"redis_version"`
	PermitdTarget string `json:"permitd_targets"`
}

// report is the --json output.
type report struct {
	Config      config       `json:"config"`
	Environment environment  `json:"environment"`
	Results     []comparison `json:"results"`
	Runs        []runSample  `json:"runs"`
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain parses args, runs the comparison and returns the exit code: 0,
// 1 when the comparison failed, 2 for bad flags.
func runMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal now has its default effect: exit at once
	}()
	rep, err := compareSides(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "compare-redis:", err)
			return 1
		}
		return 0
	}
	if err := writeReport(stdout, rep); err != nil {
		fmt.Fprintln(stderr, "compare-redis:", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("compare-redis", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var levels string
	fs.StringVar(&levels, "concurrency", defaultLevels, "comma-separated concurrency levels (closed-loop workers; also the Redis pool size)")
	fs.IntVar(&cfg.Rounds, "rounds", 2, "runs of each side per concurrency, alternating redis, permitd")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "measured duration of each run")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured warm-up before each run")
	fs.StringVar(&cfg.Target, "target", targetAll, "permitd nodes to send to: all (round-robin over the 3 nodes) or leader")
	fs.StringVar(&cfg.Protocol, "protocol", protocolBinary, "permitd's client: binary (the binary protocol, every worker's reserves sharing one pipelined connection per node, no request ID: what the Redis side does), client (the Go client with WithBinaryReserves(1): the same protocol plus a request ID per reserve, for exactly-once retries), or http (one keep-alive HTTP/1.1 connection per worker and node, no request ID)")
	fs.Float64Var(&cfg.Rate, "rate", defaultRate, "permits per --per of both limits (high, so that nothing is refused)")
	fs.DurationVar(&cfg.Per, "per", time.Second, "period of --rate")
	fs.Int64Var(&cfg.Burst, "burst", defaultBurst, "Redis GCRA burst and permitd strict max_reserved")
	fs.BoolVar(&cfg.JSON, "json", false, "print the result as JSON instead of a markdown table")
	fs.StringVar(&cfg.RedisServer, "redis-server", defaultRedisName, "redis-server binary")
	fs.BoolVar(&cfg.Install, "install-redis", true, "apt-get install redis-server when it is not on PATH")
	fs.StringVar(&cfg.PermitdBin, "permitd-bin", "", "permitd binary to run (default: go build ./cmd/permitd into the temporary directory)")
	fs.BoolVar(&cfg.Verbose, "v", false, "print the Redis client's log to stderr")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: go run -C cmd/compare-redis . [flags]

Benchmarks permitd (3-node raft cluster, fsync on, HTTP) against a single
Redis (persistence off) running a GCRA Lua script, alternating the two in the
same run, and prints a markdown table (or --json). It starts and stops
redis-server and 3 permitd agents on loopback by itself.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("compare-redis: unexpected arguments %q: everything is a flag", fs.Args())
	}
	var err error
	if cfg.Concurrency, err = parseLevels(levels); err != nil {
		return config{}, err
	}
	switch {
	case cfg.Rounds < 1 || cfg.Rounds > maxRounds:
		return config{}, fmt.Errorf("compare-redis: --rounds %d: want 1..%d", cfg.Rounds, maxRounds)
	case cfg.Duration < minRunDuration || cfg.Duration > maxRunDuration:
		return config{}, fmt.Errorf("compare-redis: --duration %v: want %v..%v", cfg.Duration, minRunDuration, maxRunDuration)
	case cfg.Warmup < 0 || cfg.Warmup > maxWarmup:
		return config{}, fmt.Errorf("compare-redis: --warmup %v: want 0..%v", cfg.Warmup, maxWarmup)
	case cfg.Target != targetAll && cfg.Target != targetLeader:
		return config{}, fmt.Errorf("compare-redis: --target %q: want %s or %s", cfg.Target, targetAll, targetLeader)
	case cfg.Protocol != protocolBinary && cfg.Protocol != protocolClient && cfg.Protocol != protocolHTTP:
		return config{}, fmt.Errorf("compare-redis: --protocol %q: want %s, %s or %s", cfg.Protocol, protocolBinary, protocolClient, protocolHTTP)
	}
	if _, err := newGCRAParams(cfg.Rate, cfg.Per, cfg.Burst, 0); err != nil {
		return config{}, err
	}
	cfg.DurationSec, cfg.WarmupSec, cfg.PerSec = cfg.Duration.Seconds(), cfg.Warmup.Seconds(), cfg.Per.Seconds()
	return cfg, nil
}

// parseLevels parses a comma-separated list of concurrency levels.
func parseLevels(s string) ([]int, error) {
	var out []int
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		n, err := strconv.Atoi(item)
		if err != nil || n < 1 || n > maxConcurrency {
			return nil, fmt.Errorf("compare-redis: --concurrency item %q: want an integer 1..%d", item, maxConcurrency)
		}
		out = append(out, n)
	}
	if len(out) == 0 || len(out) > maxLevels {
		return nil, fmt.Errorf("compare-redis: --concurrency %q: want 1..%d comma-separated levels", s, maxLevels)
	}
	return out, nil
}

// loadAvg is /proc/loadavg's three load averages, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// quietLogger drops the Redis client's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// writeReport writes the markdown report: how it was measured, then the
// table.
func writeReport(w io.Writer, rep report) error {
	cfg, env := rep.Config, rep.Environment
	levels := make([]string, len(cfg.Concurrency))
	for i, c := range cfg.Concurrency {
		levels[i] = strconv.Itoa(c)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Closed loop, one decision per request, concurrency %s; %d round(s) of %v (after %v warm-up) per side per concurrency, alternating redis, permitd.\n\n",
		strings.Join(levels, ", "), cfg.Rounds, cfg.Duration, cfg.Warmup)
	fmt.Fprintf(&b, "- redis: redis-server %s, one node, no replica, persistence off; GCRA Lua script by EVALSHA (go-redis, pool = concurrency); rate %g per %v, burst %d. Not durable.\n",
		env.RedisVersion, cfg.Rate, cfg.Per, cfg.Burst)
	fmt.Fprintf(&b, "- permitd: 3 agents (raft, fsync on), reserves over %s; strict limit rate %g per %v, max_reserved %d, expiry %v; sent to %s. Linearizable, durable, survives one node's failure.\n",
		protocolDesc(cfg.Protocol), cfg.Rate, cfg.Per, cfg.Burst, permitdExpiry, env.PermitdTarget)
	fmt.Fprintf(&b, "- machine: %s/%s, %d CPUs, %s; load average %s at start, %s at end. Load generator, redis-server and the 3 agents share these CPUs, all on loopback.\n\n",
		env.GOOS, env.GOARCH, env.CPUs, env.GoVersion, env.LoadAvgStart, env.LoadAvgEnd)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := writeTable(w, rep.Results); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\nCPU used in the measured windows, in cores (CPU seconds per second) and CPU time per decision:\n\n"); err != nil {
		return err
	}
	if err := writeCPUTable(w, rep.Results); err != nil {
		return err
	}
	var notes []string
	for _, c := range rep.Results {
		for _, s := range []struct {
			name string
			sum  sideSummary
		}{{sideRedis, c.Redis}, {sidePermitd, c.Permitd}} {
			if s.sum.FirstError != "" {
				notes = append(notes, fmt.Sprintf("- concurrency %d %s: %d errors, first: %s", c.Concurrency, s.name, s.sum.Errors, s.sum.FirstError))
			}
		}
	}
	if len(notes) > 0 {
		if _, err := io.WriteString(w, "\n"+strings.Join(notes, "\n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}
