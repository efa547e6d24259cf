package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cliResult is one run of the binary.
type cliResult struct {
	args           []string
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// String shows the run for failure messages.
func (r cliResult) String() string {
	return fmt.Sprintf("permitd %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// cleanEnv is the test's environment without PERMITD_* variables (a
// developer's own settings must not leak into the commands under test).
// Unless GORACE is set, the race-enabled binary's exit is not delayed by
// the race runtime's default second (atexit_sleep_ms=1000), which a
// hundred CLI runs would pay in full.
func cleanEnv() []string {
	var out []string
	gorace := false
	for _, kv := range os.Environ() {
		gorace = gorace || strings.HasPrefix(kv, "GORACE=")
		if !strings.HasPrefix(kv, envPrefix) {
			out = append(out, kv)
		}
	}
	if !gorace {
		out = append(out, "GORACE=atexit_sleep_ms=10")
	}
	return out
}

// runCLI runs the binary with args and extra environment variables to
// completion (at most a minute) and returns what it did.
func runCLI(t *testing.T, bin string, env []string, args ...string) cliResult {
	t.Helper()
	r, err := runCLIErr(bin, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runCLIErr is runCLI for any goroutine: it returns what runCLI fails on.
func runCLIErr(bin string, env []string, args ...string) (cliResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	case err != nil:
		return r, fmt.Errorf("permitd %s: %w", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		return r, fmt.Errorf("permitd %s did not finish within a minute", strings.Join(args, " "))
	}
	return r, nil
}

// runParallel runs the binary once per argument list, four at a time,
// and returns the results in order.
func runParallel(t *testing.T, bin string, cases [][]string) []cliResult {
	t.Helper()
	out := make([]cliResult, len(cases))
	errs := make([]error, len(cases))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, args := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = runCLIErr(bin, nil, args...)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// wantCode fails the test unless r exited with code.
func wantCode(t *testing.T, r cliResult, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %v", code, r)
	}
}

// wantUsageError checks the shape of a usage error: exit 2, nothing on
// stdout, one line on stderr that contains want and ends with the pointer
// to the command's --help, given once.
func wantUsageError(t *testing.T, r cliResult, want string) {
	t.Helper()
	if r.code != exitUsage || r.stdout != "" {
		t.Fatalf("want exit 2 and no output, got %v", r)
	}
	line := strings.TrimSuffix(r.stderr, "\n")
	if strings.Contains(line, "\n") || !strings.HasPrefix(line, "permitd") {
		t.Fatalf("want one line on stderr, got %q", r.stderr)
	}
	if !strings.Contains(line, want) {
		t.Fatalf("stderr %q does not contain %q", line, want)
	}
	if !strings.HasSuffix(line, " --help)") {
		t.Fatalf("stderr %q does not end with the --help pointer", line)
	}
	if n := strings.Count(line, "--help)"); n != 1 {
		t.Fatalf("stderr %q points to --help %d times, want once", line, n)
	}
}

// lockedBuffer is a bytes.Buffer safe for a process writing to it while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testAgent is one agent process.
type testAgent struct {
	id, raftAddr, httpAddr, dataDir string
	cmd                             *exec.Cmd
	log                             *lockedBuffer // stdout and stderr
	exited                          chan struct{}
	waitErr                         error
}

// start runs bin with args and extra environment; the log collects its
// output.
func (a *testAgent) start(t *testing.T, bin string, env []string, args ...string) {
	t.Helper()
	a.cmd = exec.Command(bin, args...)
	a.cmd.Env = append(cleanEnv(), env...)
	if a.log == nil {
		a.log = &lockedBuffer{}
	}
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", a.id, err)
	}
	a.exited = make(chan struct{})
	go func() {
		a.waitErr = a.cmd.Wait()
		close(a.exited)
	}()
}

// signal sends sig and waits (at most 20 s) for the process to exit.
func (a *testAgent) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if a.cmd == nil {
		return
	}
	select {
	case <-a.exited:
		return
	default:
	}
	_ = a.cmd.Process.Signal(sig)
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
		t.Errorf("%s did not exit within 20 s of %v", a.id, sig)
	}
}

// newTestAgents returns n agents n1..nN on free loopback ports with fresh
// data directories (not started).
func newTestAgents(t *testing.T, n int) []*testAgent {
	t.Helper()
	ports := freePorts(t, 2*n)
	agents := make([]*testAgent, n)
	for i := range agents {
		agents[i] = &testAgent{id: fmt.Sprintf("n%d", i+1), raftAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			httpAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]), dataDir: t.TempDir()}
	}
	t.Cleanup(func() {
		for _, a := range agents {
			a.signal(t, syscall.SIGKILL)
		}
		if t.Failed() {
			for _, a := range agents {
				if a.log != nil {
					t.Logf("--- %s log:\n%s", a.id, a.log.String())
				}
			}
		}
	})
	return agents
}

// startLoneAgent starts n1, a one-node cluster, with the agent flags
// extra besides its addresses and data directory, and returns it; callers
// wait for its leader as they need to.
func startLoneAgent(t *testing.T, bin string, extra ...string) *testAgent {
	t.Helper()
	agents := newTestAgents(t, 1)
	a := agents[0]
	args := []string{"agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
		"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(agents)}
	a.start(t, bin, nil, append(args, extra...)...)
	return a
}

// startLeadingLoneAgent is startLoneAgent once the agent leads, with an
// HTTP client for it.
func startLeadingLoneAgent(t *testing.T, bin string) (*testAgent, *http.Client) {
	t.Helper()
	a := startLoneAgent(t, bin)
	hc := &http.Client{Timeout: 5 * time.Second}
	waitLeader(t, hc, map[string]string{a.id: a.httpAddr}, []string{a.id})
	return a, hc
}

// initialCluster is the --initial-cluster value of agents.
func initialCluster(agents []*testAgent) string {
	var items []string
	for _, a := range agents {
		items = append(items, a.id+"="+a.raftAddr)
	}
	return strings.Join(items, ",")
}

// serversOf is the --servers value of agents.
func serversOf(agents ...*testAgent) string {
	var addrs []string
	for _, a := range agents {
		addrs = append(addrs, a.httpAddr)
	}
	return strings.Join(addrs, ",")
}
