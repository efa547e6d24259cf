package main

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
	"syscall"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// register is three `permitd agent` processes on loopback, each with its
// own data directory (raft-boltdb, fsync on) under a temporary directory.
type register struct {
	dir     string
	ids     []string
	http    []string
	procs   []*exec.Cmd
	logs    []*bytes.Buffer
	leader  int
	cl      *client.Client // leader first
	tickHz  float64
	stopped bool
}

// buildPermitd builds ./cmd/permitd into dir and returns the binary's path.
func buildPermitd(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "permitd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/permitd/permitd/cmd/permitd")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/permitd: %w", err)
	}
	return bin, nil
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// startRegister starts the three agents and waits for a ready leader.
func startRegister(ctx context.Context, bin, dir string, extraArgs ...string) (*register, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	r := &register{dir: dir, leader: -1, tickHz: 100}
	var initial []string
	for i := range 3 {
		id := fmt.Sprintf("r%d", i+1)
		r.ids = append(r.ids, id)
		r.http = append(r.http, fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]))
		initial = append(initial, fmt.Sprintf("%s=127.0.0.1:%d", id, ports[2*i]))
	}
	for i, id := range r.ids {
		data := filepath.Join(dir, id)
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "agent", "--id", id, "--data-dir", data,
			"--raft-addr", strings.Split(initial[i], "=")[1], "--http-addr", r.http[i],
			"--initial-cluster", strings.Join(initial, ","), "--log-level", "error")
		cmd.Args = append(cmd.Args, extraArgs...)
		buf := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = buf, buf
		// The agents die with this process, whatever ends it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			r.stop()
			return nil, fmt.Errorf("start agent %s: %w", id, err)
		}
		r.procs = append(r.procs, cmd)
		r.logs = append(r.logs, buf)
	}
	probe, err := client.New(r.http, client.WithAttemptTimeout(time.Second), client.WithRounds(1))
	if err != nil {
		r.stop()
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for r.leader < 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.stop()
			return nil, errors.New("no ready register leader within 20 s")
		}
		for i, h := range r.http {
			st, err := probe.StatusOf(ctx, h)
			if err == nil && st.State == "leader" && st.Ready {
				r.leader = i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Workers talk to the leader first (the client sticks to the server
	// that last answered): the leader parses every renewal's HTTP itself,
	// the costliest placement for it.
	servers := []string{r.http[r.leader]}
	for i, h := range r.http {
		if i != r.leader {
			servers = append(servers, h)
		}
	}
	r.cl, err = client.New(servers)
	if err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

// leaderPID is the leader's process ID.
func (r *register) leaderPID() int { return r.procs[r.leader].Process.Pid }

// cpuSeconds returns the user+system CPU time of process pid, from
// /proc/PID/stat.
func (r *register) cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b), r.tickHz)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat, in seconds at hz clock ticks per second.
func parseStatCPU(stat string, hz float64) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no ')'")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11].
	if len(f) < 13 {
		return 0, errors.New("/proc stat: too few fields")
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat: utime %q stime %q", f[11], f[12])
	}
	return float64(u+s) / hz, nil
}

// idleCores measures, over 10 s before any load (3 s read ±0.02 core from
// run to run), the cores the leader and
// the three agents together use: raft heartbeats and timers.
func (r *register) idleCores(ctx context.Context) (leader, all float64, err error) {
	const idle = 10 * time.Second
	c0, err := r.cpuSeconds(r.leaderPID())
	if err != nil {
		return 0, 0, err
	}
	a0, err := r.allCPU()
	if err != nil {
		return 0, 0, err
	}
	if err := sleep(ctx, idle); err != nil {
		return 0, 0, err
	}
	c1, _ := r.cpuSeconds(r.leaderPID())
	a1, _ := r.allCPU()
	return (c1 - c0) / idle.Seconds(), (sum(a1) - sum(a0)) / idle.Seconds(), nil
}

// allCPU returns the CPU seconds of every agent.
func (r *register) allCPU() ([]float64, error) {
	out := make([]float64, len(r.procs))
	for i, p := range r.procs {
		c, err := r.cpuSeconds(p.Process.Pid)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// leaderStatus reads the leader's status (applied index).
func (r *register) leaderStatus(ctx context.Context) (client.Status, error) {
	return r.cl.StatusOf(ctx, r.http[r.leader])
}

// stop kills the agents (SIGTERM, then SIGKILL after 3 s).
func (r *register) stop() {
	if r.stopped {
		return
	}
	r.stopped = true
	for _, p := range r.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range r.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	if r.cl != nil {
		r.cl.Close()
	}
}
