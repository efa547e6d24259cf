package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
)

// ErrNotRunning is wrapped by Pause when no process runs.
var ErrNotRunning = errors.New("process: not running")

// reapTimeout bounds the wait for a process to be reaped after SIGKILL.
const reapTimeout = 10 * time.Second

// Spec describes a supervised member of the run.
type Spec struct {
	// Name names the member in its log's marker lines and in
	// UnexpectedExits ("n2", "g1-w3").
	Name string
	// Label names it in progress lines and errors ("n2", "worker g1-w3");
	// empty means Name.
	Label string
	// LogPath is the file its processes' output is appended to.
	LogPath string
	// Command returns the command line of the next start: the program
	// and its arguments.
	Command func() (name string, args []string)
	// Env are extra "NAME=value" variables of its processes, after the
	// runner's own environment (nil: the runner's environment only). They
	// are not written to the log, unlike the command line: a secret goes
	// here.
	Env []string
	// Logf receives progress lines (nil: discarded).
	Logf func(format string, args ...any)
}

// State is a member's state at one instant.
type State struct {
	// Up: a process was started and has not exited (it may be paused).
	Up bool
	// Paused: the process was sent SIGSTOP and not SIGCONT since.
	Paused bool
	// Generation counts the starts (0 before the first).
	Generation int
	// Pid is the current process's pid (0 while down).
	Pid int
}

// Supervisor runs one member of the run, one process at a time (see the
// package documentation). Its methods are safe for concurrent use.
type Supervisor struct {
	spec Spec

	mu         sync.Mutex
	proc       *proc // nil while down (never started, killed or stopped)
	paused     bool
	generation int
	restarts   int
	crashes    []string // processes that exited without the runner's signal
}

// proc is one started process; exited is closed once it has been reaped.
type proc struct {
	pid    int
	exited chan struct{}
}

// hasExited reports whether the process has exited (and been reaped).
func (p *proc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// New returns the supervisor of spec's member (nothing is started).
func New(spec Spec) *Supervisor {
	if spec.Label == "" {
		spec.Label = spec.Name
	}
	if spec.Logf == nil {
		spec.Logf = func(string, ...any) {}
	}
	return &Supervisor{spec: spec}
}

// Name is the member's name.
func (s *Supervisor) Name() string { return s.spec.Name }

// LogPath is the member's log file.
func (s *Supervisor) LogPath() string { return s.spec.LogPath }

// Start starts a new process (none may be running) and returns its
// generation. A previous process found exited is recorded as an
// unexpected exit.
func (s *Supervisor) Start() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && !s.proc.hasExited() {
		return 0, fmt.Errorf("process: start %s: already running as pid %d", s.spec.Label, s.proc.pid)
	}
	if s.proc != nil {
		s.crashes = append(s.crashes, fmt.Sprintf("%s (pid %d)", s.spec.Name, s.proc.pid))
	}
	name, argv := s.spec.Command()
	p, err := startProcess(s.spec.Name, s.spec.LogPath, s.generation+1, name, argv, s.spec.Env)
	if err != nil {
		return 0, err
	}
	s.proc, s.paused = p, false
	s.generation++
	if s.generation > 1 {
		s.restarts++
	}
	s.spec.Logf("started %s (pid %d)", s.spec.Label, p.pid)
	return s.generation, nil
}

// startProcess starts name with argv, its output appended to logPath after
// a marker line naming who and which generation, with env added to the
// runner's environment, and reaps it when it exits (closing exited).
func startProcess(who, logPath string, generation int, name string, argv, env []string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	fmt.Fprintf(logf, "=== jepsen-lite: starting %s (generation %d) at %s: %s %s\n", who, generation, time.Now().Format(time.RFC3339Nano), name, strings.Join(argv, " "))
	cmd := exec.Command(name, argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("process: start %s: %w", who, err)
	}
	p := &proc{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // reaps the process; its exit status is in the log's context
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

// take detaches the current process (the member is down from now on).
func (s *Supervisor) take() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	s.proc, s.paused = nil, false
	return p
}

// Kill sends SIGKILL to the current process (a stopped one too) and waits
// until it is reaped. Without a process it does nothing.
func (s *Supervisor) Kill() error {
	p := s.take()
	if p == nil {
		return nil
	}
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	t := time.NewTimer(reapTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
		s.spec.Logf("killed %s (pid %d)", s.spec.Label, p.pid)
		return nil
	case <-t.C:
		return fmt.Errorf("process: %s (pid %d) not reaped %v after SIGKILL", s.spec.Label, p.pid, reapTimeout)
	}
}

// Restart kills the current process (if any) and starts a new one.
func (s *Supervisor) Restart() (int, error) {
	if err := s.Kill(); err != nil {
		return 0, err
	}
	return s.Start()
}

// Pause sends SIGSTOP to the current process. It wraps ErrNotRunning
// without one.
func (s *Supervisor) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("process: pause %s: %w", s.spec.Label, ErrNotRunning)
	}
	if s.paused {
		return nil
	}
	if err := syscall.Kill(s.proc.pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("process: SIGSTOP %s (pid %d): %w", s.spec.Label, s.proc.pid, err)
	}
	s.paused = true
	return nil
}

// Resume sends SIGCONT to the current process if it is paused.
func (s *Supervisor) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || !s.paused {
		return nil
	}
	if err := syscall.Kill(s.proc.pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("process: SIGCONT %s (pid %d): %w", s.spec.Label, s.proc.pid, err)
	}
	s.paused = false
	return nil
}

// Stop ends the current process: SIGCONT (in case it is paused), SIGTERM,
// and SIGKILL if it has not exited within grace; it waits (bounded) until
// it is reaped.
func (s *Supervisor) Stop(grace time.Duration) {
	p := s.take()
	if p == nil {
		return
	}
	_ = syscall.Kill(p.pid, syscall.SIGCONT)
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return
	case <-t.C:
	}
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	r := time.NewTimer(reapTimeout)
	defer r.Stop()
	select {
	case <-p.exited:
	case <-r.C:
		s.spec.Logf("WARNING: %s (pid %d) not reaped after SIGKILL", s.spec.Label, p.pid)
	}
}

// State returns the member's state.
func (s *Supervisor) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{Paused: s.paused, Generation: s.generation}
	if s.proc != nil && !s.proc.hasExited() {
		st.Up, st.Pid = true, s.proc.pid
	}
	return st
}

// Exited reports whether the current process exited on its own (it was
// started and is gone without the runner's signal).
func (s *Supervisor) Exited() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.proc.hasExited()
}

// Restarts counts the starts after the first.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// UnexpectedExits lists the processes that exited without the runner's
// signal, as "NAME (pid P)".
func (s *Supervisor) UnexpectedExits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.crashes...)
	if s.proc != nil && s.proc.hasExited() {
		out = append(out, fmt.Sprintf("%s (pid %d)", s.spec.Name, s.proc.pid))
	}
	return out
}

// Log returns the member's whole log: every generation's output.
func (s *Supervisor) Log() ([]byte, error) {
	return os.ReadFile(s.spec.LogPath)
}

// NotReadyError is WaitReady's failure.
type NotReadyError struct {
	// Label names the member.
	Label string
	// Exited: the process exited (on its own) while it was awaited.
	Exited bool
	// Last is the probe's last error (nil if it never ran).
	Last error
}

// Error says who was not ready and why.
func (e *NotReadyError) Error() string {
	if e.Exited {
		return fmt.Sprintf("process: %s exited (see its log); last answer: %v", e.Label, e.Last)
	}
	return fmt.Sprintf("process: %s not ready: %v", e.Label, e.Last)
}

// Unwrap returns the probe's last error.
func (e *NotReadyError) Unwrap() error { return e.Last }

// WaitReady calls probe every interval until it returns nil (nil), the
// current process has exited on its own, ctx ends or deadline passes (a
// *NotReadyError carrying the probe's last error). The probe runs at
// least once.
func (s *Supervisor) WaitReady(ctx context.Context, deadline time.Time, interval time.Duration, probe func(context.Context) error) error {
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		if s.Exited() {
			return &NotReadyError{Label: s.spec.Label, Exited: true, Last: err}
		}
		if time.Now().After(deadline) || wait.Sleep(ctx, interval) != nil {
			return &NotReadyError{Label: s.spec.Label, Last: err}
		}
	}
}
