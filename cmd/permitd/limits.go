package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/client"
)

func init() {
	register("limits", "manage limits: put, get, list, delete, lease-policy", runLimits)
}

// limitsSubcommands are the subcommands of "permitd limits".
var limitsSubcommands = []subcommand{
	{"put", "create or replace a limit", runLimitsPut},
	{"get", "print a limit with its counters", runLimitsGet},
	{"list", "print every limit", runLimitsList},
	{"delete", "delete a limit", runLimitsDelete},
	{"lease-policy", "make a limit leased (spent by worker sidecars) or linearized", runLimitsLeasePolicy},
}

func runLimits(args []string, stdout, stderr io.Writer) int {
	return commandGroup{"limits", "Manages the cluster's limits. get and list print a table (--json: JSON); the\nother subcommands print the server's answer as JSON.\n", limitsSubcommands}.run(args, stdout, stderr)
}

const exitStatusText = "Exit status: 0 ok; 1 failure (server unreachable, limit not found, ...);\n2 usage error or input the server rejected as invalid (nothing changed);\n" + exitDeniedText

// algorithmOptions lists the flags each algorithm accepts besides --rate
// and --per.
var algorithmOptions = map[string][]string{
	"strict": {"max-reserved", "expiry"},
	"bursty": {"max-burst-seconds"},
	"warmup": {"warmup", "cold-factor"},
	"hybrid": {"burst-ratio", "strictness"},
	// concurrency has no --rate or --per.
	concurrencyAlgorithm: {"max-in-flight", "ttl"},
}

// algorithms are the rate algorithms, in the order help texts list them.
var algorithms = []string{"strict", "bursty", "warmup", "hybrid"}

// concurrencyAlgorithm caps the permits held at once instead of a rate.
const concurrencyAlgorithm = "concurrency"

// limitAlgorithms are every algorithm limits put takes.
var limitAlgorithms = append(append([]string(nil), algorithms...), concurrencyAlgorithm)

// allowedAlgorithms words the --algorithm values for messages.
var allowedAlgorithms = orList(algorithms) + " (rate limits), or concurrency (a cap on permits held at once)"

func runLimitsPut(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("limits put", "limits put NAME --algorithm strict|bursty|warmup|hybrid --rate R [--per D] [options] [--shadow]\n"+
		"       permitd limits put NAME --algorithm concurrency --max-in-flight N [--ttl D] [--shadow]", `
Creates limit NAME, or replaces its configuration, and prints it as JSON.
A rate limit allows --rate permits per --per. The algorithm decides how
they may be spent; each algorithm takes only its own options:

  strict       --max-reserved N --expiry D     minimum spacing per/rate; N permits may be reserved ahead
  bursty       --max-burst-seconds S           idle time stored as up to S seconds of permits
  warmup       --warmup D --cold-factor F      stored permits served slower; ramps up over D
  hybrid       --burst-ratio B --strictness S  EngineBlock pools; catches up at up to B × rate
  concurrency  --max-in-flight N --ttl D       no rate: at most N permits held at once; a permit
                                               is held until its reservation is released
                                               (permitd release) or for D (default 1m)

--shadow puts the limit in shadow mode: every reserve is decided and
counted (shadow_granted, shadow_would_refuse, shadow_would_wait in limits
get) but granted at once. A put without --shadow enforces the limit.

Example: permitd limits put api --algorithm strict --rate 1 --per 6s --max-reserved 2
         permitd limits put workers --algorithm concurrency --max-in-flight 4 --ttl 30s

`+exitStatusText, stdout, stderr)
	c.args("NAME")
	var cf clientFlags
	var f limitPutFlags
	f.define(c)
	cf.define(c)
	name, ok, code := parseLimitArg(c, args)
	if !ok {
		return code
	}
	if err := f.check(c); err != nil {
		return c.usageError(err.Error())
	}
	spec := f.spec(c)
	return printCall(c, &cf, stdout, func(ctx context.Context, cl *client.Client) (client.Limit, error) {
		return cl.PutLimit(ctx, name, spec)
	})
}

// limitPutFlags are the limit's settings of permitd limits put.
type limitPutFlags struct {
	algorithm                                    string
	rate                                         float64
	per, expiry, warmup, ttl                     time.Duration
	maxReserved, maxInFlight                     int64
	maxBurst, coldFactor, burstRatio, strictness float64
	shadow                                       bool
}

func (f *limitPutFlags) define(c *cmdLine) {
	f.defineConfig(c)
	c.Bool(&f.shadow, "shadow", false, "shadow mode: decide and count every reserve, but grant it at once")
}

// defineConfig defines the flags of the configuration (all but
// --shadow): what a template takes too.
func (f *limitPutFlags) defineConfig(c *cmdLine) {
	c.String(&f.algorithm, "algorithm", "", "", "the algorithm (required)").OneOf(limitAlgorithms, allowedAlgorithms)
	c.Float(&f.rate, "rate", "R", 0, "permits per --per (required)").Check(positive, "a number > 0: permits per --per")
	c.Duration(&f.per, "per", time.Second, durPositive, "the period of --rate")
	c.Int64(&f.maxReserved, "max-reserved", "N", 0, "strict: permits that may be reserved ahead of now").Range(0, 1<<62, "an integer >= 0")
	c.Duration(&f.expiry, "expiry", 0, durNonNegative, "strict: how long after its time a permit may still be used (0: half an interval)")
	c.Float(&f.maxBurst, "max-burst-seconds", "S", 0, "bursty: seconds of permits stored while idle").Check(nonNegative, "a number >= 0")
	c.Duration(&f.warmup, "warmup", 0, durPositive, "warmup: the warm-up period")
	c.Float(&f.coldFactor, "cold-factor", "F", 0, "warmup: cold interval / stable interval").Check(zeroOrAtLeastOne, "a number >= 1, or 0 for the default")
	c.Float(&f.burstRatio, "burst-ratio", "B", 0, "hybrid: catch-up speed relative to the rate").Check(zeroOrAtLeastOne, "a number >= 1, or 0 for the default")
	c.Float(&f.strictness, "strictness", "S", 0, "hybrid: pacing mode (bucket/README.md, Hybrid)")
	c.Int64(&f.maxInFlight, "max-in-flight", "N", 0, "concurrency: permits held at once (required)").Range(1, 1<<20, "an integer from 1 to 1048576")
	c.Duration(&f.ttl, "ttl", 0, durPositive, "concurrency: how long a permit is held unless released (default 1m)").Range(time.Nanosecond, 24*time.Hour)
}

// check rejects what the algorithm cannot take: no --algorithm, a rate
// for a concurrency limit, a missing --rate or --max-in-flight, and
// another algorithm's options.
func (f *limitPutFlags) check(c *cmdLine) error {
	if !c.isSet("algorithm") || f.algorithm == "" {
		return fmt.Errorf("--algorithm is required; allowed: %s", allowedAlgorithms)
	}
	if f.algorithm == concurrencyAlgorithm {
		for _, o := range []string{"rate", "per"} {
			if c.isSet(o) {
				return fmt.Errorf("--%s does not apply to a concurrency limit (it has no rate); allowed with concurrency: --max-in-flight N and --ttl D", o)
			}
		}
		if !c.isSet("max-in-flight") {
			return errors.New("--max-in-flight is required with --algorithm concurrency; allowed: an integer from 1 to 1048576")
		}
	} else if !c.isSet("rate") {
		return errors.New("--rate is required; allowed: a number > 0: permits per --per")
	}
	for _, other := range limitAlgorithms {
		if other == f.algorithm {
			continue
		}
		for _, o := range algorithmOptions[other] {
			if c.isSet(o) {
				return fmt.Errorf("--%s belongs to algorithm %s, not %s; allowed with %s: %s", o, other, f.algorithm, f.algorithm,
					orList(dashed(algorithmOptions[f.algorithm])))
			}
		}
	}
	return nil
}

// spec is the limit the flags describe: the options given, and the
// others left to the server's defaults.
func (f *limitPutFlags) spec(c *cmdLine) client.LimitSpec {
	spec := client.LimitSpec{Algorithm: f.algorithm, Rate: f.rate, Per: f.per, Shadow: f.shadow,
		MaxReserved: ifSet(c, "max-reserved", &f.maxReserved), Expiry: ifSet(c, "expiry", &f.expiry),
		MaxBurstSeconds: ifSet(c, "max-burst-seconds", &f.maxBurst), Warmup: ifSet(c, "warmup", &f.warmup),
		ColdFactor: ifSet(c, "cold-factor", &f.coldFactor), BurstRatio: ifSet(c, "burst-ratio", &f.burstRatio),
		Strictness: ifSet(c, "strictness", &f.strictness)}
	if f.algorithm == concurrencyAlgorithm {
		spec.Per = 0
		spec.MaxInFlight = &f.maxInFlight
		spec.TTL = ifSet(c, "ttl", &f.ttl)
	}
	return spec
}

// ifSet returns v if flag name was given, else nil.
func ifSet[T any](c *cmdLine, name string, v *T) *T {
	if c.isSet(name) {
		return v
	}
	return nil
}

// dashed prefixes flag names with "--".
func dashed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "--" + n
	}
	return out
}

// parseLimitArg parses the args of a command whose one argument is a
// limit's NAME, and checks the name. When ok is false the command must
// exit with code (as after cmdLine.parse; a bad name is a usage error).
func parseLimitArg(c *cmdLine, args []string) (name string, ok bool, code int) {
	if ok, code := c.parse(args); !ok {
		return "", false, code
	}
	name = c.arg(0)
	if err := checkName("limit name", name); err != nil {
		return "", false, c.usageError(err.Error())
	}
	return name, true, 0
}

func runLimitsGet(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("limits get", "limits get NAME [--json] [--servers HTTPADDR,...]",
		"Prints limit NAME, its configuration and counters, as \"key: value\" lines\n(the keys of its JSON; rate as R/PER); --json prints the JSON.\n\n"+exitStatusText, stdout, stderr)
	c.args("NAME")
	var cf clientFlags
	var jsonOut bool
	c.Bool(&jsonOut, "json", false, "print JSON instead of key: value lines")
	cf.define(c)
	name, ok, code := parseLimitArg(c, args)
	if !ok {
		return code
	}
	get := func(ctx context.Context, cl *client.Client) (client.Limit, error) { return cl.GetLimit(ctx, name) }
	return runCall(c, &cf, get, func(l client.Limit) int {
		if jsonOut {
			printJSON(stdout, l)
		} else {
			printLimit(stdout, l)
		}
		return exitOK
	})
}

func runLimitsList(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("limits list", "limits list [--prefix P] [--max N] [--json] [--servers HTTPADDR,...]", `
Prints every limit (with --prefix P, every limit whose name starts with P;
with --max N, the first N), sorted by name, one row each:

  NAME       the limit's name
  ALGORITHM  strict, bursty, warmup, hybrid or concurrency
  RATE       R/PER, the permits per period ("-" for concurrency)
  OPTIONS    the options of its algorithm, as limits put takes them: the
             burst (max-reserved, max-burst-seconds, burst-ratio) or the
             in-flight cap (max-in-flight) among them
  LEASED     yes if worker sidecars lease its permits (limits lease-policy)
  SHADOW     yes if it is in shadow mode

--json prints a JSON array of the limits with their counters instead.

The limits are read a page of 1000 at a time (GET /v1/limits?prefix=&after=),
so that a register of a million templated keys can be listed, or a prefix
of it.

`+exitStatusText, stdout, stderr)
	var cf clientFlags
	var jsonOut bool
	var prefix string
	var maxLimits int
	c.Bool(&jsonOut, "json", false, "print a JSON array instead of a table")
	c.String(&prefix, "prefix", "P", "", "only the limits whose names start with P (characters of limit names)")
	c.Int(&maxLimits, "max", "N", 0, "print at most N limits (0: all)").Range(0, math.MaxInt32, "an integer >= 0 (0: all)")
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	if err := (fsm.LimitsQuery{Prefix: prefix, Size: 1}).Validate(); err != nil {
		return c.usageErrorf("--prefix %q: allowed: 1-%d characters of A-Z a-z 0-9 _ . : -", prefix, fsm.MaxNameLen)
	}
	return runCall(c, &cf, func(ctx context.Context, cl *client.Client) ([]client.Limit, error) {
		return listLimitPages(ctx, cl, prefix, maxLimits)
	}, func(ls []client.Limit) int {
		switch {
		case !jsonOut:
			printLimitsTable(stdout, ls)
		case ls == nil:
			printJSON(stdout, []client.Limit{}) // [] rather than null
		default:
			printJSON(stdout, ls)
		}
		return exitOK
	})
}

// listLimitsPageSize is how many limits limits list asks for at once.
const listLimitsPageSize = 1000

// listLimitPages reads the limits whose names start with prefix, page by
// page, at most maxLimits of them (0: all). The names are also filtered
// here: a server older than paging answers every limit at once.
func listLimitPages(ctx context.Context, cl *client.Client, prefix string, maxLimits int) ([]client.Limit, error) {
	var out []client.Limit
	q := client.LimitsQuery{Prefix: prefix, Size: listLimitsPageSize}
	for {
		if maxLimits > 0 {
			q.Size = min(listLimitsPageSize, maxLimits-len(out))
		}
		page, next, err := cl.ListLimitsPage(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, l := range page {
			if strings.HasPrefix(l.Name, prefix) && (maxLimits == 0 || len(out) < maxLimits) {
				out = append(out, l)
			}
		}
		if next == "" || next <= q.After || (maxLimits > 0 && len(out) >= maxLimits) {
			return out, nil
		}
		q.After = next
	}
}

func runLimitsDelete(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("limits delete", "limits delete NAME [--force] [--servers HTTPADDR,...]", `
Deletes limit NAME and prints {"name":NAME,"deleted":true}; exits 1 if
there is no such limit.

The register refuses to delete a leased limit while leases still hold
permits of it (workers could still be spending them); --force asks it to
delete the limit anyway. Deleting and re-creating a leased limit adds,
once, what the old one had handed out to the over-grant bound (see the
fsm/README.md, Leased over-grant bound).

`+exitStatusText, stdout, stderr)
	c.args("NAME")
	var cf clientFlags
	var force bool
	c.Bool(&force, "force", false, "delete a leased limit even while leases hold permits of it")
	cf.define(c)
	name, ok, code := parseLimitArg(c, args)
	if !ok {
		return code
	}
	del := func(ctx context.Context, cl *client.Client) (bool, error) {
		if force {
			return cl.ForceDeleteLimit(ctx, name)
		}
		return cl.DeleteLimit(ctx, name)
	}
	return runCall(c, &cf, del, func(bool) int {
		// The server answers 404 for a limit that does not exist; "existed"
		// is false only when a retry found it deleted by the first attempt.
		printJSON(stdout, map[string]any{"name": name, "deleted": true})
		return exitOK
	})
}

func runLimitsLeasePolicy(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("limits lease-policy", "limits lease-policy NAME --leased=true|false [--burst-permits C] [--max-outstanding-permits O]", `
Makes limit NAME leased (--leased=true: worker sidecars lease shares of its
permits and spend them locally; reserves on it are then refused) or
linearized again (--leased=false: every reserve is one raft decision; only
once no lease holds permits). Prints the effective policy as JSON.

In any window of length W the workers together spend at most
C + O + floor(W / interval) + 1 permits of a leased limit.

`+exitStatusText, stdout, stderr)
	c.args("NAME")
	var cf clientFlags
	var leased bool
	var burst, outstanding int64
	c.Bool(&leased, "leased", false, "true: lease the limit's permits to workers; false: linearized (required, written --leased=true or --leased=false)")
	c.Int64(&burst, "burst-permits", "C", 0, "C, the most permits the free pool accumulates (0: one second of permits); only with --leased=true").Range(0, 1<<60, "an integer 1-1152921504606846976 (2^60), or 0 for the default")
	c.Int64(&outstanding, "max-outstanding-permits", "O", 0, "O, the most permits held by leases at once (0: one second of permits); only with --leased=true").Range(0, 1<<60, "an integer 1-1152921504606846976 (2^60), or 0 for the default")
	cf.define(c)
	name, ok, code := parseLimitArg(c, args)
	if !ok {
		return code
	}
	if !c.isSet("leased") {
		return c.usageError("--leased is required; allowed: --leased=true (lease the limit to workers) or --leased=false (linearized)")
	}
	if !leased && (burst != 0 || outstanding != 0) {
		return c.usageError("--burst-permits and --max-outstanding-permits apply only with --leased=true")
	}
	return printCall(c, &cf, stdout, func(ctx context.Context, cl *client.Client) (client.LeasePolicyResult, error) {
		return cl.PutLeasePolicy(ctx, name, client.LeasePolicy{Leased: leased, BurstPermits: burst, MaxOutstandingPermits: outstanding})
	})
}
