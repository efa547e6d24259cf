package cluster

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

// Cluster is three `permitd agent` processes on loopback, each with its
// own data directory (raft-boltdb, fsync on) under a directory.
type Cluster struct {
	// Dir holds the agents' data directories.
	Dir string
	// IDs and HTTP are the agents' IDs and HTTP addresses, in order.
	IDs, HTTP []string
	// Procs are the running agents; Logs their output (stdout and stderr).
	Procs []*exec.Cmd
	Logs  []*bytes.Buffer
	// Leader is the index of the leader found ready at the last start.
	Leader int
	// Client talks to the leader first.
	Client *client.Client
	// TickHz is the kernel's clock ticks per second (/proc stat times).
	TickHz float64

	bin     string
	args    [][]string
	stopped bool
}

// Build builds ./cmd/permitd into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "permitd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/permitd/permitd/cmd/permitd")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cluster: go build ./cmd/permitd: %w", err)
	}
	return bin, nil
}

// FreePorts returns n loopback ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
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
			return nil, fmt.Errorf("cluster: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// Start starts the three agents of binary bin (each with extraArgs),
// their data directories under dir, and waits for a ready leader.
func Start(ctx context.Context, bin, dir string, extraArgs ...string) (*Cluster, error) {
	ports, err := FreePorts(6)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Leader: -1, TickHz: 100, bin: bin, stopped: true}
	var initial []string
	for i := range 3 {
		id := fmt.Sprintf("r%d", i+1)
		c.IDs = append(c.IDs, id)
		c.HTTP = append(c.HTTP, fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]))
		initial = append(initial, fmt.Sprintf("%s=127.0.0.1:%d", id, ports[2*i]))
	}
	for i, id := range c.IDs {
		data := filepath.Join(dir, id)
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		args := []string{"agent", "--id", id, "--data-dir", data,
			"--raft-addr", strings.Split(initial[i], "=")[1], "--http-addr", c.HTTP[i],
			"--initial-cluster", strings.Join(initial, ","), "--log-level", "error"}
		c.args = append(c.args, append(args, extraArgs...))
	}
	if err := c.StartAgain(ctx, 20*time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// StartAgain starts the agents (stopped, or never started) with the
// arguments, data directories and ports of their first start, and waits
// at most timeout for a ready leader (a large snapshot takes its time to
// restore).
func (c *Cluster) StartAgain(ctx context.Context, timeout time.Duration) error {
	if err := c.Launch(); err != nil {
		return err
	}
	return c.WaitLeader(ctx, timeout)
}

// Launch starts the agents (stopped, or never started) with the
// arguments, data directories and ports of their first start, and
// returns at once.
func (c *Cluster) Launch() error {
	if !c.stopped {
		return errors.New("cluster: start: the agents are running")
	}
	c.stopped, c.Procs, c.Logs, c.Leader = false, nil, nil, -1
	for i, args := range c.args {
		cmd := exec.Command(c.bin, args...)
		buf := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = buf, buf
		// The agents die with this process, whatever ends it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			c.Stop()
			return fmt.Errorf("cluster: start agent %s: %w", c.IDs[i], err)
		}
		c.Procs = append(c.Procs, cmd)
		c.Logs = append(c.Logs, buf)
	}
	return nil
}

// WaitLeader waits at most timeout for a ready leader, then makes Client
// (the leader first); it stops the agents if none is ready in time.
func (c *Cluster) WaitLeader(ctx context.Context, timeout time.Duration) error {
	probe, err := client.New(c.HTTP, client.WithAttemptTimeout(time.Second), client.WithRounds(1))
	if err != nil {
		c.Stop()
		return err
	}
	defer probe.Close()
	deadline := time.Now().Add(timeout)
	for c.Leader < 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.Stop()
			return fmt.Errorf("cluster: no ready leader within %v", timeout)
		}
		for i, h := range c.HTTP {
			st, err := probe.StatusOf(ctx, h)
			if err == nil && st.State == "leader" && st.Ready {
				c.Leader = i
			}
		}
		if c.Leader < 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.Client, err = client.New(c.LeaderFirst())
	if err != nil {
		c.Stop()
		return err
	}
	return nil
}

// LeaderFirst is the agents' HTTP addresses, the leader's first.
func (c *Cluster) LeaderFirst() []string {
	servers := []string{c.HTTP[c.Leader]}
	for i, h := range c.HTTP {
		if i != c.Leader {
			servers = append(servers, h)
		}
	}
	return servers
}

// LeaderPID is the leader's process ID.
func (c *Cluster) LeaderPID() int { return c.Procs[c.Leader].Process.Pid }

// CPUSeconds returns the user+system CPU time of process pid, from
// /proc/PID/stat.
func (c *Cluster) CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStatCPU(string(b), c.TickHz)
}

// ParseStatCPU reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat, in seconds at hz clock ticks per second.
func ParseStatCPU(stat string, hz float64) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("cluster: /proc stat: no ')'")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11].
	if len(f) < 13 {
		return 0, errors.New("cluster: /proc stat: too few fields")
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cluster: /proc stat: utime %q stime %q", f[11], f[12])
	}
	return float64(u+s) / hz, nil
}

// AllCPU returns the CPU seconds of every agent.
func (c *Cluster) AllCPU() ([]float64, error) {
	out := make([]float64, len(c.Procs))
	for i, p := range c.Procs {
		cpu, err := c.CPUSeconds(p.Process.Pid)
		if err != nil {
			return nil, err
		}
		out[i] = cpu
	}
	return out, nil
}

// Memory is a process's resident memory from /proc/PID/status, in bytes:
// now (VmRSS) and its peak (VmHWM).
type Memory struct {
	RSSBytes, HWMBytes int64
}

// MemoryOf reads process pid's resident memory.
func MemoryOf(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("cluster: %w", err)
	}
	return ParseStatusMemory(string(b))
}

// ParseStatusMemory reads VmRSS and VmHWM from the text of
// /proc/PID/status.
func ParseStatusMemory(status string) (Memory, error) {
	var m Memory
	found := 0
	for _, line := range strings.Split(status, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return Memory{}, fmt.Errorf("cluster: /proc status: %s %q is not N kB", key, val)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("cluster: /proc status: %s %q: %w", key, val, err)
		}
		if key == "VmRSS" {
			m.RSSBytes = kb << 10
		} else {
			m.HWMBytes = kb << 10
		}
		found++
	}
	if found != 2 {
		return Memory{}, errors.New("cluster: /proc status: no VmRSS and VmHWM")
	}
	return m, nil
}

// LeaderStatus reads the leader's status.
func (c *Cluster) LeaderStatus(ctx context.Context) (client.Status, error) {
	return c.Client.StatusOf(ctx, c.HTTP[c.Leader])
}

// Stop stops the agents (SIGTERM, then SIGKILL after 3 s) and waits for
// them to exit.
func (c *Cluster) Stop() {
	if c.stopped {
		return
	}
	c.stopped = true
	for _, p := range c.Procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.Procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	if c.Client != nil {
		c.Client.Close()
		c.Client = nil
	}
}

// LoadAvg is the one-minute load average from /proc/loadavg (-1 if it
// cannot be read).
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
