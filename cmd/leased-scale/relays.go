package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"time"

	"github.com/permitd/permitd/cmd/internal/cluster"
)

// relays.go: -relays N runs N `permitd relay` processes in front of the
// register (one per host, or per group, as a fleet would run them): the
// sweep's worker i, or -register-load's holder i, sends its lease
// commands to relay i mod N first, and to its -via nodes after it. The
// relays' CPU is measured apart from the register's (it is spent on the
// workers' hosts).

// relayProcs are the running relays.
type relayProcs struct {
	addrs []string
	procs []*exec.Cmd
	logs  []*bytes.Buffer
}

// startRelays starts n relays of the register reg and waits until each
// accepts connections.
func startRelays(ctx context.Context, bin string, reg *register, n int) (*relayProcs, error) {
	ports, err := cluster.FreePorts(n)
	if err != nil {
		return nil, err
	}
	rs := &relayProcs{}
	servers := ""
	for i, h := range reg.HTTP {
		if i > 0 {
			servers += ","
		}
		servers += h
	}
	for i := range n {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		cmd := exec.Command(bin, "relay", "--listen", addr, "--servers", servers, "--log-level", "error")
		buf := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = buf, buf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			rs.stop()
			return nil, fmt.Errorf("start relay %d: %w", i, err)
		}
		rs.addrs = append(rs.addrs, addr)
		rs.procs = append(rs.procs, cmd)
		rs.logs = append(rs.logs, buf)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range rs.addrs {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				rs.stop()
				return nil, errors.New("a relay did not listen within 20 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return rs, nil
}

// cpu returns the relays' CPU seconds together.
func (rs *relayProcs) cpu(reg *register) float64 {
	if rs == nil {
		return 0
	}
	total := 0.0
	for _, p := range rs.procs {
		if c, err := reg.CPUSeconds(p.Process.Pid); err == nil {
			total += c
		}
	}
	return total
}

// first is the relay holder client i talks to first ("" without relays).
func (rs *relayProcs) first(i int) string {
	if rs == nil || len(rs.addrs) == 0 {
		return ""
	}
	return rs.addrs[i%len(rs.addrs)]
}

// stop kills the relays.
func (rs *relayProcs) stop() {
	if rs == nil {
		return
	}
	for _, p := range rs.procs {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
}
