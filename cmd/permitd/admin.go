package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/permitd/permitd/transport/client"
)

func init() {
	register("limits", "manage limits: put, get, list, delete", runLimits)
	register("reserve", "reserve permits of a limit once and print the answer", runReserve)
	register("status", "print the status of each node", runStatus)
	register("cluster", "manage membership: join, remove", runCluster)
}

// commonFlags are shared by the client commands.
type commonFlags struct {
	servers string
	timeout time.Duration
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.servers, "servers", "127.0.0.1:8001", "HTTPADDR,... of the cluster's nodes (the next is tried when one is down)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "overall timeout")
}

func (c *commonFlags) client() (*client.Client, context.Context, context.CancelFunc, error) {
	cl, err := client.New(splitList(c.servers))
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	return cl, ctx, cancel, nil
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// printLine writes v as one line of JSON (for output that scripts read line
// by line).
func printLine(w io.Writer, v any) {
	_ = json.NewEncoder(w).Encode(v)
}

func parseFlags(fs *flag.FlagSet, args []string, usage string) (bool, int) {
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, 0
		}
		return false, 2
	}
	return true, 0
}

func runLimits(args []string, stdout, stderr io.Writer) int {
	const usage = `Usage: permitd limits put NAME --algorithm A --rate R [--per D] [options]
       permitd limits get NAME
       permitd limits list
       permitd limits delete NAME
(each also takes --servers and --timeout)

Algorithms and their options:
  strict   --max-reserved N --expiry D     minimum spacing per/rate; N permits may be reserved ahead
  bursty   --max-burst-seconds S           idle time stored as up to S seconds of permits
  warmup   --warmup D --cold-factor F      stored permits served slower; ramps up over D
  hybrid   --burst-ratio B --strictness S  EngineBlock pools; catches up at up to B × rate
`
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("limits "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	var (
		algorithm                                  = fs.String("algorithm", "", "put: strict, bursty, warmup or hybrid")
		rate                                       = fs.Float64("rate", 0, "put: permits per --per (> 0)")
		per                                        = fs.Duration("per", time.Second, "put: period of --rate")
		maxReserved                                = fs.Int64("max-reserved", 0, "put (strict): permits that may be reserved ahead of now")
		expiry, warmup                             time.Duration
		maxBurst, coldFactor, burstRatio, strictns float64
	)
	fs.DurationVar(&expiry, "expiry", 0, "put (strict): how long after its time a permit may still be used")
	fs.Float64Var(&maxBurst, "max-burst-seconds", 0, "put (bursty): seconds of permits stored while idle")
	fs.DurationVar(&warmup, "warmup", 0, "put (warmup): warm-up period")
	fs.Float64Var(&coldFactor, "cold-factor", 0, "put (warmup): cold interval / stable interval (>= 1)")
	fs.Float64Var(&burstRatio, "burst-ratio", 0, "put (hybrid): catch-up speed relative to the rate (>= 1)")
	fs.Float64Var(&strictns, "strictness", 0, "put (hybrid): pacing mode, see the README")
	// Names come first (permitd limits put NAME --flags).
	var name string
	if len(rest) > 0 && len(rest[0]) > 0 && rest[0][0] != '-' {
		name, rest = rest[0], rest[1:]
	}
	if ok, code := parseFlags(fs, rest, usage); !ok {
		return code
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	cl, ctx, cancel, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "permitd limits:", err)
		return 2
	}
	defer cancel()
	needName := func() bool {
		if name == "" {
			fmt.Fprintf(stderr, "permitd limits %s: a limit NAME is required\n", sub)
			return false
		}
		return true
	}
	switch sub {
	case "put":
		if !needName() {
			return 2
		}
		spec := client.LimitSpec{Algorithm: *algorithm, Rate: *rate, Per: *per}
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "max-reserved":
				spec.MaxReserved = maxReserved
			case "expiry":
				spec.Expiry = &expiry
			case "max-burst-seconds":
				spec.MaxBurstSeconds = &maxBurst
			case "warmup":
				spec.Warmup = &warmup
			case "cold-factor":
				spec.ColdFactor = &coldFactor
			case "burst-ratio":
				spec.BurstRatio = &burstRatio
			case "strictness":
				spec.Strictness = &strictns
			}
		})
		l, err := cl.PutLimit(ctx, name, spec)
		if err != nil {
			fmt.Fprintln(stderr, "permitd limits put:", err)
			return 1
		}
		printJSON(stdout, l)
	case "get":
		if !needName() {
			return 2
		}
		l, err := cl.GetLimit(ctx, name)
		if err != nil {
			fmt.Fprintln(stderr, "permitd limits get:", err)
			return 1
		}
		printJSON(stdout, l)
	case "list":
		ls, err := cl.ListLimits(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "permitd limits list:", err)
			return 1
		}
		printJSON(stdout, ls)
	case "delete":
		if !needName() {
			return 2
		}
		existed, err := cl.DeleteLimit(ctx, name)
		if err != nil {
			fmt.Fprintln(stderr, "permitd limits delete:", err)
			return 1
		}
		printJSON(stdout, map[string]bool{"deleted": existed})
	default:
		fmt.Fprintf(stderr, "permitd limits: unknown subcommand %q (want put, get, list or delete)\n", sub)
		return 2
	}
	return 0
}

func runReserve(args []string, stdout, stderr io.Writer) int {
	const usage = `Usage: permitd reserve NAME [--permits N] [--max-wait D] [--wait]

Reserves N permits of limit NAME once. Prints the grant as one JSON line
({"granted":true,"wait_ns":W,"spacing_ns":S,...}: permit j may be used
W + j*S after the answer) or the refusal ({"granted":false,
"retry_after_ns":R,...}); exits 0 when granted, 3 when refused.

With --wait it then prints one line {"permit":J} per permit at the moment
that permit may be used (a strict limit spaces them by its interval; the
other algorithms grant them together) and exits 0 after the last, or 1 if
a permit expired before its line could be printed. A refusal never sleeps.
Use a permit when its line is printed:

  permitd reserve api --permits 3 --wait | tail -n +2 | while read -r _; do call_api; done
`
	fs := flag.NewFlagSet("reserve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	permits := fs.Int64("permits", 1, "permits to reserve (>= 1)")
	maxWait := fs.Duration("max-wait", 0, "longest acceptable wait")
	wait := fs.Bool("wait", false, "print a line per permit when it may be used")
	var name string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if ok, code := parseFlags(fs, args, usage); !ok {
		return code
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	if name == "" {
		fmt.Fprintln(stderr, "permitd reserve: a limit NAME is required")
		return 2
	}
	cl, ctx, cancel, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "permitd reserve:", err)
		return 2
	}
	defer cancel()
	g, err := cl.Reserve(ctx, name, *permits, *maxWait)
	if err != nil {
		fmt.Fprintln(stderr, "permitd reserve:", err)
		return 1
	}
	if !g.Granted {
		printLine(stdout, map[string]any{"granted": false, "retry_after_ns": g.RetryAfter.Nanoseconds(), "request_id": g.RequestID,
			"error": fmt.Sprintf("limit %q: no permit within max wait %v; retry after %v", name, *maxWait, g.RetryAfter)})
		return 3
	}
	printLine(stdout, map[string]any{"granted": true, "permits": g.Permits, "wait_ns": g.Delay.Nanoseconds(),
		"spacing_ns": g.Spacing.Nanoseconds(), "expires_in_ns": g.ExpiresIn.Nanoseconds(), "request_id": g.RequestID})
	if *wait {
		for j := range g.Permits {
			if err := g.WaitPermit(ctx, j); err != nil {
				fmt.Fprintln(stderr, "permitd reserve:", err)
				return 1
			}
			printLine(stdout, map[string]any{"permit": j})
		}
	}
	return 0
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	const usage = `Usage: permitd status [--servers HTTPADDR,...]

Prints each node's status (state, leader, term, indexes, readiness) as JSON.
`
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	if ok, code := parseFlags(fs, args, usage); !ok {
		return code
	}
	cl, ctx, cancel, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "permitd status:", err)
		return 2
	}
	defer cancel()
	code := 0
	out := map[string]any{}
	for _, s := range cl.Servers() {
		st, err := cl.StatusOf(ctx, s)
		if err != nil {
			out[s] = map[string]string{"error": err.Error()}
			code = 1
			continue
		}
		out[s] = st
	}
	printJSON(stdout, out)
	return code
}

func runCluster(args []string, stdout, stderr io.Writer) int {
	const usage = `Usage: permitd cluster join ID RAFTADDR [--servers ...]
       permitd cluster remove ID [--servers ...]
       permitd cluster show [--servers ...]
`
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	var pos []string
	rest := args[1:]
	for len(rest) > 0 && len(rest[0]) > 0 && rest[0][0] != '-' {
		pos, rest = append(pos, rest[0]), rest[1:]
	}
	fs := flag.NewFlagSet("cluster "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	if ok, code := parseFlags(fs, rest, usage); !ok {
		return code
	}
	cl, ctx, cancel, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "permitd cluster:", err)
		return 2
	}
	defer cancel()
	switch {
	case sub == "join" && len(pos) == 2:
		err = cl.Join(ctx, pos[0], pos[1])
	case sub == "remove" && len(pos) == 1:
		err = cl.RemoveServer(ctx, pos[0])
	case sub == "show" && len(pos) == 0:
		var c client.Cluster
		c, err = cl.Cluster(ctx)
		if err == nil {
			printJSON(stdout, c)
		}
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "permitd cluster:", err)
		return 1
	}
	return 0
}
