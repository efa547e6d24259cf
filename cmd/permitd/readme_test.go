package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBuildLine is the walkthrough's first line; the test puts its own
// build of the binary where that line would.
const readmeBuildLine = "go build -o permitd ./cmd/permitd"

// walkthrough returns the first ```sh block of the README's "Running a
// cluster" section.
func walkthrough(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Running a cluster\n")
	if !ok {
		t.Fatal(`README.md has no "## Running a cluster" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("the Running a cluster section has no ```sh block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("unterminated ```sh block")
	}
	return block
}

// TestREADMEWalkthrough runs the README's cluster walkthrough as written,
// with bash, in an empty directory: three agents, status, a limit, a
// reserve, a list, and a graceful stop. Only the build line is replaced
// by a copy of the test's binary, and the walkthrough's fixed ports are
// moved to free ones if any is taken on this machine.
func TestREADMEWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a 3-node cluster")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script := walkthrough(t)
	first, rest, _ := strings.Cut(script, "\n")
	if strings.TrimSpace(first) != readmeBuildLine {
		t.Fatalf("the walkthrough starts with %q, want %q", first, readmeBuildLine)
	}
	script = rest
	fixed := []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003"}
	if !allFree(fixed) {
		ports := freePorts(t, len(fixed))
		for i, addr := range fixed {
			script = strings.ReplaceAll(script, addr, fmt.Sprintf("127.0.0.1:%d", ports[i]))
		}
		t.Logf("the walkthrough's ports are taken: moved to %v", ports)
	}

	dir := t.TempDir()
	copyFile(t, buildPermitd(t), filepath.Join(dir, "permitd"))
	writeFile(t, filepath.Join(dir, "walkthrough.sh"), script)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-x", "walkthrough.sh")
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	// Its own process group: the background agents are killed with it
	// if the script fails before stopping them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	logs := ""
	for _, n := range []string{"n1", "n2", "n3"} {
		b, _ := os.ReadFile(filepath.Join(dir, "data", n+".log"))
		logs += "--- " + n + ".log:\n" + string(b)
	}
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\nstdout:\n%s\nstderr (bash -x):\n%s\n%s", err, &stdout, &stderr, logs)
	}
	out := stdout.String()
	for _, want := range []string{
		"permitd " + testVersion + " (revision ",
		"ID  ADDRESS", "leader", `"name": "api"`, `{"expires_in_ns":`, `"granted":true`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(logs, "listening: id=") != 3 || strings.Count(logs, "permitd: stopped") != 3 {
		t.Errorf("want three nodes that listened and stopped gracefully:\n%s", logs)
	}
}

// allFree reports whether every address can be listened on now.
func allFree(addrs []string) bool {
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}

// copyFile copies an executable.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
