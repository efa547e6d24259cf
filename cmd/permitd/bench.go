package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"time"

	"github.com/permitd/permitd/cmd/internal/bench"
)

// bench.go: the permitd bench command: its flags, and the exit status it
// derives from the report. The runs are package bench's
// (cmd/internal/bench).

func init() {
	register("bench", "load-generate reserves against a cluster and report throughput and latency", runBench)
}

// benchCommand is bench's command line: the run's settings, and the flags
// only the command reads (the run gets --servers as a list, and the TLS
// configuration and token the TLS flags select).
type benchCommand struct {
	bench.Config
	serverList string
	jsonOut    bool
	tls        clientTLSFlags
}

// benchDescription is bench's --help text after its usage line.
const benchDescription = `
Sends reserves (one decision per request: an HTTP request on keep-alive
connections, or a frame of the binary protocol with --protocol binary) to the
given nodes and reports throughput, latency percentiles, granted, refused and
errors. Latency in open-loop mode counts from each request's scheduled start,
so a slow server cannot hide queueing (no coordinated omission). Over the
binary protocol the open loop sends what has come due once a millisecond, in
one write per connection, so that the generator takes little of the CPU it
may share with the nodes.

The requests counted are those sent after --warmup and before the end of
--duration, each once when its answer comes (bench waits for those in
flight at the end): requests = granted + refused + shed + errors.

A reserve a node refuses at once as overloaded (503, see
--max-pending-reserves) is counted as shed, not as an error, and left out of
the latency percentiles, which are those of the admitted reserves (granted
or refused); the nodes' leader and term are read before and after the run,
so that a leadership change under load shows.

With --mode inflight it measures an in-flight cap's occupancy under
contention: --concurrency callers each reserve --permits of a cap of
--max-in-flight permits (--ttl) with --max-wait, hold a grant for --hold,
release it and ask again at once; it reports the share of the cap's
permit-seconds the callers held (occupancy), the reserves granted and
refused, and the time to a usable grant.

With --mode overload it runs the performance manual's overload measurement (cmd/internal/bench/README.md) on one
cluster: an uncounted closed-loop warm-up pass, --capacity-passes closed-loop
passes, an open loop at --overload-factor x their median for --duration, the
passes again, and reports the open loop's goodput over the median of all
passes, whether the leader held, this machine's CPU steal and bench's own
CPU in each phase, and the mean reserves per entry and commit time of each
phase from the --servers' /v1/status (so the leader must be among them).
Every pass and the open loop start with --warmup. With --control a closed
loop like the passes runs for --duration in place of the open loop: its ratio
to the capacity is the method's own noise on the machine, to compare with
overloaded runs alternated with it on fresh clusters.

Exit status: 0 ok; 1 no request measured, more than 1% errors, the limit
could not be created, or (overload) a pass that decided nothing or had more
than 1% errors; 2 usage error.
`

func runBench(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("bench", "bench [flags]", benchDescription, stdout, stderr)
	var b benchCommand
	b.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	if code, ok := b.checkInflightFlags(c); !ok {
		return code
	}
	if b.Limits > 0 && b.Protocol == "binary" {
		return c.usageError("--limits (multi-limit reserves) needs --protocol http: the binary protocol carries single-limit reserves only")
	}
	if code, ok := b.checkOverloadFlags(c); !ok {
		return code
	}
	if code, ok := b.checkKeysFlags(c); !ok {
		return code
	}
	conf, err := b.tls.config()
	if err != nil {
		return c.usageError(err.Error())
	}
	b.Servers, b.TLS, b.Token = splitList(b.serverList), conf, b.tls.secret()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch b.Mode {
	case "overload":
		res, err := bench.Overload(ctx, b.Config)
		if err != nil {
			return c.fail(exitFailure, err)
		}
		return reportBench(c, b.jsonOut, res, bench.PrintOverload, res.Open)
	case "inflight":
		res, err := bench.Inflight(ctx, b.Config)
		if err != nil {
			return c.fail(exitFailure, err)
		}
		run := bench.Result{Requests: res.Reserves, Errors: res.Errors + res.HoldErrors}
		return reportBench(c, b.jsonOut, res, bench.PrintInflight, run)
	}
	res, err := bench.Run(ctx, b.Config)
	if err != nil {
		return c.fail(exitFailure, err)
	}
	return reportBench(c, b.jsonOut, res, bench.PrintResult, res)
}

// define defines bench's flags on c.
func (b *benchCommand) define(c *cmdLine) {
	c.List(&b.serverList, "servers", "HTTPADDR,...", "127.0.0.1:8001", "HTTP addresses of the nodes to send to (round-robin per worker)").Check(checkHostPort)
	c.fromEnv("servers")
	c.String(&b.Limit, "limit", "NAME", "bench", "limit to reserve from").Check(func(s string) error { return checkName("limit name", s) })
	c.Bool(&b.Create, "create", true, "create (or replace) the limit before the run")
	c.Choice(&b.Algorithm, "algorithm", "strict", "algorithm of the created limit", algorithms...)
	c.Float(&b.Rate, "rate", "R", 1e9, "rate of the created limit (permits per --per); high by default so that the register, not the limit, is measured").Check(positive, "a number > 0")
	c.Duration(&b.Per, "per", time.Second, durPositive, "period of the created limit's rate")
	c.Choice(&b.Mode, "mode", "closed", "closed: each worker sends its next request when the last returns; open: requests start at --open-rate/s whatever the latency; overload: a closed-loop warm-up pass, closed-loop capacity passes (--capacity-*), an open loop at --overload-factor x their median for --duration, the passes again, and the open loop's goodput over the median of all passes; inflight: callers contending for an in-flight cap, reporting its occupancy", "closed", "open", "overload", "inflight")
	c.Int(&b.Concurrency, "concurrency", "N", 16, fmt.Sprintf("closed loop: workers; open loop: most requests outstanding; overload: the open loop's most outstanding (default %d there, more than --capacity-concurrency)", bench.DefaultOverloadConcurrency)).Range(1, 1<<20, "an integer from 1 to 1048576")
	c.Float(&b.OpenRate, "open-rate", "R", 1000, "open loop: requests per second").Check(positive, "a number > 0")
	c.Float(&b.OverloadFactor, "overload-factor", "F", bench.DefaultOverloadFactor, "overload: the open loop's rate in multiples of the median of the capacity passes before it").Check(func(f float64) bool { return f > 0 && f <= bench.MaxOverloadFactor }, fmt.Sprintf("a number > 0 and at most %d", bench.MaxOverloadFactor))
	c.Int(&b.CapacityPasses, "capacity-passes", "N", bench.DefaultCapacityPasses, "overload: closed-loop passes before and after the open loop (after one uncounted warm-up pass); the capacity is the median of all of them").Range(1, 100, "an integer from 1 to 100")
	c.Duration(&b.CapacityDuration, "capacity-duration", bench.DefaultCapacityDuration, durPositive, "overload: measured duration of each closed-loop pass (each after --warmup)")
	c.Int(&b.CapacityConcurrency, "capacity-concurrency", "N", bench.DefaultCapacityConcurrency, "overload: closed-loop workers of the capacity passes; give the nodes' bound, --max-pending-reserves or 5 x --max-batch when that is 0 (5120 at the defaults): more are shed, fewer may not fill the pipeline").Range(1, 1<<20, "an integer from 1 to 1048576")
	c.Bool(&b.Control, "control", false, "overload: run a closed loop like the capacity passes for --duration in place of the open loop, so that the ratio reads the method's own noise on this machine (nothing is overloaded)")
	c.Duration(&b.Duration, "duration", 10*time.Second, durPositive, "measured duration (overload: of the open loop)")
	c.Duration(&b.Warmup, "warmup", time.Second, durNonNegative, "unmeasured warm-up before the measured duration (overload: before every pass and the open loop)")
	c.Duration(&b.MaxWait, "max-wait", time.Second, durNonNegative, "max_wait of each reserve")
	c.Int64(&b.Permits, "permits", "N", 1, "permits per reserve").Range(1, 1<<62, "an integer >= 1")
	c.Bool(&b.RequestIDs, "request-ids", false, "send a unique request_id with every reserve (exercises deduplication)")
	c.Int64(&b.MaxRequests, "max-requests", "N", 0, "send at most this many measured requests, then stop once they are answered (0: no cap)").Range(0, math.MaxInt64, "an integer >= 0")
	c.Bool(&b.jsonOut, "json", false, "print the result as JSON")
	c.Choice(&b.Protocol, "protocol", "http", "http: one decision per HTTP/1.1 request, one keep-alive connection per worker and server; binary: one decision per frame of the binary protocol, every worker sharing --binary-conns pipelined connections per server", "http", "binary")
	c.Int(&b.BinaryConns, "binary-conns", "N", 1, "binary protocol: pipelined connections per server").Range(1, 64, "an integer from 1 to 64")
	c.Int(&b.Limits, "limits", "N", 0, "0: reserve on --limit (POST /v1/limits/{name}/reserve); N >= 1: multi-limit reserves of --permits on each of N limits (--limit, --limit-2, ...; POST /v1/reserve), which leave reservations").Range(0, 8, "an integer from 0 to 8")
	c.Int(&b.Keys, "keys", "N", 0, "0: reserve on --limit; N >= 1: on templated keys, each reserve naming LIMIT:k<i> with i at random below N (1: the one hot key LIMIT:k0), and --create puts the template of prefix --limit (--key-idle, at most N keys) instead of a limit").Range(0, 1<<21, "an integer from 0 to 2097152 (a template's most keys)")
	c.Duration(&b.KeyIdle, "key-idle", time.Hour, durPositive, "with --keys and --create: the template's idle time (a key unused this long goes away)")
	c.Duration(&b.Settle, "settle-within", 5*time.Second, durPositive, "with --limits: the reservations' settle window (they are kept that long; at most 262144 at once)")
	c.Int64(&b.MaxInFlight, "max-in-flight", "N", 4, "inflight: the created cap's max_in_flight").Range(1, 1<<20, "an integer from 1 to 1048576")
	c.Duration(&b.HoldTTL, "ttl", time.Second, durPositive, "inflight: the created cap's hold TTL")
	c.Duration(&b.Hold, "hold", 50*time.Millisecond, durNonNegative, "inflight: how long each caller holds a grant before releasing it")
	b.tls.define(c)
}

// reportBench prints res on c's stdout, as JSON with --json or else with
// text, and returns bench's exit status for the measured run (with
// overload, the open loop): 1 if it measured no request or had more than
// 1% errors, else 0.
func reportBench[T any](c *cmdLine, jsonOut bool, res T, text func(io.Writer, T), run bench.Result) int {
	if jsonOut {
		if err := printJSON(c.stdout, res); err != nil {
			return c.fail(exitFailure, fmt.Errorf("writing the result as JSON: %w", err))
		}
	} else {
		text(c.stdout, res)
	}
	if run.Requests == 0 || run.Errors > run.Requests/100 {
		return 1
	}
	return 0
}

// checkInflightFlags rejects inflight's flags in the other modes, and in
// inflight mode the flags it has no use for.
func (b *benchCommand) checkInflightFlags(c *cmdLine) (int, bool) {
	if b.Mode != "inflight" {
		for _, name := range []string{"max-in-flight", "ttl", "hold"} {
			if c.isSet(name) {
				return c.usageErrorf("--%s is a flag of --mode inflight (allowed with --mode %s: not set)", name, b.Mode), false
			}
		}
		return 0, true
	}
	for _, name := range []string{"algorithm", "rate", "per", "open-rate", "request-ids", "max-requests", "protocol", "binary-conns", "limits", "settle-within"} {
		if c.isSet(name) {
			return c.usageErrorf("--%s with --mode inflight: the callers reserve one in-flight cap over HTTP through the Go client (allowed: not set)", name), false
		}
	}
	return 0, true
}

// checkKeysFlags rejects --keys outside the closed and open loops and
// with --limits, and --key-idle without --keys.
func (b *benchCommand) checkKeysFlags(c *cmdLine) (int, bool) {
	if b.Keys == 0 {
		if c.isSet("key-idle") {
			return c.usageErrorf("--key-idle is the template's idle time of --keys (allowed: with --keys N >= 1)"), false
		}
		return 0, true
	}
	if b.Mode != "closed" && b.Mode != "open" {
		return c.usageErrorf("--keys with --mode %s (allowed: --mode closed or open)", b.Mode), false
	}
	if b.Limits > 0 {
		return c.usageErrorf("--keys with --limits: templated keys are reserved one at a time (allowed: --limits 0)"), false
	}
	return 0, true
}

// checkOverloadFlags rejects flags that --mode overload sets itself, and
// overload's flags in the other modes; in overload mode it defaults
// --concurrency to defaultOverloadConcurrency.
func (b *benchCommand) checkOverloadFlags(c *cmdLine) (int, bool) {
	if b.Mode != "overload" {
		for _, name := range []string{"overload-factor", "capacity-passes", "capacity-duration", "capacity-concurrency", "control"} {
			if c.isSet(name) {
				return c.usageErrorf("--%s is a flag of --mode overload (allowed with --mode %s: not set)", name, b.Mode), false
			}
		}
		return 0, true
	}
	for _, name := range []string{"open-rate", "max-requests"} {
		if c.isSet(name) {
			return c.usageErrorf("--%s with --mode overload: the open loop's rate is --overload-factor x the capacity passes, and it runs for --duration (allowed: not set)", name), false
		}
	}
	if b.Control && c.isSet("overload-factor") {
		return c.usageErrorf("--overload-factor with --control: the control runs a closed loop at --capacity-concurrency in place of the open loop (allowed: not set)"), false
	}
	if !c.isSet("concurrency") {
		b.Concurrency = bench.DefaultOverloadConcurrency
	}
	if b.Concurrency <= b.CapacityConcurrency {
		return c.usageErrorf("--concurrency %d with --mode overload cannot overload a cluster that --capacity-concurrency %d fills (allowed: more than %d)", b.Concurrency, b.CapacityConcurrency, b.CapacityConcurrency), false
	}
	return 0, true
}
