package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/permitd/permitd/cmd/internal/mddoc"
)

// Every flag the documentation mentions exists: each "permitd COMMAND
// ... --flag" in a code block or an inline code span is checked against
// that command's --help (the same flag lists shell completion reads), and
// a bare "--flag" span in prose against every command's flags.

// externalFlags are flags the documentation names for other programs
// (go, curl, pip, load generators), allowed in bare inline spans.
var externalFlags = map[string]string{
	"no-build-isolation": "pip install",
	"cacert":             "curl",
	"data-binary":        "curl",
	"fail":               "curl",
}

// docFlagScope says whether a document's bare flag spans are permitd's:
// jepsen-lite's manual names its own program's flags, which the checks
// below do not know.
func docFlagScope(path string) bool { return !strings.HasPrefix(path, "jepsen-lite/") }

// shellSeparators split a command line into the simple commands on it.
var shellSeparators = regexp.MustCompile("&&|\\|\\||[|;&()`]|\\$\\(")

// flagViolations returns one line per flag of docs that tree does not
// know: in a permitd command line, a flag that command lacks; in a bare
// inline span of a permitd document, a flag no command has.
func flagViolations(docs []*mddoc.Doc, tree []cliCommand) []string {
	byWords := map[string][]string{}
	any := map[string]bool{"help": true, "version": true}
	for _, c := range tree {
		byWords[strings.Join(c.words, " ")] = c.flags
		for _, f := range c.flags {
			any[f] = true
		}
	}
	var out []string
	check := func(where string, line string, bare bool) {
		for _, seg := range shellSeparators.Split(line, -1) {
			words := strings.Fields(seg)
			if v := commandFlagViolation(words, byWords); v != "" {
				out = append(out, where+": "+v)
				continue
			}
			if bare && len(words) > 0 && strings.HasPrefix(words[0], "--") && len(words[0]) > 2 {
				name, _, _ := strings.Cut(strings.TrimPrefix(words[0], "--"), "=")
				if _, ext := externalFlags[name]; !any[name] && !ext {
					out = append(out, fmt.Sprintf("%s: %q: no permitd command has --%s", where, seg, name))
				}
			}
		}
	}
	for _, d := range docs {
		for _, b := range d.Blocks {
			if b.Lang == "go" || b.Lang == "python" || b.Lang == "json" {
				continue
			}
			for i, line := range strings.Split(strings.ReplaceAll(b.Body, "\\\n", " "), "\n") {
				check(fmt.Sprintf("%s:%d", d.Path, b.Line+1+i), line, false)
			}
		}
		for _, s := range d.Inline {
			check(fmt.Sprintf("%s:%d", d.Path, s.Line), s.Text, docFlagScope(d.Path))
		}
	}
	return out
}

// commandFlagViolation checks one simple command: if it runs permitd
// (permitd, ./permitd, a path ending in /permitd, go run ./cmd/permitd)
// with a known command, every --flag after it must be that command's.
func commandFlagViolation(words []string, byWords map[string][]string) string {
	at := -1
	for i, w := range words {
		if w == "permitd" || (strings.HasSuffix(w, "/permitd") && (w != "./cmd/permitd" || (i >= 2 && words[i-2] == "go" && words[i-1] == "run"))) {
			at = i
			break
		}
	}
	if at < 0 || at+1 >= len(words) {
		return ""
	}
	args := words[at+1:]
	cmd := args[0]
	if len(args) > 1 {
		if _, ok := byWords[args[0]+" "+args[1]]; ok {
			cmd = args[0] + " " + args[1]
		}
	}
	flags, ok := byWords[cmd]
	if !ok {
		return ""
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		name, isFlag := strings.CutPrefix(a, "--")
		name, _, _ = strings.Cut(name, "=")
		name = strings.Trim(name, `"',.`)
		if !isFlag || name == "" || name == "help" || containsString(flags, name) {
			continue
		}
		hint := ""
		if best := closest(name, flags); best != "" {
			hint = fmt.Sprintf(" (did you mean --%s?)", best)
		}
		return fmt.Sprintf("%q: permitd %s has no --%s%s", strings.Join(words[at:], " "), cmd, name, hint)
	}
	return ""
}

// TestDocFlagsExist: no Markdown file of the repository mentions a
// permitd flag that does not exist.
func TestDocFlagsExist(t *testing.T) {
	docs, err := mddoc.Load(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range flagViolations(docs, cliTree()) {
		t.Error(v)
	}
}

// TestDocFlagCheckCatchesAMissingFlag: a flag a command lacks, in a shell
// block and in an inline span, and a bare span naming no command's flag,
// are reported; flags of the right command, another program's flags and
// values after "--" are not.
func TestDocFlagCheckCatchesAMissingFlag(t *testing.T) {
	doc := mddoc.Parse("cmd/permitd/README.md", "```sh\n"+
		"./permitd limits put api --algorithm strict --rate 1 \\\n  --per 6s --burst-size 3\n"+
		"PERMITD_TOKEN=x ./permitd reserve api --max-wait 1s && curl -sf --cacert ca.crt http://x\n"+
		"./permitd status -- --not-a-flag\n"+
		"```\n"+
		"Run `go run ./cmd/permitd status --wiat 10s`, then `--max-reserved`, `--gone`, `--no-build-isolation`.\n")
	got := flagViolations([]*mddoc.Doc{doc}, cliTree())
	want := []string{
		`cmd/permitd/README.md:2: "./permitd limits put api --algorithm strict --rate 1 --per 6s --burst-size 3": permitd limits put has no --burst-size`,
		`cmd/permitd/README.md:7: "./cmd/permitd status --wiat 10s": permitd status has no --wiat`,
		`cmd/permitd/README.md:7: "--gone": no permitd command has --gone`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("flagViolations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
