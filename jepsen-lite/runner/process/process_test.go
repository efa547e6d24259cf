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
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSupervisorLifecycle: start, pause, resume, kill -9, restart; the
// generations count, the log holds one marker per start, and nothing
// counts as an unexpected exit.
func TestSupervisorLifecycle(t *testing.T) {
	s := newShell(t, "n1", "echo hello; exec sleep 60")
	if st := s.State(); st.Up || st.Generation != 0 {
		t.Fatalf("before start: %+v", st)
	}
	if err := s.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("pause before start: %v, want ErrNotRunning", err)
	}
	// hellos: the output lines, not the marker lines' command.
	hellos := func(n int) func() bool {
		return func() bool { b, _ := s.Log(); return strings.Count(string(b), "\nhello\n") == n }
	}
	gen, err := s.Start()
	if err != nil || gen != 1 {
		t.Fatalf("start: %d, %v", gen, err)
	}
	waitFor(t, "first output", hellos(1))
	if _, err := s.Start(); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second start: %v", err)
	}
	st := s.State()
	if !st.Up || st.Paused || st.Pid == 0 {
		t.Fatalf("after start: %+v", st)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if !s.State().Paused {
		t.Fatal("not paused")
	}
	if ps := procState(t, st.Pid); ps != "" {
		waitFor(t, "SIGSTOP", func() bool { return procState(t, st.Pid) == "T" })
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if ps := procState(t, st.Pid); ps != "" {
		waitFor(t, "SIGCONT", func() bool { return procState(t, st.Pid) != "T" })
	}
	if err := s.Pause(); err != nil { // killed while paused
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if st := s.State(); st.Up || st.Paused || st.Generation != 1 {
		t.Fatalf("after kill: %+v", st)
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("kill while down: %v", err)
	}
	if gen, err := s.Start(); err != nil || gen != 2 {
		t.Fatalf("restart: %d, %v", gen, err)
	}
	waitFor(t, "second output", hellos(2))
	if gen, err := s.Restart(); err != nil || gen != 3 {
		t.Fatalf("Restart: %d, %v", gen, err)
	}
	waitFor(t, "third output", hellos(3))
	if s.Restarts() != 2 {
		t.Fatalf("restarts %d, want 2", s.Restarts())
	}
	s.Stop(time.Second)
	if st := s.State(); st.Up {
		t.Fatalf("after stop: %+v", st)
	}
	if x := s.UnexpectedExits(); len(x) != 0 {
		t.Fatalf("unexpected exits %v", x)
	}
	log, err := s.Log()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"1", "2", "3"} {
		if !strings.Contains(string(log), "=== jepsen-lite: starting n1 (generation "+g+") at ") {
			t.Errorf("log lacks the marker of generation %s:\n%s", g, log)
		}
	}
}

// TestSupervisorUnexpectedExit: a process that exits by itself is
// reported, and still is after the next start.
func TestSupervisorUnexpectedExit(t *testing.T) {
	s := newShell(t, "w1", "exit 3")
	if _, err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "exit", s.Exited)
	if st := s.State(); st.Up {
		t.Fatalf("exited but up: %+v", st)
	}
	if x := s.UnexpectedExits(); len(x) != 1 || !strings.HasPrefix(x[0], "w1 (pid ") {
		t.Fatalf("unexpected exits %v", x)
	}
	if _, err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "second exit", s.Exited)
	if x := s.UnexpectedExits(); len(x) != 2 {
		t.Fatalf("unexpected exits %v, want both processes", x)
	}
}

// TestSupervisorStopEscalates: a process that ignores SIGTERM is killed
// after the grace period.
func TestSupervisorStopEscalates(t *testing.T) {
	s := newShell(t, "stubborn", `trap "" TERM; echo ready; while :; do sleep 1; done`)
	if _, err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "trap set", func() bool { b, _ := s.Log(); return strings.Contains(string(b), "ready") })
	start := time.Now()
	s.Stop(100 * time.Millisecond)
	if st := s.State(); st.Up {
		t.Fatalf("after stop: %+v", st)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stop took %v", d)
	}
	if x := s.UnexpectedExits(); len(x) != 0 {
		t.Fatalf("unexpected exits %v", x)
	}
}

// TestWaitReady: ready once the probe passes; an exit ends the wait with
// Exited; a deadline ends it with the probe's last error.
func TestWaitReady(t *testing.T) {
	s := newShell(t, "n2", "exec sleep 60")
	if _, err := s.Start(); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := s.WaitReady(t.Context(), time.Now().Add(10*time.Second), time.Millisecond, func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("503")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("ready: %v after %d calls", err, calls)
	}
	notYet := errors.New("connection refused")
	err = s.WaitReady(t.Context(), time.Now(), time.Millisecond, func(context.Context) error { return notYet })
	var nr *NotReadyError
	if !errors.As(err, &nr) || nr.Exited || !errors.Is(err, notYet) {
		t.Fatalf("deadline: %v", err)
	}

	x := newShell(t, "n3", "exit 1")
	if _, err := x.Start(); err != nil {
		t.Fatal(err)
	}
	err = x.WaitReady(t.Context(), time.Now().Add(10*time.Second), time.Millisecond, func(context.Context) error { return notYet })
	if !errors.As(err, &nr) || !nr.Exited || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("exited: %v", err)
	}
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
	if _, err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "output", func() bool { b, _ := s.Log(); return strings.Contains(string(b), "\ngot ") })
	b, _ := s.Log()
	if !strings.Contains(string(b), "\ngot s3cr3t kept\n") || strings.Count(string(b), "s3cr3t") != 1 {
		t.Fatalf("log %q: want the variable in the output once, kept out of the marker line", b)
	}
}
