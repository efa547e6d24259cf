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
	"os"
	"os/exec"
	"path/filepath"
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
