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
func walkthrough(t *testing.T) string { return readmeBlock(t, "Running a cluster") }

// readmeBlock returns the first ```sh block of the README's section
// "## heading".
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf(`README.md has no "## %s" section`, heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatalf("the %s section has no ```sh block", heading)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("unterminated ```sh block")
	}
	return block
}

// movePorts replaces the fixed addresses in script by free ones if any
// is taken on this machine.
func movePorts(t *testing.T, script string, fixed []string) string {
	t.Helper()
	if allFree(fixed) {
		return script
	}
	ports := freePorts(t, len(fixed))
	for i, addr := range fixed {
		script = strings.ReplaceAll(script, addr, fmt.Sprintf("127.0.0.1:%d", ports[i]))
	}
	t.Logf("the walkthrough's ports are taken: moved to %v", ports)
	return script
}

// runWalkthrough runs a README block (its fixed ports moved if taken) in
// an empty directory holding the test's permitd binary, fails the test if
// it fails, and returns its stdout and trace, and the three nodes' logs
// (data/n1.log ...).
func runWalkthrough(t *testing.T, script string) (out, logs string) {
	t.Helper()
	script = movePorts(t, script, []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003"})
	dir := t.TempDir()
	copyFile(t, buildPermitd(t), filepath.Join(dir, "permitd"))
	stdout, trace, err := runScript(t, dir, script)
	for _, n := range []string{"n1", "n2", "n3"} {
		b, _ := os.ReadFile(filepath.Join(dir, "data", n+".log"))
		logs += "--- " + n + ".log:\n" + string(b)
	}
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\nstdout:\n%s\nstderr (bash -x):\n%s\n%s", err, stdout, trace, logs)
	}
	return stdout + "\n" + trace, logs
}

// runScript runs script with bash -e -x in dir, in its own process group
// (killed with everything it started when the test ends), for at most 2
// minutes; it returns stdout, the trace and the error.
func runScript(t *testing.T, dir, script string) (stdout, trace string, err error) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "walkthrough.sh"), script)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-x", "walkthrough.sh")
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err = cmd.Wait()
	return out.String(), errOut.String(), err
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
	out, logs := runWalkthrough(t, rest)
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

// TestREADMESecurityWalkthrough runs the Security section's block as
// written: certificates, tokens, three agents with TLS and a token file,
// status and a reserve with the tokens, a refused reserve without one.
func TestREADMESecurityWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a 3-node cluster")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	out, logs := runWalkthrough(t, readmeBlock(t, "Security"))
	for _, want := range []string{"ID  ADDRESS", "leader", `"granted":true`, "tls=true", "tokens=true"} {
		if !strings.Contains(out+logs, want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s\n%s", want, out, logs)
		}
	}
	if !strings.Contains(out+logs, "401") {
		t.Errorf("the reserve without a token was not refused with 401:\n%s", out)
	}
}

// TestREADMESeveralLimits runs the README's "Several limits" block on the
// cluster of its walkthrough (started as written, its final kill kept for
// the end): a multi-limit grant, its settlement refunding 1 700 tokens,
// its release, and a refusal naming the full in-flight cap.
func TestREADMESeveralLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a 3-node cluster")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	_, cluster, _ := strings.Cut(walkthrough(t), "\n") // without the build line
	cluster, _, ok := strings.Cut(strings.TrimRight(cluster, "\n"), "\nkill %1 %2 %3; wait")
	if !ok {
		t.Fatal(`the walkthrough no longer ends with "kill %1 %2 %3; wait"`)
	}
	block := readmeBlock(t, "Several limits, settlements, in-flight caps, shadow mode")
	out, _ := runWalkthrough(t, cluster+"\n"+block+"kill %1 %2 %3; wait\n")
	for _, want := range []string{
		`"granted":true`, `"reservation_id":"1"`,
		`{"name":"tpm","reserved":4000,"actual":2300,"refunded":1700,"charged":0}`,
		`{"released":1,"duplicate":false}`,
		`"blocking":"inflight"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the block's output lacks %s:\n%s", want, out)
		}
	}
}
