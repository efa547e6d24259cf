// Package python_test runs the Python client's tests (transport/client/python)
// from `go test ./...`: it builds the permitd binary, runs the client's
// unittest suite against the real clusters that suite starts, and checks
// that the package installs with `pip install --no-build-isolation` into a
// fresh virtual environment. Without python3 (>= 3.9) it skips, or fails
// when PERMITD_REQUIRE_PYTHON=1 (CI).
package python_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// minPython is the oldest Python the client supports.
const minPython = "(3, 9)"

// python returns the python3 to use, or skips the test (fails it when
// PERMITD_REQUIRE_PYTHON=1, as CI sets: there a missing Python is a
// broken machine, not a reason to run nothing).
func python(t *testing.T) string {
	t.Helper()
	skip := skipOrFatal(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		skip("python3 not found in PATH: the Python client's tests need Python >= 3.9 (standard library only)")
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.version_info[:2] >= "+minPython+")").CombinedOutput()
	if err != nil {
		skip("%s does not run: %v: %s", py, err, out)
	}
	if strings.TrimSpace(string(out)) != "True" {
		v, _ := exec.Command(py, "--version").CombinedOutput()
		skip("%s is %s: the Python client needs Python >= 3.9", py, strings.TrimSpace(string(v)))
	}
	return py
}

// skipOrFatal returns t.Skipf, or t.Fatalf when PERMITD_REQUIRE_PYTHON=1
// (CI): there a Python that cannot run the tests is a broken machine.
func skipOrFatal(t *testing.T) func(format string, args ...any) {
	if os.Getenv("PERMITD_REQUIRE_PYTHON") == "1" {
		return t.Fatalf
	}
	return t.Skipf
}

// run runs cmd in its own process group with a deadline, kills whatever
// is left of the group afterwards (agents a failed suite left running),
// and returns its combined output.
func run(t *testing.T, timeout time.Duration, cmd *exec.Cmd) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		err = errors.New("timed out after " + timeout.String())
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return out.String(), err
}

// env is the environment for the Python processes: the caller's, without
// permitd settings that would leak into the tests, plus extra.
func env(extra ...string) []string {
	var e []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PERMITD_") || strings.HasPrefix(kv, "PYTHONPATH=") || strings.HasPrefix(kv, "PIP_") {
			continue
		}
		e = append(e, kv)
	}
	return append(e, extra...)
}

// The permitd binary, built once for the package's tests (permitdBinary)
// into binDir, which TestMain removes.
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binErr   error
	binBuild []byte
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// permitdBinary builds ./cmd/permitd once and returns its path.
func permitdBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "permitd-python-test-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "permitd")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		binBuild, binErr = exec.CommandContext(ctx, "go", "build", "-o", binPath, "github.com/permitd/permitd/cmd/permitd").CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("go build ./cmd/permitd: %v\n%s", binErr, binBuild)
	}
	return binPath
}

func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds permitd and runs clusters")
	}
	py := python(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := permitdBinary(t)

	t.Run("unittest", func(t *testing.T) {
		cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "tests", "-v")
		cmd.Dir = wd
		cmd.Env = env("PERMITD_BIN="+bin, "PYTHONPATH="+filepath.Join(wd, "src"), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
		start := time.Now()
		out, err := run(t, 4*time.Minute, cmd)
		t.Logf("python3 -m unittest discover -s tests -v (%.1fs):\n%s", time.Since(start).Seconds(), out)
		if err != nil {
			t.Fatalf("the Python client's tests failed: %v", err)
		}
		if !strings.Contains(out, "\nOK") || strings.Contains(out, "skipped=") {
			t.Fatalf("the Python client's tests did not all run and pass (see the log above)")
		}
	})

	t.Run("pip-install", func(t *testing.T) {
		// Install a copy, so that a setuptools that writes build/ and
		// *.egg-info into the source tree leaves the repository alone.
		src := filepath.Join(tmp, "src")
		for _, name := range []string{"pyproject.toml", "README.md", "MANIFEST.in", "src", "build_backend"} {
			if err := copyPath(filepath.Join(wd, name), filepath.Join(src, name)); err != nil {
				t.Fatal(err)
			}
		}
		venv := filepath.Join(tmp, "venv")
		if out, err := run(t, 2*time.Minute, exec.Command(py, "-m", "venv", "--system-site-packages", venv)); err != nil {
			skipOrFatal(t)("python3 -m venv does not work here (Debian: apt-get install python3-venv): %v\n%s", err, out)
		}
		pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", ".")
		pip.Dir = src
		pip.Env = env("PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PYTHONDONTWRITEBYTECODE=1")
		if out, err := run(t, 2*time.Minute, pip); err != nil {
			t.Fatalf("pip install --no-build-isolation .: %v\n%s", err, out)
		}
		imp := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
			"import permitd, sys; assert '/site-packages/' in permitd.__file__, permitd.__file__; print(permitd.__version__, permitd.__file__)")
		imp.Dir = tmp // not the source tree: the installed package must be the one imported
		imp.Env = env()
		out, err := run(t, time.Minute, imp)
		if err != nil {
			t.Fatalf("import permitd after pip install: %v\n%s", err, out)
		}
		t.Logf("installed: %s", strings.TrimSpace(out))
	})
}

// copyPath copies a file, or a directory tree, from to to.
func copyPath(from, to string) error {
	fi, err := os.Stat(from)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return os.CopyFS(to, os.DirFS(from))
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// exampleCluster starts the 3-node loopback cluster the manual's Python
// example runs against (the operations manual's plain cluster) and waits
// until it is healthy.
const exampleCluster = `mkdir -p data
IC=n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003
./permitd agent --id n1 --data-dir data/n1 --raft-addr 127.0.0.1:7001 --http-addr 127.0.0.1:8001 --initial-cluster $IC 2>data/n1.log &
./permitd agent --id n2 --data-dir data/n2 --raft-addr 127.0.0.1:7002 --http-addr 127.0.0.1:8002 --initial-cluster $IC 2>data/n2.log &
./permitd agent --id n3 --data-dir data/n3 --raft-addr 127.0.0.1:7003 --http-addr 127.0.0.1:8003 --initial-cluster $IC 2>data/n3.log &
./permitd status --servers 127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003 --wait 10s
`

// TestREADMEPythonExample runs the Python example of transport/README.md
// (the first ```python block of its "Python client" section) as written,
// with the client from the source tree, against a 3-node loopback cluster
// (exampleCluster, its fixed ports moved to free ones). The example puts
// its own limit, 1 per 6 s with the default expiry of 3 s: its calls must
// come at least I − E apart, and the manual's output, 6 s apart, is
// checked loosely (each gap within 1 s of it).
func TestREADMEPythonExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds permitd and runs a 3-node cluster for about 20 s")
	}
	py := python(t)
	if _, err := exec.LookPath("bash"); err != nil {
		skipOrFatal(t)("no bash")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	manual, err := os.ReadFile(filepath.Join(wd, "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	example := readmeBlock(t, string(manual), "Python client", "```python\n")
	// Free ports for the fixed ones (other packages' tests run clusters
	// on the same ports at the same time).
	ports := freePorts(t, 6)
	script := exampleCluster + "cat > example.py <<'PYEOF'\n" + example + "PYEOF\n" + py + " example.py > calls.txt\nkill %1 %2 %3; wait\n"
	for i, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003"} {
		script = strings.ReplaceAll(script, addr, "127.0.0.1:"+ports[i])
	}
	dir := t.TempDir()
	if err := os.Symlink(permitdBinary(t), filepath.Join(dir, "permitd")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "walkthrough.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-e", "walkthrough.sh")
	cmd.Dir = dir
	cmd.Env = env("PYTHONPATH="+filepath.Join(wd, "src"), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	out, err := run(t, 2*time.Minute, cmd)
	calls, _ := os.ReadFile(filepath.Join(dir, "calls.txt"))
	if err != nil {
		logs := ""
		for _, n := range []string{"n1", "n2", "n3"} {
			b, _ := os.ReadFile(filepath.Join(dir, "data", n+".log"))
			logs += "--- " + n + ".log:\n" + string(b)
		}
		t.Fatalf("the manual's Python example failed: %v\n%s\ncalls:\n%s\n%s", err, out, calls, logs)
	}
	var at []float64
	for _, line := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
		var i int
		var s float64
		if _, err := fmt.Sscanf(line, "call %d at %f", &i, &s); err != nil {
			t.Fatalf("example output line %q: %v", line, err)
		}
		at = append(at, s)
	}
	if len(at) != 3 {
		t.Fatalf("the example printed %d calls, want 3:\n%s", len(at), calls)
	}
	const intervalSeconds, expirySeconds = 6.0, 3.0
	for i := 1; i < len(at); i++ {
		gap := at[i] - at[i-1]
		if gap < intervalSeconds-expirySeconds || gap > intervalSeconds+1 {
			t.Errorf("calls %d and %d came %.3f s apart; want at least I − E = %.0f s (the guarantee) and about the interval, %.0f s (the manual's output)",
				i-1, i, gap, intervalSeconds-expirySeconds, intervalSeconds)
		}
	}
	t.Logf("the manual's Python example, run against a 3-node cluster:\n%s", calls)
}

// readmeBlock returns the first block opened by fence (such as "```sh\n")
// in the section "## heading" of a markdown document.
func readmeBlock(t *testing.T, readme, heading, fence string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## "+heading+"\n")
	if !ok {
		t.Fatalf(`the document has no "## %s" section`, heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, fence)
	if !ok {
		t.Fatalf("the %s section has no %q block", heading, strings.TrimSpace(fence))
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("unterminated block in the %s section", heading)
	}
	return block
}

// freePorts returns n ports that were free a moment ago, as strings.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
