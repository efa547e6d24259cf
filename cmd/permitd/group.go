package main

import (
	"fmt"
	"io"
	"strings"
)

// subcommand is one subcommand of a command group (limits, cluster).
type subcommand struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

// commandGroup is a command made of subcommands (permitd limits put, ...):
// its name, the description its --help prints, and its subcommands.
type commandGroup struct {
	name, description string
	subs              []subcommand
}

// run dispatches "permitd GROUP SUB ..." to sub's run, and answers
// "permitd GROUP --help" with the group's usage.
func (g commandGroup) run(args []string, stdout, stderr io.Writer) int {
	group, subs := g.name, g.subs
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "permitd %s: missing subcommand; allowed: %s (see permitd %s --help)\n", group, orList(names), group)
		return exitUsage
	}
	if args[0] == "help" && len(args) > 1 { // permitd limits help put
		args = []string{args[1], "--help"}
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		fmt.Fprintf(stdout, "Usage: permitd %s <subcommand> [arguments] [flags]\n\n%s\nSubcommands:\n", group, g.description)
		for _, s := range subs {
			fmt.Fprintf(stdout, "  %-13s %s\n", s.name, s.summary)
		}
		fmt.Fprintf(stdout, "\nRun \"permitd %s <subcommand> --help\" for its arguments and flags.\n", group)
		return exitOK
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(args[1:], stdout, stderr)
		}
	}
	hint := ""
	if strings.HasPrefix(args[0], "-") {
		hint = " (the subcommand comes first)"
	} else if best := closest(args[0], names); best != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", best)
	}
	fmt.Fprintf(stderr, "permitd %s: unknown subcommand %q%s; allowed: %s (see permitd %s --help)\n", group, args[0], hint, orList(names), group)
	return exitUsage
}
