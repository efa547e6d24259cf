package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a child gets to exit after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// child is a process the comparison started.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has exited
	waitErr error         // set before exited is closed
	// killAtStop: stopAll sends SIGKILL at once instead of SIGTERM (for a
	// child whose state is thrown away and whose SIGTERM waits on its
	// peers, as an etcd member stopping with the others does).
	killAtStop bool
}

// running reports whether the process has not exited yet.
func (c *child) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// logTail is the last n bytes of the child's combined output.
func (c *child) logTail(n int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// supervisor starts child processes and stops every one of them, by pid,
// and removes the directories it was given, however the run ends.
type supervisor struct {
	grace    time.Duration // SIGTERM to SIGKILL; 0 means stopGrace
	mu       sync.Mutex
	children []*child
	dirs     []string
	stopped  bool
}

// start runs name's command with its output appended to logPath. The child
// gets its own process group (a terminal's Ctrl-C reaches only the
// comparison, which then stops its children in order) and is killed by the
// kernel if the comparison dies without cleaning up.
func (s *supervisor) start(name, logPath string, argv ...string) (*child, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, fmt.Errorf("compare-redis: start %s: shutting down", name)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("compare-redis: start %s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("compare-redis: start %s (%s): %w", name, argv[0], err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		logf.Close()
		close(c.exited)
	}()
	s.children = append(s.children, c)
	return c, nil
}

// removeOnStop registers a directory to delete after every child stopped.
func (s *supervisor) removeOnStop(dir string) {
	s.mu.Lock()
	s.dirs = append(s.dirs, dir)
	s.mu.Unlock()
}

// stopAll sends SIGTERM (SIGKILL if killAtStop) to every running child (by pid), waits up to the
// grace period for them all, sends SIGKILL to those still running, then removes
// the registered directories. It is safe to call more than once; it returns
// what went wrong, if anything.
func (s *supervisor) stopAll() error {
	s.mu.Lock()
	s.stopped = true
	children := s.children
	s.children = nil
	dirs := s.dirs
	s.dirs = nil
	s.mu.Unlock()

	grace := s.grace
	if grace <= 0 {
		grace = stopGrace
	}
	var errs []error
	for _, c := range children {
		if c.running() {
			sig := syscall.SIGTERM
			if c.killAtStop {
				sig = syscall.SIGKILL
			}
			_ = c.cmd.Process.Signal(sig)
		}
	}
	deadline := time.After(grace)
	for _, c := range children {
		select {
		case <-c.exited:
		case <-deadline:
		}
	}
	for _, c := range children {
		if c.running() {
			errs = append(errs, fmt.Errorf("compare-redis: %s (pid %d) ignored SIGTERM for %v; killed", c.name, c.cmd.Process.Pid, grace))
			_ = c.cmd.Process.Kill()
			select {
			case <-c.exited:
			case <-time.After(grace):
				errs = append(errs, fmt.Errorf("compare-redis: %s (pid %d) still running after SIGKILL", c.name, c.cmd.Process.Pid))
			}
		}
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("compare-redis: remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// freeLoopbackPorts reserves n distinct free TCP ports on 127.0.0.1 by
// listening on port 0, then releases them for the children to take. (Another
// process could take one in between; the child then fails to start and the
// comparison says so.)
func freeLoopbackPorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("compare-redis: find a free loopback port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
