package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// clockTicksPerSecond is the unit of /proc/PID/stat's CPU times (USER_HZ,
// which Linux fixes at 100 on every common architecture).
const clockTicksPerSecond = 100

// procCPUSeconds is the user+system CPU time pid has used so far, read from
// /proc/PID/stat (Linux only; 10ms resolution).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("compare-redis: cpu time of pid %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("compare-redis: cpu time of pid %d: unexpected /proc stat format", pid)
	}
	f := strings.Fields(s[i+1:])
	// After the name: state is field 3, so utime (14) and stime (15) are
	// f[11] and f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("compare-redis: cpu time of pid %d: /proc stat has %d fields after the name, want >= 13", pid, len(f))
	}
	var ticks float64
	for _, x := range f[11:13] {
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("compare-redis: cpu time of pid %d: %w", pid, err)
		}
		ticks += float64(n)
	}
	return ticks / clockTicksPerSecond, nil
}

// selfCPUSeconds is the user+system CPU time this process has used so far.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// cpuMeter measures the CPU time a set of processes and this one use
// between start and stop. Unreadable processes make the result NaN.
type cpuMeter struct {
	pids              []int
	server, client    float64
	serverOK, started bool
}

// start records the current CPU times.
func (m *cpuMeter) start() {
	m.server, m.serverOK = m.serverSeconds()
	m.client = selfCPUSeconds()
	m.started = true
}

// stop returns the server processes' and this process's CPU seconds since
// start.
func (m *cpuMeter) stop() (serverSec, clientSec float64) {
	if !m.started {
		return math.NaN(), math.NaN()
	}
	s, ok := m.serverSeconds()
	serverSec = math.NaN()
	if ok && m.serverOK {
		serverSec = s - m.server
	}
	return serverSec, selfCPUSeconds() - m.client
}

func (m *cpuMeter) serverSeconds() (float64, bool) {
	var sum float64
	for _, pid := range m.pids {
		s, err := procCPUSeconds(pid)
		if err != nil {
			return 0, false
		}
		sum += s
	}
	return sum, true
}
