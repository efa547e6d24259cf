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

	"github.com/permitd/permitd/cmd/internal/cluster"
)

// options are the command's flags.
type options struct {
	keys            []int
	rounds          int
	duration        time.Duration
	warmup          time.Duration
	concurrency     int
	fillConcurrency int
	fillOrder       string
	protocols       []string
	afterSnapshot   int
	idle            time.Duration
	restartTimeout  time.Duration
	deadline        time.Duration
	permitd         string
	jsonOut         string
}

// parseOptions parses the command line (flag's syntax: -name value).
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("keys-scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.String("keys", "10000,100000", "key counts to measure, each on a fresh cluster (comma-separated; 1 to 2097152)")
	protocols := fs.String("protocols", "binary,http", "protocols of the throughput runs (binary, http or both)")
	fs.IntVar(&o.rounds, "rounds", 3, "throughput rounds; each runs the single limit, the hot key and a random key in turn")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured duration of each throughput run (permitd bench --duration)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "warm-up of each throughput run (permitd bench --warmup)")
	fs.IntVar(&o.concurrency, "concurrency", 256, "closed-loop workers of each throughput run (permitd bench --concurrency)")
	fs.IntVar(&o.fillConcurrency, "fill-concurrency", 512, "reserves outstanding at once while filling the keys")
	fs.StringVar(&o.fillOrder, "fill-order", "random", "order the keys are created in: random (a fixed shuffle, as tenants arrive) or sequential (k0, k1, ...)")
	fs.IntVar(&o.afterSnapshot, "after-snapshot", 200, "reserves sent one at a time after the snapshot, before the restart (log entries to replay)")
	fs.DurationVar(&o.idle, "idle", 24*time.Hour, "the template's idle time (long: no key may go during the run)")
	fs.DurationVar(&o.restartTimeout, "restart-timeout", 5*time.Minute, "longest wait for the cluster to be ready after the restart")
	fs.DurationVar(&o.deadline, "deadline", 2*time.Hour, "hard deadline of the whole run")
	fs.StringVar(&o.permitd, "permitd", "", "permitd binary (default: go build ./cmd/permitd into a temporary directory)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the results as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	for _, f := range strings.Split(*keys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1<<21 {
			return o, fmt.Errorf("-keys %q: want integers from 1 to 2097152 separated by commas", *keys)
		}
		o.keys = append(o.keys, n)
	}
	for _, p := range strings.Split(*protocols, ",") {
		if p = strings.TrimSpace(p); p != "binary" && p != "http" {
			return o, fmt.Errorf("-protocols %q: want binary, http or binary,http", *protocols)
		}
		o.protocols = append(o.protocols, p)
	}
	switch {
	case o.fillOrder != "random" && o.fillOrder != "sequential":
		return o, fmt.Errorf("-fill-order %q: want random or sequential", o.fillOrder)
	case o.rounds < 1:
		return o, fmt.Errorf("-rounds %d: want at least 1", o.rounds)
	case o.concurrency < 1 || o.fillConcurrency < 1:
		return o, errors.New("-concurrency and -fill-concurrency: want at least 1")
	case o.afterSnapshot < 1:
		return o, fmt.Errorf("-after-snapshot %d: want at least 1 (a restart replays log entries after the snapshot)", o.afterSnapshot)
	case o.duration <= 0 || o.warmup < 0 || o.restartTimeout <= 0 || o.deadline <= 0:
		return o, errors.New("-duration, -restart-timeout and -deadline: want > 0; -warmup: want >= 0")
	}
	return o, nil
}

func main() {
	o, err := parseOptions(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "keys-scale:", err)
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "keys-scale-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "keys-scale:", err)
		os.Exit(1)
	}
	// The deadline is hard: the agents die with this process, and their
	// data (hundreds of MiB at a million keys) goes with it.
	time.AfterFunc(o.deadline+30*time.Second, func() {
		fmt.Fprintln(os.Stderr, "keys-scale: hard deadline passed; exiting")
		os.RemoveAll(tmp)
		os.Exit(3)
	})
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, o.deadline)
	defer cancel()
	rep, err := run(ctx, o, tmp, os.Stderr)
	os.RemoveAll(tmp)
	printTable(os.Stdout, rep)
	if werr := writeJSON(o.jsonOut, rep); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "keys-scale:", err)
		os.Exit(1)
	}
}

// run measures every key count of o on a fresh cluster, its data under
// tmp, logging progress to progress; it returns what it measured, and the
// first failure.
func run(ctx context.Context, o options, tmp string, progress io.Writer) (report, error) {
	rep := report{FillOrder: o.fillOrder, Concurrency: o.concurrency, Duration: o.duration.String(), Rounds: o.rounds, Protocols: o.protocols, Started: time.Now().UTC().Format(time.RFC3339)}
	var err error
	bin := o.permitd
	if bin == "" {
		if bin, err = cluster.Build(ctx, tmp); err != nil {
			return rep, err
		}
	}
	for _, n := range o.keys {
		res, err := measure(ctx, o, bin, tmp, n, progress)
		if err != nil {
			res.Error = err.Error()
		}
		rep.Results = append(rep.Results, res)
		if err != nil {
			return rep, fmt.Errorf("%d keys: %w", n, err)
		}
	}
	return rep, nil
}

// writeJSON writes the report to the file path (empty: nowhere).
func writeJSON(path string, rep report) error {
	if path == "" {
		return nil
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
