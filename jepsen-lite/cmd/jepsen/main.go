package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runUsage is the jepsen command's usage text, before its flags.
const runUsage = `Usage: jepsen [--mode auto|namespaces|fallback] [--secure] --nodes 3|5 --workers N --groups G --workload strict|window|leased|multi --nemesis partition,kill,pause,clock,loss --duration 60s --seed S --out DIR
       jepsen sweep --seeds 1000-1049 [--workloads strict,window,leased,multi] [--duration 20s] (jepsen sweep --help)

Runs one jepsen-lite scenario: a real permitd cluster, client workers, a
fake rate-limited API and a seeded schedule of faults; then judges the
history and writes DIR/index.html and DIR/summary.json. As root with ip(8)
and nft(8), every agent runs in its own network namespace and partitions
are kernel packet drops (namespace mode); otherwise the agents run on
loopback with faults injected by permitd's --test-hooks fault layer
(fallback mode). --mode forces one. --secure runs everything over TLS
with API tokens.

Exit status: 0 valid, 1 safety violation, 2 bad flags, 3 incomplete run,
4 safe but throughput did not recover after the final heal.

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "sweep" {
		return runSweep(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg         runner.Config
		nemesis     string
		agentFlags  string
		workerFlags string
		quiet       bool
	)
	fs.IntVar(&cfg.Nodes, "nodes", 3, "cluster size: 3 or 5")
	fs.IntVar(&cfg.Workers, "workers", 4, "client workers")
	fs.IntVar(&cfg.Groups, "groups", 1, "worker groups (labels; they matter to the leased workload)")
	fs.StringVar(&cfg.Workload, "workload", "strict", "strict, window, leased (permitd worker sidecars in --groups groups lease one limit), multi (three limits reserved together, settled and released), or templated (many keys of one template, created on first use and dropped when idle)")
	fs.StringVar(&nemesis, "nemesis", "partition,kill,pause,clock,loss", "faults: comma-separated kinds (partition, kill, pause, clock, loss, snapshot, transfer; strict and leased: reconfig; leased: worker, relay), each optionally KIND:VARIANT|VARIANT; none for no faults")
	fs.DurationVar(&cfg.Duration, "duration", 60*time.Second, "length of the workload, including the fault-free tail")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the fault schedule: the same seed and flags replay the same schedule")
	fs.StringVar(&cfg.OutDir, "out", "", "report directory, absent or empty (default jepsen-lite/out/<time>-seed<S>)")
	fs.StringVar(&cfg.PermitdBin, "permitd-bin", "", "permitd binary (default: go build -o tmp/permitd ./cmd/permitd in the source tree)")
	fs.DurationVar(&cfg.Interval, "interval", 0, "the limit: 1 permit per interval (default 200ms; leased: 20ms)")
	fs.DurationVar(&cfg.Expiry, "expiry", 0, "strict: how long after its slot a permit may be used (default interval/2)")
	fs.Int64Var(&cfg.MaxReserved, "max-reserved", 0, "strict: slots that may be reserved ahead (default 4; templated: 6)")
	fs.Int64Var(&cfg.MaxPermits, "max-permits", 0, "most permits one reserve asks for: 1 three times in four, else uniform in 2..N (default strict: max-reserved+1, used one by one at their slots; window: 1, used together; leased: 1)")
	fs.DurationVar(&cfg.MaxWait, "max-wait", 0, "max_wait of every reserve (default (max-reserved+1)*interval; window: 1s)")
	fs.DurationVar(&cfg.Tail, "tail", 0, "fault-free end after the final heal (default max(10s, duration/4))")
	fs.DurationVar(&cfg.Leased.TTL, "lease-ttl", 0, "leased: the workers' lease TTL (default 1s)")
	fs.DurationVar(&cfg.Leased.Margin, "lease-margin", 0, "leased: the workers' safety margin (default: the worker's, 10% of the TTL, at least 50ms)")
	fs.Int64Var(&cfg.Leased.BurstPermits, "lease-burst", 0, "leased: the lease policy's burst_permits C (default 1s of permits)")
	fs.Int64Var(&cfg.Leased.MaxOutstandingPermits, "lease-outstanding", 0, "leased: the lease policy's max_outstanding_permits O (default 1s of permits)")
	fs.IntVar(&cfg.Leased.Relays, "lease-relays", 0, "leased: lease relays (permitd relay) some sidecars send their lease commands through, the others going direct (default: 2 from 3 workers on, 1 with 2; -1: none)")
	fs.StringVar(&workerFlags, "worker-flags", "", "leased: extra flags for every worker sidecar, space-separated (e.g. --test-double-lease)")
	fs.StringVar(&agentFlags, "agent-flags", "", "extra flags for every agent, space-separated (e.g. --test-break-timeline)")
	fs.IntVar(&cfg.Templated.Keys, "templated-keys", 0, "templated: keys jlt:k0 .. jlt:k<N-1> (default 200; the first 5 hot)")
	fs.StringVar(&cfg.Templated.Algorithm, "templated-algorithm", "", "templated: the template's algorithm, strict, bursty or hybrid (default: drawn by the seed)")
	fs.Int64Var(&cfg.Templated.MaxKeys, "templated-max-keys", 0, "templated: the template's cap on live keys (default: drawn by the seed, the number of keys or a cap the run hits)")
	fs.StringVar(&cfg.Mode, "mode", runner.ModeAuto, "auto (namespaces when available: root, ip, nft), namespaces (each agent in its own network namespace, kernel partitions), or fallback (loopback, permitd's fault layer)")
	fs.BoolVar(&cfg.Secure, "secure", false, "TLS and API tokens end to end: the runner makes a CA, node certificates and tokens with the permitd binary (in DIR/secure); the agents serve TLS 1.3 (raft: mutual TLS) and require tokens, every client uses TLS and a token")
	fs.BoolVar(&quiet, "quiet", false, "no progress lines")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runUsage)
		fs.PrintDefaults()
	}
	if code, done := parse(fs, args, stderr); done {
		return code
	}
	var err error
	if cfg.Nemeses, err = runner.ParseNemeses(nemesis); err != nil {
		fmt.Fprintln(stderr, "jepsen:", err)
		return runner.ExitUsage
	}
	cfg.AgentFlags = strings.Fields(agentFlags)
	cfg.Leased.WorkerFlags = strings.Fields(workerFlags)
	cfg.Command = "jepsen " + strings.Join(args, " ")
	if cfg.OutDir == "" {
		cfg.OutDir = fmt.Sprintf("jepsen-lite/out/%s-seed%d", time.Now().UTC().Format("20060102T150405Z"), cfg.Seed)
	}
	if !quiet {
		cfg.Log = stderr
	}
	sum, err := runner.Run(ctx, cfg)
	if err != nil {
		return failed(stderr, fs.Name(), err, runner.ErrNotImplemented)
	}
	fmt.Fprintf(stdout, "%s: %s (exit %d)\n", cfg.OutDir, sum.Verdict, sum.ExitCode)
	return sum.ExitCode
}

// parse parses args into fs; done reports that the command ends here with
// code: 0 after --help, ExitUsage for a bad flag or a stray argument.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return runner.ExitUsage, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return runner.ExitUsage, true
	}
	return 0, false
}

// failed reports err, which kept the command from running, and returns
// its exit status: ExitUsage for a configuration error (runner.ErrInvalid
// or one of usage), ExitHarness otherwise.
func failed(stderr io.Writer, name string, err error, usage ...error) int {
	fmt.Fprintln(stderr, name+":", err)
	for _, u := range append(usage, runner.ErrInvalid) {
		if errors.Is(err, u) {
			return runner.ExitUsage
		}
	}
	return runner.ExitHarness
}
