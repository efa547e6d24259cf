package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
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

// requirePeerEnv names the variable under which (CI: .ci/run) a missing
// redis-server or etcd fails the end-to-end tests instead of skipping them.
const requirePeerEnv = "PERMITD_REQUIRE_COMPARE_PEERS"

// peerBin returns the path of a peer's server binary, or skips the test
// when it is not installed (fails under requirePeerEnv=1).
func peerBin(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(requirePeerEnv) == "1" {
			t.Fatalf("%s is not installed and %s=1 (apt-get install %s)", name, requirePeerEnv, pkg)
		}
		t.Skipf("%s is not installed (apt-get install %s)", name, pkg)
	}
	return p
}

// TestEtcdGCRAHoldsUnderContention starts the 3-member etcd the comparison
// runs, with a limit of burst 10 and one permit an hour, and has 8 workers
// make 5 decisions each at once on the shared client: the compare-and-swap
// must grant exactly 10 (a lost update would grant more) and refuse the
// rest, without an error.
func TestEtcdGCRAHoldsUnderContention(t *testing.T) {
	bin := peerBin(t, defaultEtcdName, "etcd-server")
	if testing.Short() {
		t.Skip("-short: starts etcd")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sup := &supervisor{}
	t.Cleanup(func() {
		if err := sup.stopAll(); err != nil {
			t.Error(err)
		}
	})
	// startEtcd's own first decision takes one of the 10.
	ec, err := startEtcd(ctx, sup, bin, t.TempDir(), 1, time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	decide, cli, err := ec.decider(ec.endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var granted, refused, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for seq := range 5 {
				ok, err := decide(ctx, w, seq)
				switch {
				case err != nil:
					failed.Add(1)
					t.Errorf("worker %d decision %d: %v", w, seq, err)
				case ok:
					granted.Add(1)
				default:
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if granted.Load() != 9 || refused.Load() != 31 || failed.Load() != 0 {
		t.Errorf("%d granted, %d refused, %d errors; want 9 (the burst of 10 less the first decision), 31, 0", granted.Load(), refused.Load(), failed.Load())
	}
}

// TestRunsAsTheREADMESays runs the command as the README does (go run -C
// cmd/compare-redis . --rounds 3 --duration 3s --target leader), shortened
// to one round of a fifth of a second at concurrency 2, against a real
// redis-server and etcd, over both default protocols and the Go client:
// it exits 0, every side made decisions without an error or a refusal,
// and the report's summary table has the columns. Skipped without
// redis-server or etcd, except under PERMITD_REQUIRE_COMPARE_PEERS=1 (CI
// installs both: .ci/run).
func TestRunsAsTheREADMESays(t *testing.T) {
	redisBin := peerBin(t, defaultRedisName, "redis-server")
	etcdBin := peerBin(t, defaultEtcdName, "etcd-server")
	bin := testPermitd(t)
	args := []string{"--rounds", "1", "--duration", "200ms", "--warmup", "0s", "--concurrency", "2", "--target", "leader",
		"--protocol", "binary,http,client", "--json",
		"--redis-server", redisBin, "--install-redis=false", "--etcd", etcdBin, "--install-etcd=false", "--permitd-bin", bin}
	var stdout, stderr bytes.Buffer
	code := runMain(args, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout.String())
	}
	if len(rep.Results) != 1 || len(rep.Results[0].Sides) != 6 || len(rep.Results[0].Ratios) != 9 {
		t.Fatalf("want 1 result (concurrency 2) with 6 sides and 9 ratios:\n%s", stdout.String())
	}
	for _, side := range rep.Results[0].Sides {
		if side.Decisions == 0 || side.Errors != 0 || side.Refused != 0 {
			t.Errorf("%s: %d decisions, %d errors (first: %s), %d refused; want decisions and neither errors nor refusals",
				side.Side, side.Decisions, side.Errors, side.FirstError, side.Refused)
		}
	}
	for _, r := range rep.Results[0].Ratios {
		if r.Min == nil || len(r.PerRound) != 1 || r.P50Min == nil || len(r.P50PerRound) != 1 {
			t.Errorf("%s / %s: per round %v, min %v, p50 per round %v; want one round's ratios", r.Permitd, r.Peer, r.PerRound, r.Min, r.P50PerRound)
		}
	}
	if rep.Environment.EtcdVersion == "" || rep.Environment.RedisVersion == "" {
		t.Errorf("environment %+v: want both peers' versions", rep.Environment)
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", stderr.String())
	}
	// The markdown report of the same results.
	stdout.Reset()
	if err := writeReport(&stdout, rep); err != nil {
		t.Fatal(err)
	}
	head := "| concurrency | Redis | etcd | raft | binary | HTTP | client | binary / Redis | HTTP / Redis | client / Redis | binary / etcd | HTTP / etcd | client / etcd | binary p50 / raft p50 | HTTP p50 / raft p50 | client p50 / raft p50 |"
	if !strings.Contains(stdout.String(), head) {
		t.Errorf("markdown report lacks the summary header %s:\n%s", head, stdout.String())
	}
}

// TestRaftSideCommits starts the bare raft cluster the comparison runs
// (3 nodes in this process, fsync on) and measures it for real as a side
// for a second at concurrency 2: every decision commits, none fails, and
// each has its latency.
func TestRaftSideCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a raft cluster on disk")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rc, err := startRaft(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rc.stop(); err != nil {
			t.Error(err)
		}
	})
	s, err := runClosedLoop(ctx, closedLoop{concurrency: 2, duration: time.Second}, rc.decider(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Granted == 0 || s.Errors != 0 || s.Refused != 0 || len(s.latencies) != int(s.Granted) {
		t.Fatalf("raft side: %d committed, %d errors (first: %s), %d refused, %d latencies; want commits, each with its latency, and no error", s.Granted, s.Errors, s.FirstError, s.Refused, len(s.latencies))
	}
	if st := rc.leader.Load().Stats(); st["num_peers"] != "2" {
		t.Errorf("the leader has %s peers; want the 2 other nodes replicating every entry", st["num_peers"])
	}
	t.Logf("bare raft: %d commits in 1s at concurrency 2", s.Granted)
}

// The nethttp peer runs as the README says: its server answers every
// reserve the http side sends, and the report has the ratio of permitd's
// HTTP to the ceiling.
func TestNetHTTPCeilingPeer(t *testing.T) {
	bin := testPermitd(t)
	args := []string{"--rounds", "1", "--duration", "200ms", "--warmup", "0s", "--concurrency", "2", "--target", "leader",
		"--peers", "nethttp", "--protocol", "http", "--json", "--permitd-bin", bin}
	var stdout, stderr bytes.Buffer
	if code := runMain(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout.String())
	}
	if len(rep.Results) != 1 || len(rep.Results[0].Sides) != 2 || len(rep.Results[0].Ratios) != 1 {
		t.Fatalf("want 1 result with 2 sides and 1 ratio:\n%s", stdout.String())
	}
	for _, side := range rep.Results[0].Sides {
		if side.Decisions == 0 || side.Errors != 0 || side.Refused != 0 {
			t.Errorf("%s: %d decisions, %d errors (first: %s), %d refused; want decisions and neither errors nor refusals",
				side.Side, side.Decisions, side.Errors, side.FirstError, side.Refused)
		}
	}
	if r := rep.Results[0].Ratios[0]; r.Permitd != protocolHTTP || r.Peer != sideNetHTTP || r.Min == nil {
		t.Errorf("ratio %+v: want HTTP / nethttp", r)
	}
	stdout.Reset()
	if err := writeReport(&stdout, rep); err != nil {
		t.Fatal(err)
	}
	if head := "| concurrency | net/http ceiling | HTTP | HTTP / net/http ceiling |"; !strings.Contains(stdout.String(), head) {
		t.Errorf("markdown report lacks the summary header %s:\n%s", head, stdout.String())
	}
}
