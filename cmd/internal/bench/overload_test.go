package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	open   Result
	seen   []Config
}

func (f *fakeBench) run(_ context.Context, b Config) (Result, error) {
	f.seen = append(f.seen, b)
	if b.Mode == "open" {
		return f.open, nil
	}
	g := f.closed[0]
	f.closed = f.closed[1:]
	if g == 0 {
		return Result{Mode: b.Mode}, nil
	}
	return Result{Mode: b.Mode, Requests: 1000, Granted: 1000, GoodputRPS: g}, nil
}

func overloadFlags() Config {
	return Config{Mode: "overload", Create: true, Concurrency: 32768, Duration: time.Minute, MaxRequests: 7,
		OverloadFactor: 3, CapacityPasses: 3, CapacityDuration: 5 * time.Second, CapacityConcurrency: 64}
}

func TestOverloadRunsPassesAroundAnOpenLoopAtAMultipleOfTheirMedian(t *testing.T) {
	f := &fakeBench{
		closed: []float64{1, 8000, 6000, 7000, 9000, 10000, 5000}, // warm-up, 3 before, 3 after
		open:   Result{Mode: "open", Requests: 100, GoodputRPS: 6300, LeaderBefore: "n1", TermBefore: 2, LeaderAfter: "n1", TermAfter: 2},
	}
	t0 := time.Unix(1000, 0)
	ms := uint64(time.Millisecond)
	// Two nodes: the leader's counters grow, the follower's stay.
	reading := func(batches, reserves, nanos uint64) commitReading {
		return commitReading{nodes: []commitCounters{{batches, reserves, nanos}, {7, 70, 70 * ms}}}
	}
	samples := []phaseSample{
		{cpuTicks{0, 1000, true}, 0, t0, reading(5, 20, 10*ms)},
		{cpuTicks{10, 2000, true}, 4 * time.Second, t0.Add(20 * time.Second), reading(105, 1620, 140*ms+10*ms)},
		{cpuTicks{110, 3000, true}, 34 * time.Second, t0.Add(80 * time.Second), reading(305, 4620, 140*ms+10*ms+400*ms)},
		{cpuTicks{110, 4000, true}, 38 * time.Second, t0.Add(100 * time.Second), commitReading{err: errors.New("reading the status of n2: HTTP 401")}},
	}
	sample := func() phaseSample { s := samples[0]; samples = samples[1:]; return s }
	res, err := overload(context.Background(), overloadFlags(), f.run, sample)
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
		if b.Mode != "closed" || b.Concurrency != 64 || b.Duration != 5*time.Second || b.MaxRequests != 0 || b.Create != (i == 0) {
			t.Errorf("pass %d: mode %s, concurrency %d, duration %v, max requests %d, create %v; want closed, 64, 5s, 0, %v",
				i, b.Mode, b.Concurrency, b.Duration, b.MaxRequests, b.Create, i == 0)
		}
	}
	if o := f.seen[4]; o.Mode != "open" || o.OpenRate != 21000 || o.Concurrency != 32768 || o.Duration != time.Minute || o.Create {
		t.Errorf("open loop: mode %s, rate %v, concurrency %d, duration %v, create %v; want open, 3 x 7000, 32768, 1m0s, false",
			o.Mode, o.OpenRate, o.Concurrency, o.Duration, o.Create)
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
	if res.CommitReadError != "reading the status of n2: HTTP 401" {
		t.Errorf("commit read error %q; want the failed reading's", res.CommitReadError)
	}
	var out strings.Builder
	PrintOverload(&out, res)
	for _, want := range []string{
		"reserve entries before / during / after (the nodes' /v1/status): 16.0 / 15.0 / unknown reserves each, committed in 1.40 / 2.00 / unknown ms\n",
		"(the reserve entries: reading the status of n2: HTTP 401)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report:\n%s\nwant a line %q", out.String(), want)
		}
	}
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"reserves_per_batch":[16,15,-1]`, `"commit_ms":[1.4,2,-1]`, `"commit_read_error":"reading the status of n2: HTTP 401"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON %s; want %s", js, want)
		}
	}
}

// TestOverloadControlRunsAClosedLoopInPlaceOfTheOpenLoop: with --control
// the middle phase is a closed loop at the passes' concurrency for
// --duration, nothing is offered, and its goodput over the passes' median
// is the ratio reported.
func TestOverloadControlRunsAClosedLoopInPlaceOfTheOpenLoop(t *testing.T) {
	f := &fakeBench{closed: []float64{1, 8000, 6000, 7000, 7200, 9000, 10000, 5000}} // warm-up, 3 before, control, 3 after
	b := overloadFlags()
	b.Control = true
	res, err := overload(context.Background(), b, f.run, func() phaseSample { return phaseSample{} })
	if err != nil {
		t.Fatal(err)
	}
	if len(f.seen) != 8 {
		t.Fatalf("%d passes; want a warm-up, 3 before, the control, 3 after", len(f.seen))
	}
	if m := f.seen[4]; m.Mode != "closed" || m.Concurrency != 64 || m.Duration != time.Minute || m.MaxRequests != 0 || m.Create {
		t.Errorf("control: mode %s, concurrency %d, duration %v, max requests %d, create %v; want closed, 64, 1m0s, 0, false",
			m.Mode, m.Concurrency, m.Duration, m.MaxRequests, m.Create)
	}
	if !res.Control || res.Factor != 0 || res.OfferedRPS != 0 || res.CapacityRPS != 7500 || res.GoodputRatio != 7200.0/7500 {
		t.Errorf("control %v, factor %v, offered %v, capacity %v, ratio %v; want true, 0, 0, 7500, 0.96",
			res.Control, res.Factor, res.OfferedRPS, res.CapacityRPS, res.GoodputRatio)
	}
	var out strings.Builder
	PrintOverload(&out, res)
	if want := "control: a closed loop like the passes in place of the open loop (nothing overloaded)"; !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant %q", out.String(), want)
	}
	if js, _ := json.Marshal(res); !strings.Contains(string(js), `"control":true`) {
		t.Errorf("JSON %s; want \"control\":true", js)
	}
}

// TestCommitReadingsNeedTwoReadsWithEntriesBetween: a failed reading, a
// node whose counters went back (it restarted, even while the sum grew)
// or no entry in between give -1, not a mean over nothing or a wrapped
// difference.
func TestCommitReadingsNeedTwoReadsWithEntriesBetween(t *testing.T) {
	two := func(a, b commitCounters) commitReading { return commitReading{nodes: []commitCounters{a, b}} }
	from := two(commitCounters{10, 160, 14e6}, commitCounters{1000, 16000, 1e9})
	failed := commitReading{err: errors.New("down")}
	for _, tc := range []struct {
		name        string
		from, later commitReading
		batch, ms   float64
	}{
		{"both read", from, two(commitCounters{20, 310, 34e6}, commitCounters{1000, 16000, 1e9}), 15, 2},
		{"both nodes committed", from, two(commitCounters{20, 310, 34e6}, commitCounters{1010, 16170, 1.006e9}), 16, 1.3},
		{"the first failed", failed, two(commitCounters{20, 310, 34e6}, commitCounters{1000, 16000, 1e9}), -1, -1},
		{"the later failed", from, failed, -1, -1},
		{"no entry between", from, from, -1, -1},
		{"a node restarted while the sum grew", from, two(commitCounters{1500, 24000, 2e9}, commitCounters{3, 48, 4e6}), -1, -1},
		{"reserves went back", from, two(commitCounters{20, 150, 34e6}, commitCounters{1000, 16000, 1e9}), -1, -1},
		{"nanoseconds went back", from, two(commitCounters{20, 310, 4e6}, commitCounters{1000, 16000, 1e9}), -1, -1},
		{"another server count", from, commitReading{nodes: []commitCounters{{20, 310, 34e6}}}, -1, -1},
	} {
		if b, m := tc.from.batchUntil(tc.later), tc.from.commitMillisUntil(tc.later); b != tc.batch || m != tc.ms {
			t.Errorf("%s: batch %v, commit %v ms; want %v, %v", tc.name, b, m, tc.batch, tc.ms)
		}
	}
}

// TestReadCommitsReadsEveryServer: the counters of every server are read
// with the token; a server that answers an error, has no counters (an
// older version) or cannot be reached makes the whole reading fail with
// a reason that names it.
func TestReadCommitsReadsEveryServer(t *testing.T) {
	var (
		mu     sync.Mutex
		tokens []string
	)
	serve := func(body string, code int) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/status" {
				http.NotFound(w, r)
				return
			}
			mu.Lock()
			tokens = append(tokens, r.Header.Get("Authorization"))
			mu.Unlock()
			w.WriteHeader(code)
			io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	leader := serve(`{"id":"n1","reserve_batches":3,"batched_reserves":40,"reserve_batch_ns":5000}`, 200)
	follower := serve(`{"id":"n2","reserve_batches":0,"batched_reserves":0,"reserve_batch_ns":0}`, 200)
	old := serve(`{"id":"n3","pending_reserves":0}`, 200)
	denied := serve(`{"error":"unauthorized"}`, 401)
	closed := serve("", 200)
	closed.Close()
	b := Config{Token: "s3cret"}
	hc := benchHTTPClient(1, nil)

	r := readCommits(context.Background(), hc, []string{addr(leader), addr(follower)}, b)
	if r.err != nil || len(r.nodes) != 2 || r.nodes[0] != (commitCounters{3, 40, 5000}) || r.nodes[1] != (commitCounters{}) {
		t.Errorf("reading %+v; want the two nodes' counters", r)
	}
	mu.Lock()
	seen := append([]string(nil), tokens...)
	mu.Unlock()
	if len(seen) != 2 {
		t.Errorf("%d status requests; want one to each server", len(seen))
	}
	for _, tok := range seen {
		if tok != "Bearer s3cret" {
			t.Errorf("Authorization %q; want the bench token", tok)
		}
	}
	for _, tc := range []struct {
		name, server, want string
	}{
		{"an older node", addr(old), "has no reserve_batches"},
		{"a refused token", addr(denied), "HTTP 401"},
		{"a node down", addr(closed), "reading the status of " + addr(closed)},
	} {
		r := readCommits(context.Background(), hc, []string{addr(leader), tc.server}, b)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) || !strings.Contains(r.err.Error(), tc.server) || r.nodes != nil {
			t.Errorf("%s: reading %+v; want no counters and an error naming %s and containing %q", tc.name, r, tc.server, tc.want)
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
		f := &fakeBench{closed: tc.closed, open: Result{Mode: "open", Requests: 1}}
		_, err := overload(context.Background(), overloadFlags(), f.run, func() phaseSample { return phaseSample{selfCPU: -1} })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("passes %v: error %v; want one containing %q", tc.closed, err, tc.want)
		}
	}
}

func TestOverloadReportsWhetherTheLeaderHeld(t *testing.T) {
	for _, tc := range []struct {
		open Result
		want string
	}{
		{Result{LeaderBefore: "n1", TermBefore: 2, LeaderAfter: "n1", TermAfter: 3}, "no"},
		{Result{LeaderBefore: "n1", TermBefore: 2, LeaderAfter: "n2", TermAfter: 3}, "no"},
		{Result{LeaderBefore: "n1", TermBefore: 2}, "unknown"},
	} {
		tc.open.Mode, tc.open.Requests, tc.open.GoodputRPS = "open", 1, 1
		f := &fakeBench{closed: []float64{1, 1, 1, 1, 1, 1, 1}, open: tc.open}
		res, err := overload(context.Background(), overloadFlags(), f.run, func() phaseSample { return phaseSample{selfCPU: -1} })
		if err != nil || res.LeaderHeld != tc.want || res.StealPct != [3]float64{-1, -1, -1} || res.GeneratorCores != [3]float64{-1, -1, -1} ||
			res.ReservesPerBatch != [3]float64{-1, -1, -1} || res.CommitMillis != [3]float64{-1, -1, -1} {
			t.Errorf("%+v: leader held %q, steal %v, generator cores %v, reserves per batch %v, commit ms %v (%v); want %q and every reading unknown",
				tc.open, res.LeaderHeld, res.StealPct, res.GeneratorCores, res.ReservesPerBatch, res.CommitMillis, err, tc.want)
		}
	}
}
