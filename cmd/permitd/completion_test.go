package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// groupTables are the command groups' subcommand tables, by command.
var groupTables = map[string][]subcommand{
	"certs": certsSubcommands, "cluster": clusterSubcommands, "limits": limitsSubcommands,
	"snapshot": snapshotSubcommands, "tokens": tokensSubcommands, "templates": templatesSubcommands,
}

// completionScript runs "permitd completion SHELL" and returns the script.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"completion", shell}, &stdout, &stderr); code != exitOK {
		t.Fatalf("completion %s: exit %d: %s", shell, code, stderr.String())
	}
	return stdout.String()
}

// TestCompletionScriptsMentionEverything: each shell's script names every
// command, every subcommand of every group and, for a sample of commands,
// their flags; a group the table above misses fails the test too.
func TestCompletionScriptsMentionEverything(t *testing.T) {
	for _, name := range commandNames() {
		if _, ok := groupTables[name]; !ok && name != "completion" && strings.Contains(helpOf(name), "\nSubcommands:\n") {
			t.Errorf("permitd %s is a group missing from groupTables", name)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		script := completionScript(t, shell)
		words := map[string]bool{}
		for _, w := range strings.FieldsFunc(script, func(r rune) bool {
			return r == ' ' || r == '\n' || r == '"' || r == '(' || r == ')' || r == ';'
		}) {
			words[w] = true
		}
		for _, name := range commandNames() {
			if !words[name] {
				t.Errorf("%s script: no command %s", shell, name)
			}
		}
		for group, subs := range groupTables {
			for _, s := range subs {
				if !words[s.name] {
					t.Errorf("%s script: no subcommand %s %s", shell, group, s.name)
				}
			}
		}
		for _, sh := range []string{"bash", "zsh", "fish"} {
			if !words[sh] {
				t.Errorf("%s script: completion's shell %s missing", shell, sh)
			}
		}
		for _, flag := range []string{"servers", "tls-ca", "algorithm", "max-wait", "data-dir", "initial-cluster", "gossip-addr", "out"} {
			if !words["--"+flag] && !words[flag] {
				t.Errorf("%s script: no flag --%s", shell, flag)
			}
		}
	}
}

// TestCompletionScriptsParse: bash -n accepts the bash script; zsh -n and
// fish --no-execute accept theirs where those shells are installed.
func TestCompletionScriptsParse(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ shell, flag string }{{"bash", "-n"}, {"zsh", "-n"}, {"fish", "--no-execute"}} {
		path, err := exec.LookPath(tc.shell)
		if err != nil {
			t.Logf("%s not installed: its script's syntax is not checked", tc.shell)
			continue
		}
		file := filepath.Join(dir, "permitd."+tc.shell)
		if err := os.WriteFile(file, []byte(completionScript(t, tc.shell)), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, tc.flag, file).CombinedOutput(); err != nil {
			t.Errorf("%s %s: %v\n%s", tc.shell, tc.flag, err, out)
		}
	}
}

// shellAndScript returns the path of shell and of a file holding its
// completion script; it skips the test if the shell is not installed.
func shellAndScript(t *testing.T, shell string) (path, script string) {
	t.Helper()
	path, err := exec.LookPath(shell)
	if err != nil {
		t.Skip("no " + shell)
	}
	script = filepath.Join(t.TempDir(), "permitd."+shell)
	if err := os.WriteFile(script, []byte(completionScript(t, shell)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, script
}

// TestBashCompletionCompletes: the bash script, sourced, completes
// commands, subcommands and flags.
func TestBashCompletionCompletes(t *testing.T) {
	bash, file := shellAndScript(t, "bash")
	for _, tc := range []struct{ line, want string }{
		{"permitd sta", "status"},
		{"permitd limits lea", "lease-policy"},
		{"permitd limits put api --algo", "--algorithm"},
		{"permitd status --serv", "--servers"},
		{"permitd cluster show --servers h:1 --tls-c", "--tls-ca --tls-cert"},
		{"permitd reserve --servers h:1 api --max-w", "--max-wait"},
		{"permitd completion z", "zsh"},
		// The values of choice flags, as the flags validate them.
		{"permitd limits put api --algorithm ", "strict bursty warmup hybrid concurrency"},
		{"permitd limits put api --algorithm h", "hybrid"},
		{"permitd limits put api --algorithm = c", "concurrency"},                                // bash splits the words at "="
		{"permitd limits put api --algorithm =", "=strict =bursty =warmup =hybrid =concurrency"}, // (COMP_WORDBREAKS)
		{"permitd limits put api --algorithm=c", "--algorithm=concurrency"},                      // a COMP_WORDBREAKS without "="
		{"permitd limits put api --algorithm strict --r", "--rate"},
		{"permitd bench --algorithm ", "strict bursty warmup hybrid"},
		{"permitd tokens create --role ", "admin client worker"},
		{"permitd agent --log-level w", "warn"},
		{"permitd relay --log-format ", "text json"},
		{"permitd worker --register-protocol ", "binary http"},
	} {
		script := `source "$1"; COMP_WORDS=(` + tc.line + ` ""); [[ "$2" == *" " ]] || unset 'COMP_WORDS[${#COMP_WORDS[@]}-1]'
COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _permitd; echo "${COMPREPLY[*]}"`
		out, err := exec.Command(bash, "-c", script, "bash", file, tc.line).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("%q: completed to %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestCompletionUnknownShell: an unknown shell is a usage error listing
// the shells there are.
func TestCompletionUnknownShell(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"completion", "tcsh"}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("completion tcsh: exit %d, want %d", code, exitUsage)
	}
	msg := stderr.String()
	for _, want := range []string{`unknown shell "tcsh"`, "bash", "zsh", "fish"} {
		if !strings.Contains(msg, want) {
			t.Errorf("completion tcsh: %q does not say %q", msg, want)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("completion tcsh wrote a script: %q", stdout.String())
	}
}

// TestHelpListsCompletion: permitd --help lists the completion command.
func TestHelpListsCompletion(t *testing.T) {
	var stdout bytes.Buffer
	run([]string{"--help"}, &stdout, &stdout)
	if !strings.Contains(stdout.String(), "\n  completion ") {
		t.Errorf("permitd --help does not list completion:\n%s", stdout.String())
	}
}

// TestCompletionChoicesAreTheFlagsOwn: the values completion offers after
// a choice flag are the flag's own (the values it validates): each is
// accepted by the flag, and the flags named by the issue are among them.
// A choice flag completion did not see (a Check instead of OneOf or
// Choice) fails the test.
func TestCompletionChoicesAreTheFlagsOwn(t *testing.T) {
	seen := map[string][]string{}
	for _, c := range cliTree() {
		if len(c.choices) == 0 {
			continue
		}
		_, cl := commandHelp(c.words...)
		for flag, vals := range c.choices {
			seen[strings.Join(c.words, " ")+" --"+flag] = vals
			v := cl.values[flag]
			for _, val := range vals {
				if err := v.set(val); err != nil {
					t.Errorf("permitd %s --%s: completion offers %q, which the flag refuses: %v", strings.Join(c.words, " "), flag, val, err)
				}
			}
			if err := v.set("no-such-choice"); err == nil {
				t.Errorf("permitd %s --%s takes any value, yet completion offers only %q", strings.Join(c.words, " "), flag, vals)
			}
		}
	}
	for cmd, want := range map[string][]string{
		"limits put --algorithm": limitAlgorithms,
		"bench --algorithm":      algorithms,
		"tokens create --role":   {"admin", "client", "worker"},
		"agent --log-level":      logLevels,
		"agent --log-format":     logFormats,
		"worker --log-level":     logLevels,
		"relay --log-format":     logFormats,
		"demo --scene":           {"1", "2", "3", "all"},
	} {
		if got := seen[cmd]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("permitd %s: completion offers %q, want %q", cmd, got, want)
		}
	}
}

// TestFishCompletionCompletes: fish, given the fish script, completes the
// values of choice flags (fish's own complete -C, where fish is
// installed).
func TestFishCompletionCompletes(t *testing.T) {
	fish, file := shellAndScript(t, "fish")
	for _, tc := range []struct{ line, want string }{
		{"permitd limits put api --algorithm ", "strict bursty warmup hybrid concurrency"},
		{"permitd limits put api --algorithm=w", "--algorithm=warmup"},
		{"permitd tokens create --role ", "admin client worker"},
		{"permitd agent --log-format ", "text json"},
	} {
		out, err := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, file, tc.line).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			word, _, _ := strings.Cut(l, "\t")
			got = append(got, word)
		}
		want := strings.Fields(tc.want)
		slices.Sort(got) // fish sorts them its own way
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q: completed to %q, want %q", tc.line, got, tc.want)
		}
	}
}
