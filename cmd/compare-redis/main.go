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
	"slices"
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
	defaultPeers     = sideRedis + "," + sideEtcd + "," + sideRaft
	defaultProtocols = protocolBinary + "," + protocolHTTP
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
	Peers       []string      `json:"peers"`
	Protocols   []string      `json:"protocols"`
	Rate        float64       `json:"rate"`
	Per         time.Duration `json:"-"`
	PerSec      float64       `json:"per_s"`
	Burst       int64         `json:"burst"`
	JSON        bool          `json:"-"`
	RedisServer string        `json:"-"`
	Install     bool          `json:"-"`
	Etcd        string        `json:"-"`
	InstallEtcd bool          `json:"-"`
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
	RedisVersion  string `json:"redis_version,omitempty"`
	EtcdVersion   string `json:"etcd_version,omitempty"`
	EtcdTarget    string `json:"etcd_targets,omitempty"`
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
	if len(os.Args) == 3 && os.Args[1] == serveCeilingArg {
		if err := serveCeiling(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
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
	var levels, peers, protocols string
	fs.StringVar(&levels, "concurrency", defaultLevels, "comma-separated concurrency levels (closed-loop workers; also the Redis pool size)")
	fs.IntVar(&cfg.Rounds, "rounds", 2, "runs of each side per concurrency, alternating the sides (redis, binary, etcd, http, raft)")
	fs.StringVar(&peers, "peers", defaultPeers, "comma-separated peers to compare with: redis (one redis-server, GCRA Lua script, persistence off), etcd (3 members, fsync on, GCRA by compare-and-swap), raft (bare hashicorp/raft, 3 nodes in this process, fsync on, permitd's raft settings, a no-op state machine: permitd's consensus floor), and nethttp (not a limiter and not in the default: a Go net/http server answering every reserve with a constant grant, the ceiling of any net/http API here)")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "measured duration of each run")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured warm-up before each run")
	fs.StringVar(&cfg.Target, "target", targetAll, "permitd nodes to send to: all (round-robin over the 3 nodes) or leader")
	fs.StringVar(&protocols, "protocol", defaultProtocols, "comma-separated permitd clients, each a side of its own: binary (the binary protocol, every worker's reserves sharing one pipelined connection per node, no request ID: what the Redis side does), client (the Go client with WithBinaryReserves(1): the same protocol plus a request ID per reserve, for exactly-once retries), or http (one keep-alive HTTP/1.1 connection per worker and node, no request ID)")
	fs.Float64Var(&cfg.Rate, "rate", defaultRate, "permits per --per of both limits (high, so that nothing is refused)")
	fs.DurationVar(&cfg.Per, "per", time.Second, "period of --rate")
	fs.Int64Var(&cfg.Burst, "burst", defaultBurst, "Redis GCRA burst and permitd strict max_reserved")
	fs.BoolVar(&cfg.JSON, "json", false, "print the result as JSON instead of a markdown table")
	fs.StringVar(&cfg.RedisServer, "redis-server", defaultRedisName, "redis-server binary")
	fs.BoolVar(&cfg.Install, "install-redis", true, "apt-get install redis-server when it is not on PATH")
	fs.StringVar(&cfg.Etcd, "etcd", defaultEtcdName, "etcd binary (Debian package etcd-server)")
	fs.BoolVar(&cfg.InstallEtcd, "install-etcd", true, "apt-get install etcd-server when etcd is not on PATH")
	fs.StringVar(&cfg.PermitdBin, "permitd-bin", "", "permitd binary to run (default: go build ./cmd/permitd into the temporary directory)")
	fs.BoolVar(&cfg.Verbose, "v", false, "print the Redis client's log to stderr")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: go run -C cmd/compare-redis . [flags]

Benchmarks permitd (3-node raft cluster, fsync on; binary protocol and
HTTP) against a single Redis (persistence off) running a GCRA Lua script
and a 3-member etcd (fsync on) running the same GCRA by compare-and-swap,
alternating the sides in the same run, and prints markdown tables (or
--json). It starts and stops redis-server, etcd and 3 permitd agents on
loopback by itself.

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
	}
	if cfg.Peers, err = parseList("--peers", peers, sideRedis, sideEtcd, sideRaft, sideNetHTTP); err != nil {
		return config{}, err
	}
	if cfg.Protocols, err = parseList("--protocol", protocols, protocolBinary, protocolClient, protocolHTTP); err != nil {
		return config{}, err
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

// parseList parses flag's comma-separated value: one or more distinct
// items, each one of allowed.
func parseList(flag, s string, allowed ...string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !slices.Contains(allowed, item) {
			return nil, fmt.Errorf("compare-redis: %s item %q: want one or more of %s, comma-separated", flag, item, strings.Join(allowed, ", "))
		}
		if slices.Contains(out, item) {
			return nil, fmt.Errorf("compare-redis: %s %q: %s is given twice", flag, s, item)
		}
		out = append(out, item)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("compare-redis: %s %q: want one or more of %s, comma-separated", flag, s, strings.Join(allowed, ", "))
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

// writeReport writes the markdown report: how it was measured, the
// summary table, then the detail table.
func writeReport(w io.Writer, rep report) error {
	cfg, env := rep.Config, rep.Environment
	levels := make([]string, len(cfg.Concurrency))
	for i, c := range cfg.Concurrency {
		levels[i] = strconv.Itoa(c)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Closed loop, one decision per request, concurrency %s; %d round(s) of %v (after %v warm-up) per side per concurrency, alternating %s.\n\n",
		strings.Join(levels, ", "), cfg.Rounds, cfg.Duration, cfg.Warmup, strings.Join(sideOrder(cfg), ", "))
	if slices.Contains(cfg.Peers, sideRedis) {
		fmt.Fprintf(&b, "- redis: redis-server %s, one node, no replica, persistence off; GCRA Lua script by EVALSHA (go-redis, pool = concurrency); rate %g per %v, burst %d. Not durable.\n",
			env.RedisVersion, cfg.Rate, cfg.Per, cfg.Burst)
	}
	if slices.Contains(cfg.Peers, sideEtcd) {
		fmt.Fprintf(&b, "- etcd: etcd %s, 3 members, fsync on; the same GCRA by compare-and-swap (read the TAT, compute on the load generator's clock, a transaction storing it if its ModRevision is unchanged, else retry on the value the transaction returns), one client shared by all workers; rate %g per %v, burst %d; sent to %s. Linearizable, durable, survives one member's failure.\n",
			env.EtcdVersion, cfg.Rate, cfg.Per, cfg.Burst, env.EtcdTarget)
	}
	if slices.Contains(cfg.Peers, sideRaft) {
		fmt.Fprintf(&b, "- raft: bare hashicorp/raft, 3 nodes in the load generator's process (raft-boltdb/v2, fsync on, TCP on loopback, permitd's raft settings), a no-op state machine; one Apply of a %d-byte entry on the leader per decision, until its future returns. Durable, survives one node's failure; decides nothing: permitd's consensus floor.\n",
			raftPayloadBytes)
	}
	if slices.Contains(cfg.Peers, sideNetHTTP) {
		b.WriteString("- nethttp: the ceiling of a Go net/http server here: a child process whose handler reads the body and answers every reserve with a constant grant, deciding nothing, sent exactly what the http side sends. Not a rate limiter.\n")
	}
	for _, p := range cfg.Protocols {
		fmt.Fprintf(&b, "- %s: permitd, 3 agents (raft, fsync on), reserves over %s; strict limit rate %g per %v, max_reserved %d, expiry %v; sent to %s. Linearizable, durable, survives one node's failure.\n",
			p, protocolDesc(p), cfg.Rate, cfg.Per, cfg.Burst, permitdExpiry, env.PermitdTarget)
	}
	fmt.Fprintf(&b, "- machine: %s/%s, %d CPUs, %s; load average %s at start, %s at end. The load generator and every server share these CPUs, all on loopback.\n\n",
		env.GOOS, env.GOARCH, env.CPUs, env.GoVersion, env.LoadAvgStart, env.LoadAvgEnd)
	b.WriteString("Decisions per second over all rounds; permitd / peer as the range of the rounds' ratios (each round's runs side by side):\n\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := writeTable(w, rep.Results); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\nEach side: latency, errors/refusals (both should be 0), and CPU used in the measured windows, in cores (CPU seconds per second) and CPU time per decision:\n\n"); err != nil {
		return err
	}
	if err := writeDetailTable(w, rep.Results); err != nil {
		return err
	}
	var notes []string
	for _, c := range rep.Results {
		for _, s := range c.Sides {
			if s.FirstError != "" {
				notes = append(notes, fmt.Sprintf("- concurrency %d %s: %d errors, first: %s", c.Concurrency, s.Side, s.Errors, s.FirstError))
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

// sideOrder is the order the sides run in within a round: peers and
// permitd protocols interleaved (redis, binary, etcd, http by default).
func sideOrder(cfg config) []string {
	var out []string
	for i := range max(len(cfg.Peers), len(cfg.Protocols)) {
		if i < len(cfg.Peers) {
			out = append(out, cfg.Peers[i])
		}
		if i < len(cfg.Protocols) {
			out = append(out, cfg.Protocols[i])
		}
	}
	return out
}
