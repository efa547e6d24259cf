// Package packaging_test checks how permitd ships (the files beside this
// one): the LICENSE at the repository root, the release build and the
// version it stamps, the packaged config against the agent's flags, the
// systemd unit (systemd-analyze verify and its security exposure, and an
// agent traced with strace staying within its sandbox), the Debian
// package (built with nfpm, inspected with dpkg-deb and installed into a
// throwaway root) and the container image (built and run where a Docker
// or Podman engine answers). A test needing a Debian tool skips
// without it, or fails when PERMITD_REQUIRE_PACKAGING_TOOLS=1 (CI, which
// installs them); the image test skips without an engine everywhere.
package packaging_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// root is the repository root, from this package's folder.
var root = filepath.Join("..", "..", "..")

// needTool returns the path of a Debian tool the test needs, or skips the
// test without it (fails it when PERMITD_REQUIRE_PACKAGING_TOOLS=1).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("PERMITD_REQUIRE_PACKAGING_TOOLS") == "1" {
		t.Fatalf("%s not found (Debian package %s), and PERMITD_REQUIRE_PACKAGING_TOOLS=1", name, pkg)
	}
	t.Skipf("%s not found (Debian package %s)", name, pkg)
	return ""
}

// run runs a command with a deadline and returns its stdout; a failure
// fails the test with the command's stderr.
func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	out, err := tryRun(timeout, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

// tryRun runs a command with a deadline: its stdout, or an error with its
// stderr.
func tryRun(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%w; stderr: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// apacheSHA256 is the SHA-256 of the Apache License 2.0 as the Apache
// Software Foundation publishes it (LICENSE-2.0.txt; Debian's
// /usr/share/common-licenses/Apache-2.0).
const apacheSHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// TestLicenseIsApache2AtTheRoot: LICENSE at the repository root (the only
// place pkg.go.dev looks for a module's license) is the Apache License
// 2.0, word for word, with its appendix's copyright line filled in.
func TestLicenseIsApache2AtTheRoot(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	const ours, placeholder = "   Copyright 2026 The permitd Authors\n", "   Copyright [yyyy] [name of copyright owner]\n"
	if !bytes.Contains(b, []byte(ours)) {
		t.Fatalf("LICENSE lacks the line %q", ours)
	}
	sum := sha256.Sum256(bytes.Replace(b, []byte(ours), []byte(placeholder), 1))
	if got := hex.EncodeToString(sum[:]); got != apacheSHA256 {
		t.Fatalf("LICENSE, its copyright line put back to the template's, has SHA-256 %s, not the Apache License 2.0's %s: the text was changed", got, apacheSHA256)
	}
}

// release is the binary build-release.sh makes, built once for the tests.
var release struct {
	once sync.Once
	path string
	err  error
}

// releaseVersion is the version the tests stamp.
const releaseVersion = "v0.0.0-test.1"

// releaseBinary builds permitd with build-release.sh (once) and returns
// its path.
func releaseBinary(t *testing.T) string {
	t.Helper()
	release.once.Do(func() {
		dir, err := os.MkdirTemp("", "permitd-release-")
		if err != nil {
			release.err = err
			return
		}
		release.path = filepath.Join(dir, "permitd")
		start := time.Now()
		_, release.err = tryRun(5*time.Minute, nil, "sh", filepath.Join(root, "cmd/permitd/packaging/build-release.sh"), releaseVersion, release.path)
		t.Logf("build-release.sh took %v", time.Since(start).Round(time.Millisecond))
	})
	if release.err != nil {
		t.Fatalf("build-release.sh: %v", release.err)
	}
	return release.path
}

// TestMain removes the release build.
func TestMain(m *testing.M) {
	code := m.Run()
	if release.path != "" {
		os.RemoveAll(filepath.Dir(release.path))
	}
	os.Exit(code)
}

// TestReleaseBuildPrintsItsVersion: build-release.sh makes a static
// binary (no program interpreter), built with -trimpath and cgo off, that
// reports the version it was given; a version that would break the
// linker flags is refused with a clear error.
func TestReleaseBuildPrintsItsVersion(t *testing.T) {
	bin := releaseBinary(t)
	out := run(t, 30*time.Second, nil, bin, "version")
	if want := "permitd " + releaseVersion + " "; !strings.HasPrefix(out, want) {
		t.Errorf("permitd version printed %q, want it to start with %q", out, want)
	}
	var info struct{ Version string }
	if err := json.Unmarshal([]byte(run(t, 30*time.Second, nil, bin, "version", "--json")), &info); err != nil || info.Version != releaseVersion {
		t.Errorf("permitd version --json: version %q (%v), want %q", info.Version, err, releaseVersion)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the release binary has a program interpreter: it is dynamically linked, not static")
		}
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["-trimpath"] != "true" || settings["CGO_ENABLED"] != "0" {
		t.Errorf("build settings -trimpath=%q CGO_ENABLED=%q, want true and 0", settings["-trimpath"], settings["CGO_ENABLED"])
	}

	_, err = tryRun(30*time.Second, nil, "sh", filepath.Join(root, "cmd/permitd/packaging/build-release.sh"), "1.0 beta", filepath.Join(t.TempDir(), "permitd"))
	if err == nil || !strings.Contains(err.Error(), `version "1.0 beta": allowed letters, digits and . + ~ _ -`) {
		t.Errorf("build-release.sh \"1.0 beta\": %v, want a refusal naming what is allowed", err)
	}
}

// TestPackagedConfigIsValid: the config file the Debian package installs
// is one the agent accepts, read as the unit's ExecStart reads it.
func TestPackagedConfigIsValid(t *testing.T) {
	bin := releaseBinary(t)
	unit := readFile(t, "cmd/permitd/packaging/permitd.service")
	m := regexp.MustCompile(`(?m)^ExecStart=/usr/bin/permitd (agent --config /etc/permitd/permitd.json)$`).FindStringSubmatch(unit)
	if m == nil {
		t.Fatal("permitd.service: no line ExecStart=/usr/bin/permitd agent --config /etc/permitd/permitd.json")
	}
	args := strings.Fields(strings.Replace(m[1], "/etc/permitd/permitd.json", filepath.Join(root, "cmd/permitd/packaging/permitd.json"), 1))
	// The file's data directory is the package's; the flag wins over it.
	args = append(args, "--data-dir", t.TempDir(), "--validate")
	out := run(t, 30*time.Second, []string{"PERMITD_CONFIG="}, bin, args...)
	if !strings.Contains(out, `"initial-cluster"`) {
		t.Errorf("permitd %s printed no settings: %q", strings.Join(args, " "), out)
	}
}

// readFile returns a repository file's text.
func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hardening are settings permitd.service must keep (systemd.exec(5)).
var hardening = []string{
	"User=permitd", "StateDirectory=permitd", "NoNewPrivileges=yes", "ProtectSystem=strict",
	"ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes", "CapabilityBoundingSet=",
	"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "SystemCallFilter=@system-service",
	"MemoryDenyWriteExecute=yes", "EnvironmentFile=-/etc/default/permitd",
	"ExecReload=/bin/kill -HUP $MAINPID",
}

// maxExposure is the highest systemd-analyze security exposure (0 to 10,
// lower is safer) the unit may have; it has 1.1.
const maxExposure = 2.0

// TestSystemdUnitVerifies: permitd.service keeps its hardening, passes
// `systemd-analyze verify` without a word (an unknown key or a bad value
// is only a warning there, and fails here), and its `systemd-analyze
// security` exposure is at most maxExposure. Both run offline on a
// throwaway root holding the unit, a stand-in binary and the host's
// targets.
func TestSystemdUnitVerifies(t *testing.T) {
	unit := readFile(t, "cmd/permitd/packaging/permitd.service")
	lines := map[string]bool{}
	for _, l := range strings.Split(unit, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, h := range hardening {
		if !lines[h] {
			t.Errorf("permitd.service lacks the line %s", h)
		}
	}
	analyze := needTool(t, "systemd-analyze", "systemd")
	sysroot := t.TempDir()
	unitDir := filepath.Join(sysroot, "usr/lib/systemd/system")
	for _, d := range []string{unitDir, filepath.Join(sysroot, "usr/bin"), filepath.Join(sysroot, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, host := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		for _, pat := range []string{"*.target", "*.slice"} {
			files, _ := filepath.Glob(filepath.Join(host, pat))
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil {
					if err := os.WriteFile(filepath.Join(unitDir, filepath.Base(f)), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	for _, exe := range []string{"usr/bin/permitd", "bin/kill"} {
		if err := os.WriteFile(filepath.Join(sysroot, exe), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	installed := filepath.Join(unitDir, "permitd.service")
	if err := os.WriteFile(installed, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(analyze, "verify", "--man=no", "--root="+sysroot, installed)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify permitd.service: %v: %s", err, out)
	}

	out, err = exec.Command(analyze, "security", "--offline=true", "--root="+sysroot, installed).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v: %s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for permitd\.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no exposure level: %s", out)
	}
	exposure, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure %.1f", exposure)
	if exposure > maxExposure {
		t.Errorf("permitd.service's exposure is %.1f, above %.1f: %s", exposure, maxExposure, out)
	}
}

// TestDockerfilePinsTheGoModToolchain: the image's builder is the Go
// version go.mod names, its final stage runs permitd as a non-root user
// and keeps its data in a volume.
func TestDockerfilePinsTheGoModToolchain(t *testing.T) {
	gomod := readFile(t, "go.mod")
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(gomod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	want := goLine[1]
	if tc := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindStringSubmatch(gomod); tc != nil {
		want = tc[1]
	}
	df := readFile(t, "cmd/permitd/packaging/Dockerfile")
	if !strings.Contains(df, "\nARG GO_VERSION="+want+"\n") || !strings.Contains(df, "\nFROM golang:${GO_VERSION}-") {
		t.Errorf("Dockerfile: want ARG GO_VERSION=%s (go.mod's) and FROM golang:${GO_VERSION}-...", want)
	}
	stages := strings.Split(df, "\nFROM ")
	final := stages[len(stages)-1]
	user := regexp.MustCompile(`(?m)^USER (\S+)$`).FindStringSubmatch(final)
	if user == nil || user[1] == "root" || strings.HasPrefix(user[1], "0") {
		t.Errorf("Dockerfile's final stage: want USER of a non-root user, got %v", user)
	}
	for _, l := range []string{`VOLUME ["/var/lib/permitd"]`, `ENTRYPOINT ["/usr/bin/permitd"]`, "EXPOSE 7001 8001"} {
		if !strings.Contains(final, "\n"+l+"\n") {
			t.Errorf("Dockerfile's final stage lacks %s", l)
		}
	}
}

// containerEngine returns docker or podman when its engine answers, or
// skips the test (also in CI, which installs neither).
func containerEngine(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"docker", "podman"} {
		if p, err := exec.LookPath(name); err == nil {
			if _, err := tryRun(20*time.Second, nil, p, "info"); err == nil {
				return p
			}
		}
	}
	t.Skip("no docker or podman engine answers (`docker info`)")
	return ""
}

// TestDockerImageRunsAnAgent: the image builds from the repository root,
// prints the version it was built with, runs as a non-root user, and an
// agent in it (a one-node cluster, its data in the volume, its HTTP
// address the container's wildcard without TLS: --insecure) answers
// /healthz on the published port.
func TestDockerImageRunsAnAgent(t *testing.T) {
	engine := containerEngine(t)
	tag := fmt.Sprintf("permitd-test:%d", time.Now().UnixNano())
	start := time.Now()
	run(t, 15*time.Minute, nil, engine, "build", "-f", filepath.Join(root, "cmd/permitd/packaging/Dockerfile"),
		"--build-arg", "VERSION="+releaseVersion, "-t", tag, root)
	t.Logf("%s build took %v", engine, time.Since(start).Round(time.Second))
	t.Cleanup(func() { _, _ = tryRun(time.Minute, nil, engine, "rmi", "-f", tag) })

	if out := run(t, time.Minute, nil, engine, "run", "--rm", tag, "version"); !strings.HasPrefix(out, "permitd "+releaseVersion+" ") {
		t.Errorf("%s run %s version: %q", engine, tag, out)
	}
	if u := strings.TrimSpace(run(t, time.Minute, nil, engine, "image", "inspect", "--format", "{{.Config.User}}", tag)); u == "" || u == "root" || strings.HasPrefix(u, "0") {
		t.Errorf("the image runs as %q, want a non-root user", u)
	}

	id := strings.TrimSpace(run(t, time.Minute, nil, engine, "run", "-d", "-p", "127.0.0.1::8001", tag,
		"agent", "--id", "n1", "--data-dir", "/var/lib/permitd", "--raft-addr", "127.0.0.1:7001",
		"--http-addr", "0.0.0.0:8001", "--initial-cluster", "n1=127.0.0.1:7001", "--insecure"))
	t.Cleanup(func() { _, _ = tryRun(time.Minute, nil, engine, "rm", "-f", "-v", id) })
	port := strings.TrimSpace(run(t, time.Minute, nil, engine, "port", id, "8001/tcp"))
	if i := strings.LastIndex(port, "\n"); i >= 0 {
		port = port[:i] // one line per address family
	}
	_, p, err := net.SplitHostPort(strings.TrimSpace(port))
	if err != nil {
		t.Fatalf("%s port: %q: %v", engine, port, err)
	}
	url := "http://127.0.0.1:" + p + "/healthz"
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			logs, _ := tryRun(time.Minute, nil, engine, "logs", id)
			t.Fatalf("GET %s: %v after 60 s; logs: %s", url, err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDebianPackage: build-deb.sh makes a package (nfpm, at its pinned
// version through go run) whose control data, conffiles and contents are
// what an operator installs: the release binary printing its version, the
// unit as in the repository, the default config and environment file as
// conffiles, the license as the copyright file. As root, dpkg installs
// it into a throwaway root (its postinst run chrooted, adduser stubbed)
// and removes it again.
func TestDebianPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds nfpm with go run")
	}
	dpkgDeb := needTool(t, "dpkg-deb", "dpkg")
	dir := t.TempDir()
	start := time.Now()
	out := run(t, 10*time.Minute, nil, "sh", filepath.Join(root, "cmd/permitd/packaging/build-deb.sh"), releaseVersion, dir)
	t.Logf("build-deb.sh took %v", time.Since(start).Round(time.Millisecond))
	debArch := map[string]string{"386": "i386", "arm": "armhf", "ppc64le": "ppc64el"}[runtime.GOARCH]
	if debArch == "" {
		debArch = runtime.GOARCH
	}
	deb := filepath.Join(dir, "permitd_0.0.0~test.1_"+debArch+".deb")
	if strings.TrimSpace(out) != deb {
		t.Fatalf("build-deb.sh printed %q, want %q", out, deb)
	}

	info := run(t, time.Minute, nil, dpkgDeb, "--field", deb, "Package", "Version", "Architecture", "Depends")
	for _, f := range []string{"Package: permitd", "Version: 0.0.0~test.1", "Architecture: " + debArch, "Depends: adduser"} {
		if !strings.Contains(info, f+"\n") {
			t.Errorf("dpkg-deb --field: no %q in %q", f, info)
		}
	}
	if conf := run(t, time.Minute, nil, dpkgDeb, "--info", deb, "conffiles"); conf != "/etc/default/permitd\n/etc/permitd/permitd.json\n" {
		t.Errorf("conffiles: %q", conf)
	}
	contents := run(t, time.Minute, nil, dpkgDeb, "--contents", deb)
	for _, want := range []string{
		"-rwxr-xr-x root/root .* ./usr/bin/permitd\n",
		"-rw-r--r-- root/root .* ./usr/lib/systemd/system/permitd.service\n",
		"-rw-r--r-- root/root .* ./etc/permitd/permitd.json\n",
		"-rw-r--r-- root/root .* ./etc/default/permitd\n",
		"-rw-r--r-- root/root .* ./usr/share/doc/permitd/copyright\n",
	} {
		if !regexp.MustCompile(want).MatchString(contents) {
			t.Errorf("dpkg-deb --contents: no line like %q in\n%s", want, contents)
		}
	}

	x := t.TempDir()
	run(t, time.Minute, nil, dpkgDeb, "-x", deb, x)
	if v := run(t, 30*time.Second, nil, filepath.Join(x, "usr/bin/permitd"), "version"); !strings.HasPrefix(v, "permitd "+releaseVersion+" ") {
		t.Errorf("the packaged binary's version: %q", v)
	}
	for pkg, repo := range map[string]string{
		"usr/lib/systemd/system/permitd.service": "cmd/permitd/packaging/permitd.service",
		"etc/permitd/permitd.json":               "cmd/permitd/packaging/permitd.json",
		"usr/share/doc/permitd/copyright":        "LICENSE",
	} {
		b, err := os.ReadFile(filepath.Join(x, pkg))
		if err != nil || string(b) != readFile(t, repo) {
			t.Errorf("the package's /%s is not the repository's %s (%v)", pkg, repo, err)
		}
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the install into a throwaway root (dpkg --root, a chroot) is left out")
		return
	}
	installIntoThrowawayRoot(t, deb)
}

// installIntoThrowawayRoot installs deb with dpkg --root into an empty
// root that has a shell (for the maintainer scripts, which dpkg runs
// chrooted), stubs of getent, addgroup and adduser that log their calls,
// and adduser marked installed; then checks the files and the user the
// postinst made, and removes the package.
func installIntoThrowawayRoot(t *testing.T, deb string) {
	dpkg := needTool(t, "dpkg", "dpkg")
	r := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "usr/bin", "usr/sbin", "bin", "dev"} {
		if err := os.MkdirAll(filepath.Join(r, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, text string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(r, rel), []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("var/lib/dpkg/status", "Package: adduser\nStatus: install ok installed\nPriority: important\nVersion: 3.134\n"+
		"Architecture: all\nMaintainer: none\nDescription: a stub in a throwaway root\n\n", 0o644)
	write("var/lib/dpkg/available", "", 0o644)
	write("var/lib/dpkg/info/adduser.list", "", 0o644)
	write("dev/null", "", 0o666)
	write("usr/bin/getent", "#!/bin/sh\nexit 2\n", 0o755)
	for _, s := range []string{"addgroup", "adduser"} {
		write("usr/sbin/"+s, "#!/bin/sh\necho \"$0 $*\" >> /stubs.log\n", 0o755)
	}
	// The host's shell and the libraries it loads, at the same paths.
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{sh}
	if ldd, err := exec.LookPath("ldd"); err == nil {
		out, _ := exec.Command(ldd, sh).Output()
		files = append(files, regexp.MustCompile(`(?m)(/\S+) \(0x`).FindAllString(string(out), -1)...)
	}
	for _, f := range files {
		f = strings.TrimSuffix(f, " (0x")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(r, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		write(strings.TrimPrefix(f, "/"), string(b), 0o755)
	}
	if err := os.Symlink(sh, filepath.Join(r, "bin/sh")); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}

	run(t, 2*time.Minute, nil, dpkg, "--root="+r, "--log=/dev/null", "--install", deb)
	for _, f := range []string{"usr/bin/permitd", "usr/lib/systemd/system/permitd.service", "etc/permitd/permitd.json", "etc/default/permitd"} {
		if _, err := os.Stat(filepath.Join(r, f)); err != nil {
			t.Errorf("after dpkg --install: %v", err)
		}
	}
	if s := run(t, time.Minute, nil, dpkg, "--root="+r, "--status", "permitd"); !strings.Contains(s, "Status: install ok installed\n") {
		t.Errorf("dpkg --status permitd: %s", s)
	}
	stubs, _ := os.ReadFile(filepath.Join(r, "stubs.log"))
	if !strings.Contains(string(stubs), "/usr/sbin/adduser --system --ingroup permitd ") || !strings.HasSuffix(string(stubs), " permitd\n") {
		t.Errorf("the postinst did not create the system user permitd; its calls: %q", stubs)
	}

	run(t, 2*time.Minute, nil, dpkg, "--root="+r, "--log=/dev/null", "--remove", "permitd")
	if _, err := os.Stat(filepath.Join(r, "usr/bin/permitd")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after dpkg --remove, /usr/bin/permitd: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r, "etc/permitd/permitd.json")); err != nil {
		t.Errorf("after dpkg --remove (not purge), the conffile is gone: %v", err)
	}
}

// syscallGroup returns the system calls of a systemd-analyze
// syscall-filter group (@system-service), its nested groups expanded.
func syscallGroup(t *testing.T, analyze, group string, into map[string]bool) {
	t.Helper()
	out := run(t, 30*time.Second, nil, analyze, "syscall-filter", group)
	lines := strings.Split(out, "\n")
	for _, l := range lines[1:] {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "@"):
			syscallGroup(t, analyze, l, into)
		default:
			into[l] = true
		}
	}
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestAgentFitsTheUnitSandbox: an agent of the release build, traced with
// strace while it bootstraps, leads, takes a limit and reserves, snapshots
// and stops on SIGTERM (as systemctl stop), makes only system calls permitd.service's
// SystemCallFilter lines allow, opens only sockets of its
// RestrictAddressFamilies, and maps no memory writable and executable
// (MemoryDenyWriteExecute): what the unit forbids would fail it under
// systemd (EPERM), which no test here runs.
func TestAgentFitsTheUnitSandbox(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	strace := needTool(t, "strace", "strace")
	bin := releaseBinary(t)
	unit := readFile(t, "cmd/permitd/packaging/permitd.service")
	allowed, denied := map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^SystemCallFilter=(~?)(.*)$`).FindAllStringSubmatch(unit, -1) {
		into := allowed
		if m[1] == "~" {
			into = denied
		}
		for _, g := range strings.Fields(m[2]) {
			if strings.HasPrefix(g, "@") {
				syscallGroup(t, analyze, g, into)
			} else {
				into[g] = true
			}
		}
	}
	if len(allowed) == 0 {
		t.Fatal("permitd.service has no allow-list SystemCallFilter= line")
	}
	families := map[string]bool{}
	if m := regexp.MustCompile(`(?m)^RestrictAddressFamilies=(.*)$`).FindStringSubmatch(unit); m != nil {
		for _, f := range strings.Fields(m[1]) {
			families[f] = true
		}
	}

	data, trace := t.TempDir(), filepath.Join(t.TempDir(), "strace.out")
	raft, httpAddr := freePort(t), freePort(t)
	agent := exec.Command(strace, "-f", "-qq", "-o", trace, bin, "agent", "--id", "n1", "--data-dir", data,
		"--raft-addr", raft, "--http-addr", httpAddr, "--initial-cluster", "n1="+raft,
		"--snapshot-threshold", "1", "--snapshot-interval", "50ms")
	logFile, err := os.Create(filepath.Join(t.TempDir(), "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	agent.Stdout, agent.Stderr = logFile, logFile
	logs := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()
	// The agent is strace's child: signals go to it (strace, signalled,
	// would detach and leave it running).
	pid := 0
	stopped := false
	defer func() {
		if !stopped {
			if pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			_ = agent.Process.Kill()
			<-done
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for pid == 0 {
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", agent.Process.Pid, agent.Process.Pid))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(children)))
		if pid == 0 && time.Now().After(deadline) {
			t.Fatalf("strace started no agent: %s", logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	servers := []string{"--servers", httpAddr}
	for {
		if _, err := tryRun(10*time.Second, nil, bin, append([]string{"limits", "put", "api", "--algorithm", "strict", "--rate", "1000", "--max-reserved", "100", "--expiry", "10s"}, servers...)...); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("limits put: %v; agent: %s", err, logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; i < 5; i++ {
		if out, err := tryRun(10*time.Second, nil, bin, append([]string{"reserve", "api", "--max-wait", "1s"}, servers...)...); err != nil {
			t.Fatalf("reserve: %v; %s", err, out)
		}
	}
	for {
		if snaps, _ := os.ReadDir(filepath.Join(data, "snapshots")); len(snaps) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot in %s; agent: %s", data, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("the agent under strace: %v; %s", err, logs())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent did not stop within 30 s of SIGTERM; %s", logs())
	}

	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	call := regexp.MustCompile(`^\d+ +(?:<\.\.\. )?([a-z_0-9]+)[( ]`)
	for _, l := range strings.Split(string(b), "\n") {
		if m := call.FindStringSubmatch(l); m != nil {
			used[m[1]] = true
			if m[1] == "socket" {
				if f := regexp.MustCompile(`socket\((AF_[A-Z0-9]+)`).FindStringSubmatch(l); f != nil && len(families) > 0 && !families[f[1]] {
					t.Errorf("the agent opened a socket of %s, outside RestrictAddressFamilies: %s", f[1], l)
				}
			}
			if (m[1] == "mmap" || m[1] == "mprotect") && strings.Contains(l, "PROT_WRITE|PROT_EXEC") {
				t.Errorf("the agent mapped memory writable and executable (MemoryDenyWriteExecute): %s", l)
			}
		}
	}
	if len(used) < 10 {
		t.Fatalf("strace recorded %d system calls: is its output format still parsed? %.500s", len(used), b)
	}
	var names []string
	for s := range used {
		if s == "execve" || s == "exit_group" {
			continue // strace's start of the program; the end, allowed (@default)
		}
		names = append(names, s)
		if !allowed[s] || denied[s] {
			t.Errorf("the agent calls %s, which permitd.service's SystemCallFilter forbids", s)
		}
	}
	t.Logf("the agent made %d distinct system calls (execve and exit_group aside)", len(names))
}
