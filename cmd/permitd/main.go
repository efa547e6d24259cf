package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	commands[name] = command{summary: summary, run: run}
}

// commandNames returns the commands' names, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: permitd <command> [arguments] [flags]

permitd is a consensus-backed distributed permit register (rate limiter).

Commands:
`)
	width := 0
	for _, n := range commandNames() {
		width = max(width, len(n))
	}
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-*s %s\n", width, n, commands[n].summary)
	}
	fmt.Fprint(w, `
Run "permitd <command> --help" (or "permitd help <command>") for a command's
arguments and flags. Flags and arguments may come in any order; "--" ends
the flags.

Exit status: 0 ok; 1 failure (or, for status, a degraded cluster);
2 usage error: bad flags, arguments, config or input, nothing changed;
3 reserve refused;
`+exitDeniedText+`
Quick start: "permitd demo" runs a 3-node cluster in one process and
checks three of its promises, each with a PASS or FAIL verdict (~35 s).
`)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "permitd: missing command; allowed: %s (see permitd --help)\n", strings.Join(commandNames(), ", "))
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "-help":
		usage(stdout)
		return exitOK
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return exitOK
		}
		return run(append(append([]string(nil), args[1:]...), "--help"), stdout, stderr)
	case "--version", "-version":
		return run(append([]string{"version"}, args[1:]...), stdout, stderr)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		hint := ""
		if best := closest(args[0], commandNames()); best != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", best)
		}
		fmt.Fprintf(stderr, "permitd: unknown command %q%s (see permitd --help)\n", args[0], hint)
		return exitUsage
	}
	return cmd.run(args[1:], stdout, stderr)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
