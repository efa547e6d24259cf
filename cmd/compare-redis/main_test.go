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
		{Side: sidePermitd, Concurrency: 16, Round: 1, Seconds: 2, Granted: 500, Errors: 1, FirstError: "HTTP 503", latencies: []time.Duration{ms(4)}},
		{Side: sideRedis, Concurrency: 16, Round: 2, Seconds: 2, Granted: 1999, Refused: 1, latencies: []time.Duration{ms(2)}},
		{Side: sidePermitd, Concurrency: 16, Round: 2, Seconds: 2, Granted: 500, latencies: []time.Duration{ms(8), ms(6)}},
		{Side: sideRedis, Concurrency: 1, Round: 1, Seconds: 1, Granted: 10, latencies: []time.Duration{ms(1)}},
	}
	got := compare([]int{1, 16, 128}, samples)
	if len(got) != 2 {
		t.Fatalf("compare: %d comparisons, want 2 (128 has no samples)", len(got))
	}
	c := got[1]
	if c.Concurrency != 16 || c.Redis.Rounds != 2 || c.Permitd.Rounds != 2 {
		t.Fatalf("comparison = %+v, want concurrency 16 with 2 rounds a side", c)
	}
	if c.Redis.Decisions != 4000 || c.Redis.Refused != 1 || c.Redis.ThroughputDPS != 1000 {
		t.Errorf("redis = %+v, want 4000 decisions, 1 refused, 1000/s", c.Redis)
	}
	if c.Permitd.Decisions != 1000 || c.Permitd.Errors != 1 || c.Permitd.ThroughputDPS != 250 || c.Permitd.FirstError != "HTTP 503" {
		t.Errorf("permitd = %+v, want 1000 decisions, 1 error, 250/s, first error HTTP 503", c.Permitd)
	}
	if c.Redis.P50Ms != 2 || c.Permitd.P50Ms != 6 || c.Permitd.MaxMs != 8 {
		t.Errorf("p50 redis %v permitd %v, max permitd %v; want 2, 6, 8", c.Redis.P50Ms, c.Permitd.P50Ms, c.Permitd.MaxMs)
	}
	if c.ThroughputRatio == nil || *c.ThroughputRatio != 0.25 || c.P50Ratio == nil || *c.P50Ratio != 3 {
		t.Errorf("ratios throughput %v p50 %v, want 0.25 and 3", c.ThroughputRatio, c.P50Ratio)
	}
	if one := got[0]; one.ThroughputRatio != nil || !math.IsNaN(float64(one.Permitd.P50Ms)) {
		t.Errorf("concurrency 1 without permitd samples: ratio %v p50 %v, want nil and NaN", one.ThroughputRatio, one.Permitd.P50Ms)
	}
}

func TestWriteTable(t *testing.T) {
	r := 0.5
	cmps := []comparison{{
		Concurrency:     128,
		Redis:           sideSummary{ThroughputDPS: 40000.4, P50Ms: 2.5, P99Ms: 12.25, Errors: 0, Refused: 0},
		Permitd:         sideSummary{ThroughputDPS: 20000, P50Ms: 0.1234, P99Ms: 150, Errors: 3, Refused: 1},
		ThroughputRatio: &r,
	}}
	var b strings.Builder
	if err := writeTable(&b, cmps); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table has %d lines, want header, rule, one row:\n%s", len(lines), b.String())
	}
	want := "| 128 | 40000 | 2.50 | 12.2 | 0/0 | 20000 | 0.123 | 150 | 3/1 | 0.50× | – |"
	if lines[2] != want {
		t.Errorf("row\n got %s\nwant %s", lines[2], want)
	}
	for i, l := range lines {
		if n := strings.Count(l, "|"); n != 12 {
			t.Errorf("line %d has %d pipes, want 12 (11 columns): %s", i, n, l)
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
	if !equalInts(cfg.Concurrency, []int{1, 16, 128, 512}) || cfg.Rounds != 2 || cfg.Duration != 5*time.Second || cfg.Warmup != time.Second || cfg.Target != targetAll {
		t.Errorf("defaults = %+v", cfg)
	}
	bad := [][]string{
		{"--rounds", "0"},
		{"--rounds", "101"},
		{"--duration", "1ms"},
		{"--duration", "11m"},
		{"--warmup", "-1s"},
		{"--target", "followers"},
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
	for deadline := time.Now().Add(10 * time.Second); stubborn.logTail(100) != "trapped"; {
		if time.Now().After(deadline) || !stubborn.running() {
			t.Fatalf("stubborn child did not set its trap: %q", stubborn.logTail(100))
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	if !polite.running() || !stubborn.running() {
		t.Fatal("children not running after start")
	}
	err = sup.stopAll()
	if err == nil || !strings.Contains(err.Error(), "stubborn") || strings.Contains(err.Error(), "polite") {
		t.Errorf("stopAll error = %v, want one naming only the stubborn child", err)
	}
	for _, c := range []*child{polite, stubborn} {
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
		ServerCPUSec: maybeFloat(math.NaN()), ClientCPUSec: 0.5}}
	rep := report{Results: compare([]int{1}, samples), Runs: samples}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	for _, want := range []string{`"p50_ms":null`, `"throughput_ratio":null`, `"server_cpu_s":null`, `"client_cpu_s":0.5`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON does not contain %s:\n%s", want, b)
		}
	}
}

func TestCPUSummary(t *testing.T) {
	samples := []runSample{
		{Side: sidePermitd, Concurrency: 8, Seconds: 2, Granted: 1000, ServerCPUSec: 1, ClientCPUSec: 0.25},
		{Side: sidePermitd, Concurrency: 8, Seconds: 2, Granted: 1000, ServerCPUSec: 2, ClientCPUSec: 0.25},
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
