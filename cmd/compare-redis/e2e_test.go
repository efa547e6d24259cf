package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"
)

// e2e_test.go: the command against real agents (and a real redis-server
// when one is installed), so that a default of permitd's that breaks the
// comparison (a strict limit's default expiry of half a nanosecond at
// 1e9/s refused every reserve) fails CI, not the next person who runs it.

// testPermitd builds the agent as the command does (buildPermitd), with
// the race detector when the test binary has it (the flags of cmd/permitd's
// own tests, whose build CI has just cached).
func testPermitd(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds and starts permitd agents")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH")
	}
	ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
	defer cancel()
	var progress bytes.Buffer
	bin, err := buildPermitd(ctx, t.TempDir(), &progress, raceBuildFlags...)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	return bin
}

// TestPermitdSideGrantsOnEveryProtocol starts the 3-node cluster the
// comparison runs, creates its limit (which checks that every node grants
// a first reserve) and sends reserves over each --protocol to every node:
// each must be granted, none refused or failed.
func TestPermitdSideGrantsOnEveryProtocol(t *testing.T) {
	bin := testPermitd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sup := &supervisor{}
	t.Cleanup(func() {
		if err := sup.stopAll(); err != nil {
			t.Error(err)
		}
	})
	pc, err := startCluster(ctx, sup, bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.createLimit(ctx, defaultRate, time.Second, defaultBurst); err != nil {
		t.Fatal(err)
	}
	for _, protocol := range []string{protocolBinary, protocolClient, protocolHTTP} {
		decide, closeDecider, err := pc.protocolDecider(protocol, pc.httpAddrs)
		if err != nil {
			t.Fatalf("%s: %v", protocol, err)
		}
		for seq := range 2 * len(pc.httpAddrs) {
			granted, err := decide(ctx, 0, seq)
			if err != nil || !granted {
				t.Errorf("--protocol %s: reserve %d: granted %v, error %v; want a grant", protocol, seq, granted, err)
			}
		}
		closeDecider()
	}
}

// TestRunsAsTheREADMESays runs the command as the README does (go run -C
// cmd/compare-redis . --rounds 2 --duration 4s --target leader
// --protocol P), shortened to one round of a fifth of a second at
// concurrency 2, against a real redis-server: it exits 0 and both sides
// made decisions without an error or a refusal. Skipped without
// redis-server (CI installs it: .ci/run).
func TestRunsAsTheREADMESays(t *testing.T) {
	redisBin, err := exec.LookPath(defaultRedisName)
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	bin := testPermitd(t)
	var stdout, stderr bytes.Buffer
	code := runMain([]string{"--rounds", "1", "--duration", "200ms", "--warmup", "0s", "--concurrency", "2",
		"--target", "leader", "--protocol", protocolClient, "--json",
		"--redis-server", redisBin, "--install-redis=false", "--permitd-bin", bin}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout.String())
	}
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want 1 (concurrency 2):\n%s", len(rep.Results), stdout.String())
	}
	for _, side := range []struct {
		name string
		sum  sideSummary
	}{{sideRedis, rep.Results[0].Redis}, {sidePermitd, rep.Results[0].Permitd}} {
		if side.sum.Decisions == 0 || side.sum.Errors != 0 || side.sum.Refused != 0 {
			t.Errorf("%s: %d decisions, %d errors (first: %s), %d refused; want decisions and neither errors nor refusals",
				side.name, side.sum.Decisions, side.sum.Errors, side.sum.FirstError, side.sum.Refused)
		}
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", stderr.String())
	}
}
