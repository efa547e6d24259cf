package main

// The parsing layer every subcommand uses.
//
// A subcommand describes its flags (typed, validated values: clivalues.go)
// and its positional arguments to a cmdLine, which parses the command line:
//
//   - flags and positional arguments may be interleaved
//     (permitd limits put api --rate 1 --per 6s and
//     permitd limits put --rate 1 api --per 6s mean the same); "--" ends
//     the flags;
//   - the number of positional arguments is checked: a stray word is an
//     error, never silently dropped (the flag package stops at the first
//     non-flag word, so "--rate 1 oops --per 6s" used to ignore --per);
//   - every parse error is one line on stderr naming the command, followed
//     by a pointer to its --help, and exit status 2; --help prints the
//     full usage on stdout with exit status 0;
//   - a value is validated when it is set, with a message as precise as
//     the HTTP API's ("--per \"60\" is not a duration: a number needs a
//     unit, such as \"60s\" or \"60ms\"; ..."), whether it came from the
//     command line, a config file or an environment variable (config.go).
//
// Why the standard flag package with this thin layer, and not cobra, kong
// or ff: the messages the CLI owes its users (HTTP-API-quality value
// errors; config and environment errors naming the file, line, key or
// variable; one line and a --help pointer instead of a usage dump) need
// code of our own with any of them; the remaining gap, interleaving and
// argument counts, is about fifty lines here. cobra brings pflag and
// prints the usage on every error unless told not to, and needs viper (a
// large tree) or code like ours for config files; kong's config resolvers
// ignore unknown keys and its env/config precedence is not ours; ff v3
// parses with the flag package (no interleaving). The binary keeps no CLI
// dependency at all.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit statuses of every command (see the README's table).
const (
	// exitOK: the command did what was asked.
	exitOK = 0
	// exitFailure: it could not (a server error, a limit not found, no
	// server reachable), or, for status, the cluster is degraded.
	exitFailure = 1
	// exitUsage: the command line, config file or environment was invalid
	// (or the server rejected the request as invalid); nothing changed.
	exitUsage = 2
	// exitRefused: reserve was refused (no permit within --max-wait).
	exitRefused = 3
	// exitDenied: the server refused the credentials: no token, an
	// unknown or revoked one (401), or one without the role or the
	// limit (403); nothing changed.
	exitDenied = 4
)

// exitDeniedText is the help's words for exitDenied, in the help of
// permitd and of every command that can exit with it (cli_exit_test.go
// checks that these are the same commands).
const exitDeniedText = "4 the server refused the credentials: no token, an unknown or revoked\none (401), or one without the role or the limit (403); nothing changed.\n"

// cmdLine is one subcommand's command line: its flags, its positional
// arguments and its usage text.
type cmdLine struct {
	// name is the command as typed after "permitd" ("limits put").
	name string
	// synopsis and description make the --help text, before the flags.
	synopsis, description string
	fs                    *flag.FlagSet
	// argNames names the positional arguments; exactly that many are
	// required.
	argNames []string
	// pos holds the positional arguments after parse.
	pos []string
	// values are the flags defined through this cmdLine, by name.
	values map[string]*value
	// order is the definition order of the flags (--help lists them so).
	order []string
	// fromEnv names, by flag, the environment variable that set it (see
	// loadSettings).
	envSources map[string]string
	// env maps the flags the environment may set to their variables
	// (fromEnv, env.go).
	env map[string]string
	// envSet are the flags parse set from their variables.
	envSet map[string]bool
	// failed is the last error of a value's Set during parse.
	failed *flagError
	// parsing is true while the command line is parsed.
	parsing bool

	stdout, stderr io.Writer
}

// flagError is a value a flag rejected.
type flagError struct {
	name, value string
	err         error
}

func (e *flagError) Error() string {
	if strings.HasPrefix(e.err.Error(), "needs a value") {
		return "flag --" + e.name + " " + e.err.Error()
	}
	return "--" + e.name + " " + e.err.Error()
}

// looksLikeFlag reports whether s is a defined flag ("--name", "-name",
// "--name=value").
func (c *cmdLine) looksLikeFlag(s string) bool {
	if !strings.HasPrefix(s, "-") {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimLeft(s, "-"), "=")
	return name != "" && (c.fs.Lookup(name) != nil || name == "h" || name == "help")
}

// newCmdLine returns the command line of "permitd NAME". synopsis is the
// usage line(s) without "Usage: "; description follows it in --help.
func newCmdLine(name, synopsis, description string, stdout, stderr io.Writer) *cmdLine {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdLine{name: name, synopsis: synopsis, description: description, fs: fs,
		values: map[string]*value{}, stdout: stdout, stderr: stderr}
}

// args declares the positional arguments, all required (names such as
// "NAME" or "ID", used in messages).
func (c *cmdLine) args(names ...string) { c.argNames = names }

// arg returns positional argument i after a successful parse.
func (c *cmdLine) arg(i int) string { return c.pos[i] }

// isSet reports whether flag name was given (on the command line, or
// from a config file or the environment).
func (c *cmdLine) isSet(name string) bool {
	set := false
	c.fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// parse parses args. When it returns false the command must exit with
// code: 0 after --help (usage printed on stdout), 2 after an error
// (reported as one line on stderr).
func (c *cmdLine) parse(args []string) (ok bool, code int) {
	c.parsing = true
	defer func() { c.parsing = false }()
	rest := args
	strayAfter := ""          // the word before the first extra argument
	for range len(args) + 1 { // each round consumes at least one argument
		c.failed = nil
		err := c.fs.Parse(rest)
		if errors.Is(err, flag.ErrHelp) {
			c.printUsage(c.stdout)
			return false, exitOK
		}
		if err != nil {
			return false, c.usageError(c.parseErrorText(err))
		}
		left := c.fs.Args()
		if len(left) == 0 {
			break
		}
		consumed := len(rest) - len(left)
		if consumed > 0 && rest[consumed-1] == "--" {
			// "--" ends the flags: everything after it is positional.
			c.pos = append(c.pos, left...)
			break
		}
		if len(c.pos) == len(c.argNames) && consumed > 0 {
			strayAfter = rest[consumed-1]
		}
		c.pos = append(c.pos, left[0])
		rest = left[1:]
	}
	switch {
	case len(c.pos) > len(c.argNames):
		stray := c.pos[len(c.argNames)]
		hint := ""
		name, _, _ := strings.Cut(strings.TrimLeft(strayAfter, "-"), "=")
		if v, ok := c.values[name]; ok && v.kind == kindBool && (stray == "true" || stray == "false") {
			hint = fmt.Sprintf(" (a boolean flag takes its value after \"=\", as in --%s=%s)", name, stray)
		} else if strings.HasPrefix(stray, "-") {
			hint = " (after \"--\" every word is an argument)"
		}
		return false, c.usageError(fmt.Sprintf("unexpected argument %q%s", stray, hint))
	case len(c.pos) < len(c.argNames):
		return false, c.usageError("missing argument " + c.argNames[len(c.pos)])
	}
	c.parsing = false // the environment's values are never flags
	if err := c.applyEnv(); err != nil {
		return false, c.usageError(err.Error())
	}
	return true, exitOK
}

// parseErrorText turns an error of the flag package into our wording.
func (c *cmdLine) parseErrorText(err error) string {
	if c.failed != nil {
		return c.failed.Error()
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name + c.suggestFlag(name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag --" + name + " needs a value"
	}
	return msg
}

// suggestFlag returns " (did you mean --X?)" for the defined flag closest
// to name, or "".
func (c *cmdLine) suggestFlag(name string) string {
	var names []string
	c.fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if best := closest(name, names); best != "" {
		return " (did you mean --" + best + "?)"
	}
	return ""
}

// usageError reports msg as one line with the --help pointer and returns
// exitUsage.
func (c *cmdLine) usageError(msg string) int {
	fmt.Fprintf(c.stderr, "permitd %s: %s (see permitd %s --help)\n", c.name, oneLine(msg), c.name)
	return exitUsage
}

// usageErrorf is usageError with a format.
func (c *cmdLine) usageErrorf(format string, args ...any) int {
	return c.usageError(fmt.Sprintf(format, args...))
}

// fail reports a failure (not a usage error) as one line and returns code.
func (c *cmdLine) fail(code int, err error) int {
	fmt.Fprintf(c.stderr, "permitd %s: %s\n", c.name, c.cliHints(oneLine(describeError(err))))
	return code
}

// usageCapture is a writer that, given as a command's stdout with
// --help, also receives the command's cmdLine (helpOf: completion reads
// its flags' choices).
type usageCapture struct {
	bytes.Buffer
	cmd *cmdLine
}

// printUsage writes the full usage: synopsis, description and flags.
func (c *cmdLine) printUsage(w io.Writer) {
	if u, ok := w.(*usageCapture); ok {
		u.cmd = c
	}
	fmt.Fprintf(w, "Usage: permitd %s\n", c.synopsis)
	if c.description != "" {
		fmt.Fprintf(w, "\n%s", strings.TrimLeft(c.description, "\n"))
		if !strings.HasSuffix(c.description, "\n") {
			fmt.Fprintln(w)
		}
	}
	if len(c.order) > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		for _, name := range c.order {
			v := c.values[name]
			f := c.fs.Lookup(name)
			head := "  --" + name
			if v.typ != "" {
				head += " " + v.typ
			}
			fmt.Fprintln(w, head)
			usage := f.Usage
			if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "0s" {
				usage += fmt.Sprintf(" (default %s)", def)
			}
			if key, ok := c.env[name]; ok {
				usage += fmt.Sprintf(" (env $%s)", key)
			}
			fmt.Fprintf(w, "        %s\n", usage)
		}
	}
}

// oneLine replaces line breaks so that a message stays on one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// closest returns the candidate nearest to s by edit distance, if it is
// near enough to be a likely typo (at most 2 edits, or 1 for short words),
// else "".
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	if len(s) <= 4 {
		bestD = 2
	}
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
