package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/client"
)

func init() {
	register("templates", "manage templates: limits created per key on first use", runTemplates)
}

// templatesSubcommands are the subcommands of "permitd templates".
var templatesSubcommands = []subcommand{
	{"put", "create or replace a template", runTemplatesPut},
	{"get", "print a template with its live keys", runTemplatesGet},
	{"list", "print every template", runTemplatesList},
	{"delete", "delete a template (its live keys stay until idle)", runTemplatesDelete},
}

func runTemplates(args []string, stdout, stderr io.Writer) int {
	return commandGroup{"templates", "Manages the cluster's templates: a reserve naming PREFIX:KEY creates that limit\n" +
		"from the template of PREFIX on first use, and the register drops it once idle.\n" +
		"get and list print a table (--json: JSON); put and delete print the server's\nanswer as JSON.\n", templatesSubcommands}.run(args, stdout, stderr)
}

const templateExitStatusText = "Exit status: 0 ok; 1 failure (server unreachable, template not found, ...);\n2 usage error or input the server rejected as invalid (nothing changed);\n" + exitDeniedText

// parsePrefixArg parses the args of a command whose one argument is a
// template's PREFIX, and checks it (a bad prefix is a usage error).
func parsePrefixArg(c *cmdLine, args []string) (prefix string, ok bool, code int) {
	if ok, code := c.parse(args); !ok {
		return "", false, code
	}
	prefix = c.arg(0)
	if err := fsm.ValidateTemplatePrefix(prefix); err != nil {
		return "", false, c.usageErrorf("template prefix %q: allowed: 1-%d characters of A-Z a-z 0-9 _ . - (a limit name without ':')", prefix, fsm.MaxTemplatePrefixLen)
	}
	return prefix, true, 0
}

func runTemplatesPut(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("templates put", "templates put PREFIX --algorithm strict|bursty|warmup|hybrid --rate R [--per D] [options] --idle D --max-keys N\n"+
		"       permitd templates put PREFIX --algorithm concurrency --max-in-flight N [--ttl D] --idle D --max-keys N", `
Creates the template of PREFIX, or replaces it, and prints it as JSON. A
reserve naming PREFIX:KEY (permitd reserve PREFIX:KEY, or one part of a
reserve of several limits) for a key that does not exist creates that
limit from the template, in the same raft entry that decides the reserve.
The key is then a limit like any other (permitd limits list --prefix
PREFIX:) until it has gone unused for --idle and forgetting it changes no
answer: the register then drops it by itself.

The configuration flags are those of permitd limits put (any algorithm;
a hybrid limit only with --strictness 1, whose keys come to rest); keys
are never leased or in shadow mode. Keys already live keep the
configuration they were created with; permitd limits put PREFIX:KEY
makes one an explicit limit (a tenant with a bigger plan).

--max-keys N caps the template's live keys: a reserve that would create
one more is refused (429, keys_full) with the time when a key may go,
never by evicting a live key.

Example: permitd templates put cust --algorithm bursty --rate 10 --max-burst-seconds 2 --idle 10m --max-keys 100000

`+templateExitStatusText, stdout, stderr)
	c.args("PREFIX")
	var cf clientFlags
	var f limitPutFlags
	var idle time.Duration
	var maxKeys int64
	f.defineConfig(c)
	c.Duration(&idle, "idle", 0, durPositive, "how long a key goes unused before the register drops it (required)").
		Range(time.Duration(fsm.MinTemplateIdleNanos), time.Duration(fsm.MaxTemplateIdleNanos))
	c.Int64(&maxKeys, "max-keys", "N", 0, "the most keys of the template live at once (required)").Range(1, fsm.MaxTemplatedKeys, "an integer from 1 to 2097152")
	cf.define(c)
	prefix, ok, code := parsePrefixArg(c, args)
	if !ok {
		return code
	}
	if err := f.check(c); err != nil {
		return c.usageError(err.Error())
	}
	if !c.isSet("idle") {
		return c.usageError(`--idle is required; allowed: a Go duration string from 1s to 720h0m0s, such as "10m"`)
	}
	if !c.isSet("max-keys") {
		return c.usageError("--max-keys is required; allowed: an integer from 1 to 2097152")
	}
	spec := client.TemplateSpec{LimitSpec: f.spec(c), Idle: idle, MaxKeys: maxKeys}
	return printCall(c, &cf, stdout, func(ctx context.Context, cl *client.Client) (client.Template, error) {
		return cl.PutTemplate(ctx, prefix, spec)
	})
}

func runTemplatesGet(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("templates get", "templates get PREFIX [--json] [--servers HTTPADDR,...]",
		"Prints the template of PREFIX, its configuration, idle time, max keys and live\nkeys, as \"key: value\" lines (the keys of its JSON; rate as R/PER); --json\nprints the JSON.\n\n"+templateExitStatusText, stdout, stderr)
	c.args("PREFIX")
	var cf clientFlags
	var jsonOut bool
	c.Bool(&jsonOut, "json", false, "print JSON instead of key: value lines")
	cf.define(c)
	prefix, ok, code := parsePrefixArg(c, args)
	if !ok {
		return code
	}
	get := func(ctx context.Context, cl *client.Client) (client.Template, error) {
		return cl.GetTemplate(ctx, prefix)
	}
	return runCall(c, &cf, get, func(t client.Template) int {
		if jsonOut {
			printJSON(stdout, t)
		} else {
			printTemplate(stdout, t)
		}
		return exitOK
	})
}

func runTemplatesList(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("templates list", "templates list [--json] [--servers HTTPADDR,...]", `
Prints every template, sorted by prefix, one row each:

  PREFIX     its keys are the limits PREFIX:KEY
  ALGORITHM  strict, bursty, warmup, hybrid or concurrency
  RATE       R/PER, the permits per period ("-" for concurrency)
  OPTIONS    the options of its algorithm, as limits put takes them
  IDLE       how long a key goes unused before it is dropped
  KEYS       live keys / max keys; "(deleted)": a deleted template whose
             keys still live (it creates no key, and goes with its last)

--json prints a JSON array of the templates instead.

`+templateExitStatusText, stdout, stderr)
	var cf clientFlags
	var jsonOut bool
	c.Bool(&jsonOut, "json", false, "print a JSON array instead of a table")
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	return runCall(c, &cf, func(ctx context.Context, cl *client.Client) ([]client.Template, error) {
		return cl.ListTemplates(ctx)
	}, func(ts []client.Template) int {
		switch {
		case !jsonOut:
			printTemplatesTable(stdout, ts)
		case ts == nil:
			printJSON(stdout, []client.Template{}) // [] rather than null
		default:
			printJSON(stdout, ts)
		}
		return exitOK
	})
}

func runTemplatesDelete(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("templates delete", "templates delete PREFIX [--servers HTTPADDR,...]", `
Deletes the template of PREFIX and prints {"prefix":PREFIX,"existed":true,
"live_keys":N}: it creates no more keys, and its N live keys stay, with
their configuration, until they are idle. Exits 1 if there is no such
template.

`+templateExitStatusText, stdout, stderr)
	c.args("PREFIX")
	var cf clientFlags
	cf.define(c)
	prefix, ok, code := parsePrefixArg(c, args)
	if !ok {
		return code
	}
	return printCall(c, &cf, stdout, func(ctx context.Context, cl *client.Client) (client.TemplateDeleted, error) {
		d, err := cl.DeleteTemplate(ctx, prefix)
		if err == nil && !d.Existed {
			err = errors.New("templates delete: the server answered existed false")
		}
		return d, err
	})
}

// printTemplatesTable prints one row per template.
func printTemplatesTable(w io.Writer, ts []client.Template) {
	if len(ts) == 0 {
		fmt.Fprintln(w, "no templates (create one with permitd templates put)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PREFIX\tALGORITHM\tRATE\tOPTIONS\tIDLE\tKEYS")
	for _, t := range ts {
		l := client.Limit{LimitSpec: t.LimitSpec}
		keys := fmt.Sprintf("%d/%d", t.LiveKeys, t.MaxKeys)
		if t.Deleted {
			keys += " (deleted)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Prefix, t.Algorithm, limitRate(l), optionsText(l), shortDuration(t.Idle), keys)
	}
	tw.Flush()
}

// printTemplate prints template t as "key: value" lines, the keys its
// JSON's (--json) but for rate, as R/PER.
func printTemplate(w io.Writer, t client.Template) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	kv := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	l := client.Limit{LimitSpec: t.LimitSpec}
	kv("prefix", t.Prefix)
	kv("algorithm", t.Algorithm)
	kv("rate", limitRate(l))
	for _, o := range limitSetOptions(l) {
		kv(strings.ReplaceAll(o[0], "-", "_"), o[1])
	}
	if t.Algorithm != concurrencyAlgorithm {
		kv("interval", shortDuration(time.Duration(t.IntervalNanos)))
	}
	kv("idle", shortDuration(t.Idle))
	kv("max_keys", t.MaxKeys)
	kv("live_keys", t.LiveKeys)
	tw.Flush()
}
