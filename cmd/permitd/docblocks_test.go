package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/permitd/permitd/cmd/internal/mddoc"
)

// The documentation's runnable blocks: every fenced block marked
// "<!-- doctest: NAME [on=OTHER] -->" in any Markdown file of the
// repository (cmd/internal/mddoc) is run here as a new user would run it,
// against real processes of the binary under test.

// repoRoot is the repository's root, from this package's folder.
var repoRoot = filepath.Join("..", "..")

// buildLine is the line the README's blocks build the binary with; the
// tests put their own build in its place.
const buildLine = "go build -o permitd ./cmd/permitd"

// docBlock is one marked block of the documentation.
type docBlock struct {
	// where is "FILE:LINE" of its fence.
	where string
	// name and on are its marker's.
	name, on string
	// lang is "sh" (sh, bash, shell), "python" or "go".
	lang string
	body string
}

// docExpect is what a block's run must show beyond exiting 0: text in its
// output (stdout and the bash -x trace), and text in files it wrote,
// relative to its directory.
type docExpect struct {
	out   []string
	files map[string][]string
}

// docExpects are the checks of the blocks the README and manuals build a
// newcomer's first hour on. Every name here must still be a marked block:
// a renamed or unmarked walkthrough fails instead of silently dropping out.
var docExpects = map[string]docExpect{
	"secure-cluster": {
		out: []string{"ID  ADDRESS", "leader", "granted"},
		files: map[string][]string{
			"secure/n1.log": {"listening: id=n1", "tls=true", "tokens=true", "permitd: stopped"},
			"secure/n2.log": {"permitd: stopped"}, "secure/n3.log": {"permitd: stopped"},
		},
	},
	"plain-cluster": {
		out: []string{"permitd " + testVersion + " (revision ", "ID  ADDRESS", "leader", "granted"},
		files: map[string][]string{
			"data/n1.log": {"listening: id=n1", "permitd: stopped"},
			"data/n2.log": {"permitd: stopped"}, "data/n3.log": {"permitd: stopped"},
		},
	},
}

// docBlocks returns the repository's marked blocks by name; it fails the
// test on a bad marker, a name used twice, an "on" naming no block (or a
// cycle), and a marked block in a language the runner does not know.
func docBlocks(t *testing.T) map[string]docBlock {
	t.Helper()
	docs, err := mddoc.Load(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]docBlock{}
	for _, d := range docs {
		for _, b := range d.Blocks {
			if b.Doctest == nil {
				continue
			}
			where := fmt.Sprintf("%s:%d", d.Path, b.Line)
			if b.Doctest.Err != "" {
				t.Errorf("%s: doctest marker: %s", where, b.Doctest.Err)
				continue
			}
			lang := map[string]string{"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "go": "go"}[b.Lang]
			if lang == "" {
				t.Errorf("%s: a doctest block in %q: the runner knows sh, bash, shell, python and go", where, b.Lang)
				continue
			}
			if prev, dup := out[b.Doctest.Name]; dup {
				t.Errorf("%s: doctest name %q is taken by %s", where, b.Doctest.Name, prev.where)
				continue
			}
			out[b.Doctest.Name] = docBlock{where: where, name: b.Doctest.Name, on: b.Doctest.On, lang: lang, body: b.Body}
		}
	}
	for _, b := range out {
		seen := map[string]bool{}
		for on := b; on.on != ""; on = out[on.on] {
			if _, ok := out[on.on]; !ok || seen[on.on] || out[on.on].lang != "sh" {
				t.Errorf("%s: doctest %q runs on %q, which is no shell block (or a cycle)", b.where, b.name, on.on)
				break
			}
			seen[on.on] = true
		}
	}
	return out
}

// docScript returns the bash script that runs block name as a reader
// would: the blocks it runs on first, then it, in one shell, in a folder
// holding the permitd binary.
func docScript(t *testing.T, blocks map[string]docBlock, name string) string {
	t.Helper()
	b := blocks[name]
	var base string
	if b.on != "" {
		base = docScript(t, blocks, b.on)
	}
	switch b.lang {
	case "python":
		return base + "PYTHONPATH=\"$DOCTEST_REPO/transport/client/python/src\" \"$DOCTEST_PYTHON\" - <<'DOCTEST_EOF'\n" + b.body + "DOCTEST_EOF\n"
	case "go":
		return base + "cat > doctest_" + name + ".go <<'DOCTEST_EOF'\n" + b.body + "DOCTEST_EOF\n" +
			"go -C \"$DOCTEST_REPO\" build -o \"$PWD/doctest_" + name + "\" \"$PWD/doctest_" + name + ".go\"\n./doctest_" + name + "\n"
	}
	var body strings.Builder
	for _, line := range strings.SplitAfter(b.body, "\n") {
		if strings.TrimSpace(line) != buildLine {
			body.WriteString(line)
		}
	}
	return base + body.String()
}

// stopJobs ends every script: the background agents and workers it
// started are stopped with SIGTERM (gracefully) and waited for (a job
// that ended already is no error).
const stopJobs = "kill $(jobs -p) 2>/dev/null || true\nwait\n"

// loopbackPort is a loopback address's port, or a port written as a
// prefix and a shell variable's digit ("127.0.0.1:710$i" for 7101, 7102
// and 7103 in a loop): the second group is then the variable's "$".
var loopbackPort = regexp.MustCompile(`127\.0\.0\.1:(\d{1,5})(\$\{?[A-Za-z_])?`)

// moveDocPorts replaces every 127.0.0.1:PORT of script by a free port,
// the same port for the same number throughout, so that blocks can run at
// the same time as each other and as the other tests. A port written as
// a prefix and a loop variable's digit moves to a prefix whose ten ports
// are free, and the literal ports of that prefix (7101 in
// --initial-cluster) with it.
func moveDocPorts(t *testing.T, script string) string {
	t.Helper()
	matches := loopbackPort.FindAllStringSubmatch(script, -1)
	prefixes := map[string]string{} // old prefix -> new
	for _, m := range matches {
		if m[2] != "" && prefixes[m[1]] == "" {
			prefixes[m[1]] = freePortPrefix(t)
		}
	}
	ports := map[string]string{} // old port -> new
	for _, m := range matches {
		if _, ok := prefixes[m[1][:len(m[1])-1]]; m[2] == "" && !ok && ports[m[1]] == "" {
			ports[m[1]] = strconv.Itoa(freePorts(t, 1)[0])
		}
	}
	return loopbackPort.ReplaceAllStringFunc(script, func(s string) string {
		m := loopbackPort.FindStringSubmatch(s)
		port, variable := m[1], m[2]
		switch to, ok := prefixes[port[:len(port)-1]]; {
		case variable != "":
			return "127.0.0.1:" + prefixes[port] + variable
		case ok:
			return "127.0.0.1:" + to + port[len(port)-1:]
		default:
			return "127.0.0.1:" + ports[port]
		}
	})
}

// freePortPrefix returns a 4-digit prefix whose ten 5-digit ports are
// all free now, from a pseudo-random start so that parallel tests rarely collide.
func freePortPrefix(t *testing.T) string {
	t.Helper()
	start := 2000 + int(time.Now().UnixNano()%4000)
	for i := 0; i < 4000; i++ {
		p := 2000 + (start+i)%4000 // ports 20000-59999
		ok := true
		var lns []net.Listener
		for d := 0; d < 10 && ok; d++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d%d", p, d))
			ok = err == nil
			if ok {
				lns = append(lns, ln)
			}
		}
		for _, ln := range lns {
			ln.Close()
		}
		if ok && !claimedPrefix(p) {
			return strconv.Itoa(p)
		}
	}
	t.Fatal("no 10 consecutive free ports")
	return ""
}

var (
	prefixMu      sync.Mutex
	prefixClaimed = map[int]bool{}
)

// claimedPrefix claims p for this test process, reporting whether an
// earlier call had (blocks run in parallel and ports are only tested
// free, not held).
func claimedPrefix(p int) bool {
	prefixMu.Lock()
	defer prefixMu.Unlock()
	if prefixClaimed[p] {
		return true
	}
	prefixClaimed[p] = true
	return false
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// docTools returns the tools script needs that this machine lacks.
func docTools(script string) (missing []string) {
	for tool, mark := range map[string]string{"curl": "curl ", "python3": "DOCTEST_PYTHON", "go": "DOCTEST_REPO\" build"} {
		if strings.Contains(script, mark) {
			if _, err := exec.LookPath(tool); err != nil {
				missing = append(missing, tool)
			}
		}
	}
	sort.Strings(missing)
	return missing
}

// runDocScript runs script with bash -e -x in dir, which holds the test's
// permitd binary, for at most 3 minutes, in its own process group; it
// fails the test with the output and the agents' logs if the script
// fails, and returns its output (stdout, then the trace). The output goes
// to files, not pipes, so that agents a failed script left running (they
// inherit its stdout) cannot hold the test: the group is killed as soon
// as bash exits.
func runDocScript(t *testing.T, dir, script string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "permitd")); err != nil {
		copyFile(t, buildPermitd(t), filepath.Join(dir, "permitd"))
	}
	if err := os.WriteFile(filepath.Join(dir, "doctest.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	outFile, traceFile := filepath.Join(t.TempDir(), "stdout"), filepath.Join(t.TempDir(), "trace")
	stdout, err := os.Create(outFile)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	trace, err := os.Create(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	defer trace.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-x", "doctest.sh")
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "DOCTEST_REPO="+root, "DOCTEST_PYTHON=python3", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stdout, cmd.Stderr = stdout, trace
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever a failed script left running
	out, _ := os.ReadFile(outFile)
	tr, _ := os.ReadFile(traceFile)
	if err != nil {
		t.Fatalf("the block failed: %v\nstdout:\n%s\ntrace (bash -x):\n%s\n%s", err, out, tr, docLogs(dir))
	}
	return string(out) + "\n" + string(tr)
}

// docLogs returns the *.log files a block wrote, one level deep.
func docLogs(dir string) string {
	var out strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		rel, _ := filepath.Rel(dir, l)
		fmt.Fprintf(&out, "--- %s:\n%s", rel, b)
	}
	return out.String()
}

// checkDocExpect checks a run's output and files against e.
func checkDocExpect(t *testing.T, name, dir, out string, e docExpect) {
	t.Helper()
	for _, want := range e.out {
		if !strings.Contains(out, want) {
			t.Errorf("doctest %s: the output lacks %q:\n%s", name, want, out)
		}
	}
	for file, wants := range e.files {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Errorf("doctest %s: %v", name, err)
			continue
		}
		for _, want := range wants {
			if !strings.Contains(string(b), want) {
				t.Errorf("doctest %s: %s lacks %q:\n%s", name, file, want, b)
			}
		}
	}
}

// skipDocBlocks skips t where the doc blocks cannot run.
func skipDocBlocks(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs clusters")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
}

// TestDocBlocks runs every marked block of the documentation as written,
// each in an empty folder holding the test's binary (the build line
// dropped, every loopback port moved to a free one, the background jobs
// stopped at the end), and checks the walkthroughs' output (docExpects).
// A block on another runs after it in the same shell. A block that needs
// a tool this machine lacks (curl, python3, go) is skipped, except that
// PERMITD_REQUIRE_PYTHON=1 (CI) makes a missing python3 a failure.
func TestDocBlocks(t *testing.T) {
	skipDocBlocks(t)
	blocks := docBlocks(t)
	for name := range docExpects {
		if _, ok := blocks[name]; !ok {
			t.Errorf("no block is marked <!-- doctest: %s -->: the walkthrough it checks was renamed or unmarked", name)
		}
	}
	names := make([]string, 0, len(blocks))
	for name := range blocks {
		names = append(names, name)
	}
	sort.Strings(names)
	buildPermitd(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			script := moveDocPorts(t, docScript(t, blocks, name)+stopJobs)
			if missing := docTools(script); len(missing) > 0 {
				if containsString(missing, "python3") && os.Getenv("PERMITD_REQUIRE_PYTHON") == "1" {
					t.Fatalf("%s: needs %v", blocks[name].where, missing)
				}
				t.Skipf("%s: needs %v", blocks[name].where, missing)
			}
			dir := t.TempDir()
			out := runDocScript(t, dir, script)
			checkDocExpect(t, name, dir, out, docExpects[name])
		})
	}
}

// TestDocWalkthroughsTwiceInAnyOrder runs the two cluster walkthroughs
// one after the other in one folder, twice, in both orders (secure,
// plain, secure, plain): a reader who follows the README, then the
// operations manual, then goes back, finds every step working (each
// walkthrough keeps to its own folder; certificates, tokens and limits
// that exist are kept or replaced, not an error).
func TestDocWalkthroughsTwiceInAnyOrder(t *testing.T) {
	skipDocBlocks(t)
	blocks := docBlocks(t)
	var script strings.Builder
	for _, name := range []string{"secure-cluster", "plain-cluster", "secure-cluster", "plain-cluster"} {
		if _, ok := blocks[name]; !ok {
			t.Fatalf("no block is marked <!-- doctest: %s -->", name)
		}
		fmt.Fprintf(&script, "echo '=== %s'\n%s%s", name, docScript(t, blocks, name), stopJobs)
	}
	dir := t.TempDir()
	out := runDocScript(t, dir, moveDocPorts(t, script.String()))
	if n := strings.Count(out, "=== "); n < 4 {
		t.Errorf("the runs printed %d of 4 headers:\n%s", n, out)
	}
	for _, name := range []string{"secure-cluster", "plain-cluster"} {
		checkDocExpect(t, name, dir, out, docExpects[name])
	}
}

// copyFile copies an executable.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
