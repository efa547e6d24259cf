package main

import (
	"bytes"
	"context"
	"math"
	"net"
	"strings"
	"testing"
	"time"
)

func TestParseCPUTicksReadsStealAndTheTotal(t *testing.T) {
	// A real aggregate line: user nice system idle iowait irq softirq steal guest guest_nice.
	got := parseCPUTicks("cpu  4705 150 1120 16250 520 0 37 300 100 0\n")
	if !got.ok || got.steal != 300 || got.total != 4705+150+1120+16250+520+0+37+300 {
		t.Fatalf("parseCPUTicks = %+v; want steal 300, total %d (guest time is inside user)", got, 4705+150+1120+16250+520+37+300)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x", "intr 1 2 3 4 5 6 7 8"} {
		if got := parseCPUTicks(bad); got.ok {
			t.Errorf("parseCPUTicks(%q) = %+v; want not ok", bad, got)
		}
	}
}

func TestStealPercentBetweenTwoReadings(t *testing.T) {
	a := cpuTicks{steal: 100, total: 1000, ok: true}
	b := cpuTicks{steal: 150, total: 2000, ok: true}
	if got := a.pctUntil(b); math.Abs(got-5) > 1e-9 {
		t.Errorf("steal between readings = %v%%; want 5%%", got)
	}
	for _, tc := range []struct {
		name string
		a, b cpuTicks
	}{
		{"unreadable first", cpuTicks{}, b},
		{"unreadable second", a, cpuTicks{}},
		{"no time passed", a, a},
		{"counter went back", b, cpuTicks{steal: 10, total: 3000, ok: true}},
	} {
		if got := tc.a.pctUntil(tc.b); got != -1 {
			t.Errorf("%s: %v; want -1 (unknown)", tc.name, got)
		}
	}
}

func TestMedianOfPasses(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{9, 5, 7}, 7},
		{[]float64{8, 2, 6, 4}, 5},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v; want %v", tc.xs, got, tc.want)
		}
	}
	xs := []float64{3, 1, 2}
	median(xs)
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("median reordered its argument: %v", xs)
	}
}

// fakeBench answers bench passes from a script: the goodput of each
// closed-loop pass in turn, and the open loop's report; it records every
// pass's flags.
type fakeBench struct {
	closed []float64
	open   BenchResult
	seen   []benchFlags
}

func (f *fakeBench) run(_ context.Context, b benchFlags) (BenchResult, error) {
	f.seen = append(f.seen, b)
	if b.mode == "open" {
		return f.open, nil
	}
	g := f.closed[0]
	f.closed = f.closed[1:]
	if g == 0 {
		return BenchResult{Mode: b.mode}, nil
	}
	return BenchResult{Mode: b.mode, Requests: 1000, Granted: 1000, GoodputRPS: g}, nil
}

func overloadFlags() benchFlags {
	return benchFlags{mode: "overload", create: true, concurrency: 32768, duration: time.Minute, maxRequests: 7,
		overloadFactor: 3, capacityPasses: 3, capacityDuration: 5 * time.Second, capacityConcurrency: 64}
}

func TestOverloadRunsPassesAroundAnOpenLoopAtAMultipleOfTheirMedian(t *testing.T) {
	f := &fakeBench{
		closed: []float64{1, 8000, 6000, 7000, 9000, 10000, 5000}, // warm-up, 3 before, 3 after
		open:   BenchResult{Mode: "open", Requests: 100, GoodputRPS: 6300, LeaderBefore: "n1", TermBefore: 2, LeaderAfter: "n1", TermAfter: 2},
	}
	t0 := time.Unix(1000, 0)
	ms := uint64(time.Millisecond)
	samples := []phaseSample{
		{cpuTicks{0, 1000, true}, 0, t0, commitTotals{5, 20, 10 * ms, true}},
		{cpuTicks{10, 2000, true}, 4 * time.Second, t0.Add(20 * time.Second), commitTotals{105, 1620, 140*ms + 10*ms, true}},
		{cpuTicks{110, 3000, true}, 34 * time.Second, t0.Add(80 * time.Second), commitTotals{305, 4620, 140*ms + 10*ms + 400*ms, true}},
		{cpuTicks{110, 4000, true}, 38 * time.Second, t0.Add(100 * time.Second), commitTotals{}}, // a node unreadable
	}
	sample := func() phaseSample { s := samples[0]; samples = samples[1:]; return s }
	res, err := benchOverload(context.Background(), overloadFlags(), f.run, sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.seen) != 8 {
		t.Fatalf("%d passes; want a warm-up, 3 before, the open loop, 3 after", len(f.seen))
	}
	for i, b := range f.seen {
		if i == 4 {
			continue
		}
		if b.mode != "closed" || b.concurrency != 64 || b.duration != 5*time.Second || b.maxRequests != 0 || b.create != (i == 0) {
			t.Errorf("pass %d: mode %s, concurrency %d, duration %v, max requests %d, create %v; want closed, 64, 5s, 0, %v",
				i, b.mode, b.concurrency, b.duration, b.maxRequests, b.create, i == 0)
		}
	}
	if o := f.seen[4]; o.mode != "open" || o.openRate != 21000 || o.concurrency != 32768 || o.duration != time.Minute || o.create {
		t.Errorf("open loop: mode %s, rate %v, concurrency %d, duration %v, create %v; want open, 3 x 7000, 32768, 1m0s, false",
			o.mode, o.openRate, o.concurrency, o.duration, o.create)
	}
	// The median of 8000 6000 7000 9000 10000 5000 (the warm-up's 1 left out).
	if res.CapacityRPS != 7500 || res.OfferedRPS != 21000 || res.GoodputRatio != 6300.0/7500 || res.LeaderHeld != "yes" {
		t.Errorf("capacity %v, offered %v, ratio %v, leader held %s; want 7500, 21000, 0.84, yes", res.CapacityRPS, res.OfferedRPS, res.GoodputRatio, res.LeaderHeld)
	}
	if res.StealPct != [3]float64{1, 10, 0} {
		t.Errorf("steal %v; want [1 10 0]", res.StealPct)
	}
	if res.GeneratorCores != [3]float64{0.2, 0.5, 0.2} {
		t.Errorf("generator cores %v; want [0.2 0.5 0.2] (4 s in 20 s, 30 s in 60 s, 4 s in 20 s)", res.GeneratorCores)
	}
	// 100 entries of 1600 reserves in 140 ms, then 200 of 3000 in 400 ms;
	// the last reading failed.
	if res.ReservesPerBatch != [3]float64{16, 15, -1} || res.CommitMillis != [3]float64{1.4, 2, -1} {
		t.Errorf("reserves per batch %v, commit ms %v; want [16 15 -1] and [1.4 2 -1]", res.ReservesPerBatch, res.CommitMillis)
	}
	var out strings.Builder
	printOverload(&out, res)
	if want := "reserve entries before / during / after (the nodes' /v1/status): 16.0 / 15.0 / unknown reserves each, committed in 1.40 / 2.00 / unknown ms"; !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant a line %q", out.String(), want)
	}
}

// TestCommitTotalsNeedTwoReadingsWithEntriesBetween: no reading, counters
// that went back (a node restarted) or no entry in between give -1, not a
// mean over nothing.
func TestCommitTotalsNeedTwoReadingsWithEntriesBetween(t *testing.T) {
	ok := commitTotals{10, 160, 14e6, true}
	for _, tc := range []struct {
		name        string
		from, later commitTotals
		batch, ms   float64
	}{
		{"both read", ok, commitTotals{20, 310, 34e6, true}, 15, 2},
		{"the first unread", commitTotals{}, commitTotals{20, 310, 34e6, true}, -1, -1},
		{"the later unread", ok, commitTotals{}, -1, -1},
		{"no entry between", ok, ok, -1, -1},
		{"counters went back", ok, commitTotals{3, 48, 4e6, true}, -1, -1},
	} {
		if b, m := tc.from.batchUntil(tc.later), tc.from.commitMillisUntil(tc.later); b != tc.batch || m != tc.ms {
			t.Errorf("%s: batch %v, commit %v ms; want %v, %v", tc.name, b, m, tc.batch, tc.ms)
		}
	}
}

func TestOverloadRefusesAPassThatDecidedNothing(t *testing.T) {
	for _, tc := range []struct {
		closed []float64
		want   string
	}{
		{[]float64{0}, "the warm-up pass: no reserve was decided"},
		{[]float64{1, 5000, 0}, "capacity pass 2 of 3 before the open loop: no reserve was decided"},
		{[]float64{1, 5000, 5000, 5000, 5000, 5000, 0}, "capacity pass 3 of 3 after the open loop: no reserve was decided"},
	} {
		f := &fakeBench{closed: tc.closed, open: BenchResult{Mode: "open", Requests: 1}}
		_, err := benchOverload(context.Background(), overloadFlags(), f.run, func() phaseSample { return phaseSample{selfCPU: -1} })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("passes %v: error %v; want one containing %q", tc.closed, err, tc.want)
		}
	}
}

func TestOverloadReportsWhetherTheLeaderHeld(t *testing.T) {
	for _, tc := range []struct {
		open BenchResult
		want string
	}{
		{BenchResult{LeaderBefore: "n1", TermBefore: 2, LeaderAfter: "n1", TermAfter: 3}, "no"},
		{BenchResult{LeaderBefore: "n1", TermBefore: 2, LeaderAfter: "n2", TermAfter: 3}, "no"},
		{BenchResult{LeaderBefore: "n1", TermBefore: 2}, "unknown"},
	} {
		tc.open.Mode, tc.open.Requests, tc.open.GoodputRPS = "open", 1, 1
		f := &fakeBench{closed: []float64{1, 1, 1, 1, 1, 1, 1}, open: tc.open}
		res, err := benchOverload(context.Background(), overloadFlags(), f.run, func() phaseSample { return phaseSample{selfCPU: -1} })
		if err != nil || res.LeaderHeld != tc.want || res.StealPct != [3]float64{-1, -1, -1} || res.GeneratorCores != [3]float64{-1, -1, -1} ||
			res.ReservesPerBatch != [3]float64{-1, -1, -1} || res.CommitMillis != [3]float64{-1, -1, -1} {
			t.Errorf("%+v: leader held %q, steal %v, generator cores %v (%v); want %q and unknown steal and cores",
				tc.open, res.LeaderHeld, res.StealPct, res.GeneratorCores, err, tc.want)
		}
	}
}

// A script running the overload measurement reads its exit status: a
// cluster that answers nothing fails the run (1) with the pass named, and
// prints no report.
func TestOverloadModeExitsOneWhenAPassFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var stdout, stderr bytes.Buffer
	code := runBench([]string{"--mode", "overload", "--servers", addr, "--create=false", "--protocol", "binary",
		"--capacity-concurrency", "2", "--capacity-duration", "100ms", "--warmup", "0s", "--json"}, &stdout, &stderr)
	if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "the warm-up pass") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1, nothing, an error naming the warm-up pass", code, stdout.String(), stderr.String())
	}
}
