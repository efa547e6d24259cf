package process

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newShell supervises `sh -c script`, logging into the test's temp dir.
func newShell(t *testing.T, name, script string) *Supervisor {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	s := New(Spec{Name: name, Label: "test " + name, LogPath: filepath.Join(t.TempDir(), name+".log"),
		Command: func() (string, []string) { return "sh", []string{"-c", script} }, Logf: t.Logf})
	t.Cleanup(func() { s.Stop(time.Second) })
	return s
}

// procState returns the state letter of pid in /proc (R, S, T, ...), or
// "" without /proc.
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

// waitFor polls cond until it holds or 10 s have passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, "%s: not within 10s", what)
}

// TestSupervisorLifecycle: start, pause, resume, kill -9, restart; the
// generations count, the log holds one marker per start, and nothing
// counts as an unexpected exit.
func TestSupervisorLifecycle(t *testing.T) {
	s := newShell(t, "n1", "echo hello; exec sleep 60")
	st := s.State()
	require.False(t, st.Up, "before start: %+v", st)
	require.Equal(t, 0, st.Generation, "before start: %+v", st)
	require.ErrorIs(t, s.Pause(), ErrNotRunning, "pause before start")
	// hellos: the output lines, not the marker lines' command.
	hellos := func(n int) func() bool {
		return func() bool { b, _ := s.Log(); return strings.Count(string(b), "\nhello\n") == n }
	}
	gen, err := s.Start()
	require.NoError(t, err, "start")
	require.Equal(t, 1, gen, "start")
	waitFor(t, "first output", hellos(1))
	_, err = s.Start()
	require.ErrorContains(t, err, "already running", "second start")
	st = s.State()
	require.True(t, st.Up, "after start: %+v", st)
	require.False(t, st.Paused, "after start: %+v", st)
	require.NotZero(t, st.Pid, "after start: %+v", st)
	require.NoError(t, s.Pause())
	require.True(t, s.State().Paused, "not paused")
	if ps := procState(t, st.Pid); ps != "" {
		waitFor(t, "SIGSTOP", func() bool { return procState(t, st.Pid) == "T" })
	}
	require.NoError(t, s.Resume())
	if ps := procState(t, st.Pid); ps != "" {
		waitFor(t, "SIGCONT", func() bool { return procState(t, st.Pid) != "T" })
	}
	require.NoError(t, s.Pause()) // killed while paused
	require.NoError(t, s.Kill())
	st = s.State()
	require.False(t, st.Up, "after kill: %+v", st)
	require.False(t, st.Paused, "after kill: %+v", st)
	require.Equal(t, 1, st.Generation, "after kill: %+v", st)
	require.NoError(t, s.Kill(), "kill while down")
	gen, err = s.Start()
	require.NoError(t, err, "restart")
	require.Equal(t, 2, gen, "restart")
	waitFor(t, "second output", hellos(2))
	gen, err = s.Restart()
	require.NoError(t, err, "Restart")
	require.Equal(t, 3, gen, "Restart")
	waitFor(t, "third output", hellos(3))
	require.Equal(t, 2, s.Restarts(), "restarts")
	s.Stop(time.Second)
	st = s.State()
	require.False(t, st.Up, "after stop: %+v", st)
	require.Empty(t, s.UnexpectedExits(), "unexpected exits")
	log, err := s.Log()
	require.NoError(t, err)
	for _, g := range []string{"1", "2", "3"} {
		assert.Contains(t, string(log), "=== jepsen-lite: starting n1 (generation "+g+") at ", "log lacks the marker of generation %s", g)
	}
}

// TestSupervisorUnexpectedExit: a process that exits by itself is
// reported, and still is after the next start.
func TestSupervisorUnexpectedExit(t *testing.T) {
	s := newShell(t, "w1", "exit 3")
	_, err := s.Start()
	require.NoError(t, err)
	waitFor(t, "exit", s.Exited)
	st := s.State()
	require.False(t, st.Up, "exited but up: %+v", st)
	x := s.UnexpectedExits()
	require.Len(t, x, 1, "unexpected exits")
	require.True(t, strings.HasPrefix(x[0], "w1 (pid "), "unexpected exits %v", x)
	_, err = s.Start()
	require.NoError(t, err)
	waitFor(t, "second exit", s.Exited)
	require.Len(t, s.UnexpectedExits(), 2, "unexpected exits: want both processes")
}

// TestSupervisorStopEscalates: a process that ignores SIGTERM is killed
// after the grace period.
func TestSupervisorStopEscalates(t *testing.T) {
	s := newShell(t, "stubborn", `trap "" TERM; echo ready; while :; do sleep 1; done`)
	_, err := s.Start()
	require.NoError(t, err)
	waitFor(t, "trap set", func() bool { b, _ := s.Log(); return strings.Contains(string(b), "ready") })
	start := time.Now()
	s.Stop(100 * time.Millisecond)
	st := s.State()
	require.False(t, st.Up, "after stop: %+v", st)
	require.LessOrEqual(t, time.Since(start), 5*time.Second, "stop took too long")
	require.Empty(t, s.UnexpectedExits(), "unexpected exits")
}

// TestWaitReady: ready once the probe passes; an exit ends the wait with
// Exited; a deadline ends it with the probe's last error.
func TestWaitReady(t *testing.T) {
	s := newShell(t, "n2", "exec sleep 60")
	_, err := s.Start()
	require.NoError(t, err)
	calls := 0
	err = s.WaitReady(t.Context(), time.Now().Add(10*time.Second), time.Millisecond, func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("503")
		}
		return nil
	})
	require.NoError(t, err, "ready")
	require.Equal(t, 3, calls, "ready after calls")
	notYet := errors.New("connection refused")
	err = s.WaitReady(t.Context(), time.Now(), time.Millisecond, func(context.Context) error { return notYet })
	var nr *NotReadyError
	require.ErrorAs(t, err, &nr, "deadline")
	require.False(t, nr.Exited, "deadline: %v", err)
	require.ErrorIs(t, err, notYet, "deadline")

	x := newShell(t, "n3", "exit 1")
	_, err = x.Start()
	require.NoError(t, err)
	err = x.WaitReady(t.Context(), time.Now().Add(10*time.Second), time.Millisecond, func(context.Context) error { return notYet })
	require.ErrorAs(t, err, &nr, "exited")
	require.True(t, nr.Exited, "exited: %v", err)
	require.ErrorContains(t, err, "exited")
}

// TestSupervisorEnv: Spec.Env reaches the process on top of the runner's
// environment, and stays out of the log's marker line.
func TestSupervisorEnv(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	t.Setenv("JL_INHERITED", "kept")
	s := New(Spec{Name: "w1", LogPath: filepath.Join(t.TempDir(), "w1.log"), Env: []string{"JL_SECRET=s3cr3t"},
		Command: func() (string, []string) {
			return "sh", []string{"-c", `echo "got $JL_SECRET $JL_INHERITED"; exec sleep 60`}
		}, Logf: t.Logf})
	t.Cleanup(func() { s.Stop(time.Second) })
	_, err := s.Start()
	require.NoError(t, err)
	waitFor(t, "output", func() bool { b, _ := s.Log(); return strings.Contains(string(b), "\ngot ") })
	b, _ := s.Log()
	require.Contains(t, string(b), "\ngot s3cr3t kept\n", "want the variable in the output")
	require.Equal(t, 1, strings.Count(string(b), "s3cr3t"), "log %q: want the variable once, kept out of the marker line", b)
}
