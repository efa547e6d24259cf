package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestPercentileMs(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(float64(i + 1))
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   float64
	}{
		{"one value p50", []time.Duration{ms(3)}, 0.5, 3},
		{"one value max", []time.Duration{ms(3)}, 1, 3},
		{"1..100 p50", hundred, 0.5, 50},
		{"1..100 p99", hundred, 0.99, 99},
		{"1..100 max", hundred, 1, 100},
		{"two values p50 is the lower", []time.Duration{ms(1), ms(2)}, 0.5, 1},
		{"two values p99 is the upper", []time.Duration{ms(1), ms(2)}, 0.99, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentileMs(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentileMs(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
	if got := percentileMs(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("percentileMs(empty) = %v, want NaN", got)
	}
}

func TestCompareMergesRoundsAndComputesRatios(t *testing.T) {
	samples := []runSample{
		{Side: sideRedis, Concurrency: 16, Round: 1, Seconds: 2, Granted: 2000, latencies: []time.Duration{ms(1), ms(3)}},
		{Side: protocolBinary, Concurrency: 16, Round: 1, Seconds: 2, Granted: 500, Errors: 1, FirstError: "HTTP 503", latencies: []time.Duration{ms(4)}},
		{Side: sideEtcd, Concurrency: 16, Round: 1, Seconds: 2, Granted: 100, latencies: []time.Duration{ms(20)}},
		{Side: sideRedis, Concurrency: 16, Round: 2, Seconds: 2, Granted: 1999, Refused: 1, latencies: []time.Duration{ms(2)}},
		{Side: protocolBinary, Concurrency: 16, Round: 2, Seconds: 2, Granted: 500, latencies: []time.Duration{ms(8), ms(6)}},
		{Side: sideEtcd, Concurrency: 16, Round: 2, Seconds: 2, Granted: 50, latencies: []time.Duration{ms(30)}},
		{Side: sideRedis, Concurrency: 1, Round: 1, Seconds: 1, Granted: 10, latencies: []time.Duration{ms(1)}},
	}
	got := compare([]int{1, 16, 128}, []string{sideRedis, sideEtcd, protocolBinary}, samples)
	if len(got) != 2 {
		t.Fatalf("compare: %d comparisons, want 2 (128 has no samples)", len(got))
	}
	c := got[1]
	if c.Concurrency != 16 || len(c.Sides) != 3 || c.Sides[0].Side != sideRedis || c.Sides[1].Side != sideEtcd || c.Sides[2].Side != protocolBinary {
		t.Fatalf("comparison = %+v, want concurrency 16 with redis, etcd, binary", c)
	}
	redis, binary := c.Sides[0], c.Sides[2]
	if redis.Rounds != 2 || redis.Decisions != 4000 || redis.Refused != 1 || redis.ThroughputDPS != 1000 {
		t.Errorf("redis = %+v, want 2 rounds, 4000 decisions, 1 refused, 1000/s", redis)
	}
	if binary.Decisions != 1000 || binary.Errors != 1 || binary.ThroughputDPS != 250 || binary.FirstError != "HTTP 503" {
		t.Errorf("binary = %+v, want 1000 decisions, 1 error, 250/s, first error HTTP 503", binary)
	}
	if redis.P50Ms != 2 || binary.P50Ms != 6 || binary.MaxMs != 8 {
		t.Errorf("p50 redis %v binary %v, max binary %v; want 2, 6, 8", redis.P50Ms, binary.P50Ms, binary.MaxMs)
	}
	if len(c.Ratios) != 2 || c.Ratios[0].Peer != sideRedis || c.Ratios[1].Peer != sideEtcd || c.Ratios[0].Permitd != protocolBinary {
		t.Fatalf("ratios = %+v, want binary/redis then binary/etcd", c.Ratios)
	}
	r := c.Ratios[0]
	if r.Throughput == nil || *r.Throughput != 0.25 || r.P50 == nil || *r.P50 != 3 {
		t.Errorf("binary/redis throughput %v p50 %v, want 0.25 and 3", r.Throughput, r.P50)
	}
	// Per round: 250/1000 twice (a refusal is a decision); against etcd
	// 250/50 and 250/25.
	if len(r.PerRound) != 2 || r.Min == nil || *r.Min != 0.25 || r.Max == nil || *r.Max != 0.25 || fmtRange(r) != "0.25" {
		t.Errorf("binary/redis per round %v min %v max %v (%s), want 0.25 twice", r.PerRound, r.Min, r.Max, fmtRange(r))
	}
	if e := c.Ratios[1]; e.Min == nil || *e.Min != 5 || *e.Max != 10 || fmtRange(e) != "5.00–10.0" {
		t.Errorf("binary/etcd range %v–%v (%s), want 5–10", e.Min, e.Max, fmtRange(e))
	}
	if one := got[0]; len(one.Ratios) != 0 || !math.IsNaN(float64(one.Sides[2].P50Ms)) {
		t.Errorf("concurrency 1 with only redis samples: ratios %v, binary p50 %v; want none and NaN", one.Ratios, one.Sides[2].P50Ms)
	}
}

func TestWriteTable(t *testing.T) {
	lo, hi := 0.0312, 0.0749
	cmps := []comparison{{
		Concurrency: 128,
		Sides: []sideResult{
			{Side: sideRedis, sideSummary: sideSummary{ThroughputDPS: 50812.4}},
			{Side: sideEtcd, sideSummary: sideSummary{ThroughputDPS: 7.6}},
			{Side: protocolHTTP, sideSummary: sideSummary{ThroughputDPS: 16249}},
		},
		Ratios: []ratioResult{{Permitd: protocolHTTP, Peer: sideRedis, Min: &lo, Max: &hi}, {Permitd: protocolHTTP, Peer: sideEtcd}},
	}}
	var b strings.Builder
	if err := writeTable(&b, cmps); err != nil {
		t.Fatal(err)
	}
	want := "| concurrency | Redis | etcd | HTTP | HTTP / Redis | HTTP / etcd |\n" +
		"|---:|---:|---:|---:|---|---|\n" +
		"| 128 | 50 800/s | 8/s | 16 200/s | 0.03–0.07 | – |\n"
	if b.String() != want {
		t.Errorf("table\n got %s\nwant %s", b.String(), want)
	}
	b.Reset()
	if err := writeDetailTable(&b, cmps); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("detail table has %d lines, want header, rule, 3 rows:\n%s", len(lines), b.String())
	}
	for i, l := range lines {
		if n := strings.Count(l, "|"); n != 9 {
			t.Errorf("line %d has %d pipes, want 9 (8 columns): %s", i, n, l)
		}
	}
}

func TestFmtRate(t *testing.T) {
	for in, want := range map[float64]string{0: "0/s", 7.6: "8/s", 464: "464/s", 1046: "1 050/s", 12699: "12 700/s", 1234567: "1 230 000/s"} {
		if got := fmtRate(in); got != want {
			t.Errorf("fmtRate(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestGCRAStepAsTheScript(t *testing.T) {
	// Burst 3, 10ns per permit: three grants at the same instant, the
	// fourth refused; one more as soon as one interval has passed.
	p := gcraParams{emissionNanos: 10, burst: 3}
	tat, granted := int64(0), 0
	for range 5 {
		ok, next := gcraStep(p, tat, 100)
		if ok {
			granted++
			tat = next
		}
	}
	if granted != 3 || tat != 130 {
		t.Errorf("at one instant: %d granted, TAT %d; want 3, 130", granted, tat)
	}
	if ok, _ := gcraStep(p, tat, 109); ok {
		t.Error("granted 9ns later, want refused until an interval has passed")
	}
	if ok, next := gcraStep(p, tat, 110); !ok || next != 140 {
		t.Errorf("10ns later: %v, TAT %d; want granted, 140", ok, next)
	}
	if ok, next := gcraStep(p, 50, 1000); !ok || next != 1010 {
		t.Errorf("TAT in the past: %v, TAT %d; want granted from now, 1010", ok, next)
	}
}

func TestParseList(t *testing.T) {
	got, err := parseList("--peers", " etcd, redis,", sideRedis, sideEtcd)
	if err != nil || strings.Join(got, ",") != "etcd,redis" {
		t.Errorf("parseList = %v, %v; want [etcd redis]", got, err)
	}
	for _, bad := range []string{"", ",", "redis,redis", "memcached"} {
		if _, err := parseList("--peers", bad, sideRedis, sideEtcd); err == nil || !strings.Contains(err.Error(), "compare-redis: --peers") || !strings.Contains(err.Error(), "redis, etcd") && !strings.Contains(err.Error(), "twice") {
			t.Errorf("parseList(%q) error %v, want one naming --peers and what is allowed", bad, err)
		}
	}
}

func TestParseLevels(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"1,16,128,512", []int{1, 16, 128, 512}, false},
		{" 4 , 8,", []int{4, 8}, false},
		{"", nil, true},
		{"0", nil, true},
		{"-1", nil, true},
		{"4097", nil, true},
		{"x", nil, true},
		{"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", nil, true},
	}
	for _, tt := range tests {
		got, err := parseLevels(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && !equalInts(got, tt.want)) {
			t.Errorf("parseLevels(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "compare-redis: --concurrency") {
			t.Errorf("parseLevels(%q) error %q does not name the flag", tt.in, err)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags(nil, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if !equalInts(cfg.Concurrency, []int{1, 16, 128, 512}) || cfg.Rounds != 2 || cfg.Duration != 5*time.Second || cfg.Warmup != time.Second || cfg.Target != targetAll ||
		strings.Join(cfg.Peers, ",") != "redis,etcd,raft" || strings.Join(cfg.Protocols, ",") != "binary,http" {
		t.Errorf("defaults = %+v", cfg)
	}
	bad := [][]string{
		{"--rounds", "0"},
		{"--rounds", "101"},
		{"--duration", "1ms"},
		{"--duration", "11m"},
		{"--warmup", "-1s"},
		{"--target", "followers"},
		{"--peers", "memcached"},
		{"--protocol", "grpc"},
		{"--protocol", ""},
		{"--rate", "0"},
		{"--rate", "2e9"}, // emission interval below 1ns
		{"--burst", "0"},
		{"extra"},
	}
	for _, args := range bad {
		if _, err := parseFlags(args, &strings.Builder{}); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	if _, err := parseFlags([]string{"--help"}, &strings.Builder{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v, want flag.ErrHelp", err)
	}
}

func TestNewGCRAParams(t *testing.T) {
	p, err := newGCRAParams(1e9, time.Second, 1000000, 42)
	if err != nil || p.emissionNanos != 1 || p.burst != 1000000 || p.epochSeconds != 42 {
		t.Errorf("1e9/s: %+v, %v; want emission 1ns", p, err)
	}
	p, err = newGCRAParams(3, time.Second, 1, 0)
	if err != nil || p.emissionNanos != 333333333 {
		t.Errorf("3/s: %+v, %v; want emission 333333333ns", p, err)
	}
	for _, tc := range []struct {
		rate  float64
		per   time.Duration
		burst int64
	}{
		{math.NaN(), time.Second, 1}, {math.Inf(1), time.Second, 1}, {-1, time.Second, 1},
		{1, 0, 1}, {1, time.Second, 0}, {1e10, time.Second, 1}, {1e-9, time.Second, 1 << 40},
	} {
		if _, err := newGCRAParams(tc.rate, tc.per, tc.burst, 0); err == nil || !strings.HasPrefix(err.Error(), "compare-redis: ") {
			t.Errorf("newGCRAParams(%v, %v, %d) error = %v, want a compare-redis error", tc.rate, tc.per, tc.burst, err)
		}
	}
}

func TestGCRAScriptShape(t *testing.T) {
	for _, want := range []string{`redis.call("TIME")`, "KEYS[1]", "ARGV[4]", `"PX"`, "return {cost"} {
		if !strings.Contains(gcraScript, want) {
			t.Errorf("gcra.lua does not contain %q", want)
		}
	}
}

func TestRunClosedLoopCountsOnlyTheMeasuredWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers = 4
		decide := func(ctx context.Context, w, seq int) (bool, error) {
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
				return false, ctx.Err()
			}
			switch {
			case w == 1 && seq%10 == 0:
				return false, errors.New("boom")
			case w == 2:
				return false, nil
			}
			return true, nil
		}
		s, err := runClosedLoop(t.Context(), closedLoop{workers, 10 * time.Millisecond, 100 * time.Millisecond}, decide, nil)
		if err != nil {
			t.Fatal(err)
		}
		total := s.Granted + s.Refused + s.Errors
		// Each worker completes one request per fake millisecond; the
		// window holds 100 or 101 completions per worker.
		if total < workers*100 || total > workers*101 {
			t.Errorf("total %d, want %d..%d", total, workers*100, workers*101)
		}
		if s.Refused < 100 || s.Refused > 101 || s.Errors < 10 || s.Errors > 11 || s.FirstError != "boom" {
			t.Errorf("refused %d errors %d first %q, want ~100, ~10, boom", s.Refused, s.Errors, s.FirstError)
		}
		if int64(len(s.latencies)) != s.Granted+s.Refused {
			t.Errorf("%d latencies for %d decisions", len(s.latencies), s.Granted+s.Refused)
		}
		for _, l := range s.latencies {
			if l != time.Millisecond {
				t.Fatalf("latency %v, want 1ms (fake clock)", l)
			}
		}
		if s.Seconds != 0.1 {
			t.Errorf("seconds %v, want 0.1", s.Seconds)
		}
	})
}

func TestRunClosedLoopStopsWhenCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		decide := func(ctx context.Context, w, seq int) (bool, error) {
			if seq == 5 && w == 0 {
				cancel()
			}
			select {
			case <-time.After(time.Millisecond):
				return true, nil
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		if _, err := runClosedLoop(ctx, closedLoop{2, 0, time.Hour}, decide, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled run: %v, want context.Canceled", err)
		}
	})
}

func TestSupervisorStopsChildrenAndRemovesDirs(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	tmp := filepath.Join(dir, "run")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	sup := &supervisor{grace: 200 * time.Millisecond}
	sup.removeOnStop(tmp)
	polite, err := sup.start("polite", filepath.Join(dir, "polite.log"), "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	// Ignores SIGTERM (the ignored disposition survives exec): needs SIGKILL.
	stubborn, err := sup.start("stubborn", filepath.Join(dir, "stubborn.log"), "sh", "-c", `trap "" TERM; echo trapped; exec sleep 30`)
	if err != nil {
		t.Fatal(err)
	}
	// Ignores SIGTERM too, but is marked to be killed at once: no error.
	discarded, err := sup.start("discarded", filepath.Join(dir, "discarded.log"), "sh", "-c", `trap "" TERM; echo trapped; exec sleep 30`)
	if err != nil {
		t.Fatal(err)
	}
	discarded.killAtStop = true
	for _, c := range []*child{stubborn, discarded} {
		for deadline := time.Now().Add(10 * time.Second); c.logTail(100) != "trapped"; {
			if time.Now().After(deadline) || !c.running() {
				t.Fatalf("%s child did not set its trap: %q", c.name, c.logTail(100))
			}
			time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
		}
	}
	if !polite.running() || !stubborn.running() {
		t.Fatal("children not running after start")
	}
	err = sup.stopAll()
	if err == nil || !strings.Contains(err.Error(), "stubborn") || strings.Contains(err.Error(), "polite") || strings.Contains(err.Error(), "discarded") {
		t.Errorf("stopAll error = %v, want one naming only the stubborn child", err)
	}
	for _, c := range []*child{polite, stubborn, discarded} {
		if c.running() {
			t.Errorf("%s still running", c.name)
		}
		if err := c.cmd.Process.Signal(syscall.Signal(0)); err == nil {
			t.Errorf("%s (pid %d) still exists", c.name, c.cmd.Process.Pid)
		}
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("%s not removed: %v", tmp, err)
	}
	if err := sup.stopAll(); err != nil {
		t.Errorf("second stopAll: %v", err)
	}
	if _, err := sup.start("late", filepath.Join(dir, "late.log"), "sleep", "30"); err == nil {
		t.Error("start after stopAll succeeded")
	}
}

func TestFreeLoopbackPorts(t *testing.T) {
	ports, err := freeLoopbackPorts(6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Errorf("ports %v: want 6 distinct positive ports", ports)
		}
		seen[p] = true
	}
}

func TestReportJSONEncodesMissingValuesAsNull(t *testing.T) {
	samples := []runSample{{Side: sideRedis, Concurrency: 1, Round: 1, Seconds: 1, Errors: 5,
		ServerCPUSec: maybeFloat(math.NaN()), ClientCPUSec: 0.5},
		{Side: protocolBinary, Concurrency: 1, Round: 1, Seconds: 1, Granted: 3, ServerCPUSec: 1, ClientCPUSec: 1}}
	rep := report{Results: compare([]int{1}, []string{sideRedis, protocolBinary}, samples), Runs: samples}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	for _, want := range []string{`"p50_ms":null`, `"throughput":null`, `"throughput_per_round":[null]`, `"server_cpu_s":null`, `"client_cpu_s":0.5`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON does not contain %s:\n%s", want, b)
		}
	}
}

func TestCPUSummary(t *testing.T) {
	samples := []runSample{
		{Side: protocolBinary, Concurrency: 8, Seconds: 2, Granted: 1000, ServerCPUSec: 1, ClientCPUSec: 0.25},
		{Side: protocolBinary, Concurrency: 8, Seconds: 2, Granted: 1000, ServerCPUSec: 2, ClientCPUSec: 0.25},
	}
	s := summarize(samples)
	if s.ServerCores != 0.75 || s.ServerCPUUsPerDec != 1500 || s.ClientCores != 0.125 || s.ClientCPUUsPerDec != 250 {
		t.Errorf("summary = %+v, want server 0.75 cores 1500µs/decision, client 0.125 cores 250µs/decision", s)
	}
	if got := fmtCPU(s.ServerCores, s.ServerCPUUsPerDec); got != "0.75 (1500 µs)" {
		t.Errorf("fmtCPU = %q", got)
	}
}

func TestProcCPUSeconds(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := procCPUSeconds(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := procCPUSeconds(-1); err == nil {
		t.Error("procCPUSeconds(-1) succeeded")
	}
	m := &cpuMeter{pids: []int{os.Getpid()}}
	m.start()
	server, client := m.stop()
	if server < 0 || client < 0 || math.IsNaN(server) || math.IsNaN(client) {
		t.Errorf("meter = %v, %v; want two non-negative numbers", server, client)
	}
	if s, c := (&cpuMeter{}).stop(); !math.IsNaN(s) || !math.IsNaN(c) {
		t.Errorf("unstarted meter = %v, %v; want NaN", s, c)
	}
}
