package node

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// holdersOf names the processes that have the file at path open, as
// "pid 123 (permitd)", read from /proc/PID/fd: on Linux, and only the
// processes this one may inspect (elsewhere, ""). It names the program
// only, never its arguments.
func holdersOf(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	var found []string
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || !holds(pid, abs) {
			continue
		}
		name := "?"
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			argv0, _, _ := bytes.Cut(cmd, []byte{0})
			name = filepath.Base(string(argv0))
		}
		found = append(found, fmt.Sprintf("pid %d (%s)", pid, name))
	}
	return strings.Join(found, ", ")
}

// holds reports whether process pid has the file abs open.
func holds(pid int, abs string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && target == abs {
			return true
		}
	}
	return false
}
