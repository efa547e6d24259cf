package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// testVersion is the version the test binary is built with.
const testVersion = "v0.0.0-clitest"

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// TestMain removes the binary built for the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildPermitd builds this package's binary once per test run, with the
// race detector and version testVersion, and returns its path.
func buildPermitd(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "permitd-test-bin-"); buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "permitd")
		build := exec.Command("go", "build", "-race", "-ldflags", "-X main.version="+testVersion, "-o", buildBin, ".")
		build.Stderr = os.Stderr
		buildErr = build.Run()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return buildBin
}
