package main

// permitd completion bash|zsh|fish: a shell completion script generated
// from the CLI's own tables. The commands come from the registry
// (commands), each group's subcommands and each command's flags from its
// own --help, which its cmdLine prints from the flags it defines: a new
// command, subcommand or flag is in the scripts with no edit here.

import (
	"bufio"
	"io"
	"maps"
	"slices"
	"strings"
)

func init() {
	register("completion", "print a shell completion script: bash, zsh or fish", runCompletion)
}

// completionShells are the shells completion writes scripts for, with
// their writers.
var completionShells = map[string]func(io.Writer, []cliCommand){
	"bash": writeBashCompletion,
	"zsh":  writeZshCompletion,
	"fish": writeFishCompletion,
}

// completionShellNames returns the shells of completionShells, sorted.
func completionShellNames() []string { return slices.Sorted(maps.Keys(completionShells)) }

func runCompletion(args []string, stdout, stderr io.Writer) int {
	shells := completionShellNames()
	c := newCmdLine("completion", "completion "+strings.Join(shells, "|"), `
Prints a completion script for the shell: commands, subcommands, flags and
the values of choice flags (--algorithm, --role, --log-level, ...).

  bash: source <(permitd completion bash)   (or write it to
        /etc/bash_completion.d/permitd)
  zsh:  source <(permitd completion zsh)    (or write it as _permitd to a
        folder of $fpath)
  fish: permitd completion fish > ~/.config/fish/completions/permitd.fish

Exit status: 0 ok; 2 usage error.
`, stdout, stderr)
	c.args("SHELL")
	if ok, code := c.parse(args); !ok {
		return code
	}
	write, ok := completionShells[c.arg(0)]
	if !ok {
		return c.usageErrorf("unknown shell %q; allowed: %s", c.arg(0), orList(shells))
	}
	write(stdout, cliTree())
	return exitOK
}

// cliCommand is a command as completion sees it: its words (the command,
// or the command and a subcommand), its subcommands if it is a group, its
// flags (without "--"), and the values of its choice flags (by flag name,
// from the flags themselves: the values they accept).
type cliCommand struct {
	words   []string
	subs    []string
	flags   []string
	choices map[string][]string
}

// cliTree returns every command and, for a group, every subcommand (each
// as its own cliCommand after the group's), in the registry's order.
// completion's own "subcommands" are the shells.
func cliTree() []cliCommand {
	var out []cliCommand
	for _, name := range commandNames() {
		if name == "completion" {
			out = append(out, cliCommand{words: []string{name}, subs: completionShellNames()})
			continue
		}
		help, cl := commandHelp(name)
		cmd := cliCommand{words: []string{name}, subs: helpSubcommands(help), flags: helpFlags(help), choices: flagChoices(cl)}
		out = append(out, cmd)
		for _, sub := range cmd.subs {
			help, cl := commandHelp(name, sub)
			out = append(out, cliCommand{words: []string{name, sub}, flags: helpFlags(help), choices: flagChoices(cl)})
		}
	}
	return out
}

// helpOf returns what "permitd WORDS... --help" prints.
func helpOf(words ...string) string {
	help, _ := commandHelp(words...)
	return help
}

// commandHelp returns what "permitd WORDS... --help" prints and the
// command line that printed it (nil for a group's help).
func commandHelp(words ...string) (string, *cmdLine) {
	var stdout usageCapture
	run(append(append([]string(nil), words...), "--help"), &stdout, io.Discard)
	return stdout.String(), stdout.cmd
}

// flagChoices returns the values of c's choice flags, by flag name (nil
// if it has none).
func flagChoices(c *cmdLine) map[string][]string {
	if c == nil {
		return nil
	}
	var out map[string][]string
	for _, name := range c.order {
		if v := c.values[name]; len(v.choices) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[name] = v.choices
		}
	}
	return out
}

// helpSubcommands returns the names a group's --help lists under
// "Subcommands:" (none for a plain command).
func helpSubcommands(help string) []string {
	return helpSection(help, "Subcommands:", func(line string) (string, bool) {
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			return "", false
		}
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		return name, true
	})
}

// helpFlags returns the flag names a command's --help lists under
// "Flags:" ("  --name TYPE" lines).
func helpFlags(help string) []string {
	return helpSection(help, "Flags:", func(line string) (string, bool) {
		rest, ok := strings.CutPrefix(line, "  --")
		if !ok {
			return "", false
		}
		name, _, _ := strings.Cut(rest, " ")
		return name, true
	})
}

// helpSection returns the items item finds in the lines after the line
// heading, up to the next empty line.
func helpSection(help, heading string, item func(line string) (string, bool)) []string {
	var out []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == heading:
			in = true
		case in && line == "":
			return out
		case in:
			if name, ok := item(line); ok {
				out = append(out, name)
			}
		}
	}
	return out
}

// topLevelWords are what may follow "permitd": the commands, "help" and
// the global flags.
func topLevelWords(tree []cliCommand) []string {
	var out []string
	for _, c := range tree {
		if len(c.words) == 1 {
			out = append(out, c.words[0])
		}
	}
	return append(out, "help", "--help", "--version")
}
