package runner

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
)

func TestParseNemeses(t *testing.T) {
	tests := []struct {
		in   string
		want []NemesisSpec
		err  bool
	}{
		{"", nil, false},
		{"none", nil, false},
		{"partition,kill", []NemesisSpec{{Kind: "partition"}, {Kind: "kill"}}, false},
		{"partition:isolate-leader|bridge, clock", []NemesisSpec{{Kind: "partition", Variants: []string{"isolate-leader", "bridge"}}, {Kind: "clock"}}, false},
		{"flood", nil, true},
		{"kill:everyone", nil, true},
		{"kill,kill", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseNemeses(tt.in)
		if (err != nil) != tt.err || (err == nil && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("ParseNemeses(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseNemeses(%q): error %v does not wrap ErrInvalid", tt.in, err)
		}
	}
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	base := Config{OutDir: "x"}
	c, err := base.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Nodes != 3 || c.Workers != 4 || c.Workload != WorkloadStrict || c.Interval != 200*time.Millisecond ||
		c.Expiry != 100*time.Millisecond || c.MaxWait != time.Second || c.Tail != 15*time.Second || c.MaxPermits != 5 {
		t.Fatalf("defaults: %+v", c)
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   error
	}{
		{"leased max wait", func(c *Config) { c.Workload, c.MaxWait = WorkloadLeased, time.Second }, ErrInvalid},
		{"worker faults outside leased", func(c *Config) { c.Nemeses = []NemesisSpec{{Kind: FaultWorker}} }, ErrInvalid},
		{"unknown workload", func(c *Config) { c.Workload = "bulk" }, ErrInvalid},
		{"strict permits past max reserved + 1", func(c *Config) { c.MaxPermits = 6 }, ErrInvalid},
		{"negative permits", func(c *Config) { c.MaxPermits = -1 }, ErrInvalid},
		{"leased permits", func(c *Config) { c.Workload, c.MaxPermits = WorkloadLeased, 2 }, ErrInvalid},
		{"four nodes", func(c *Config) { c.Nodes = 4 }, ErrInvalid},
		{"no out", func(c *Config) { c.OutDir = "" }, ErrInvalid},
		{"short", func(c *Config) { c.Duration = 5 * time.Second }, ErrInvalid},
		{"expiry >= interval", func(c *Config) { c.Expiry = time.Second }, ErrInvalid},
		{"ring on 3 nodes", func(c *Config) { c.Nemeses = []NemesisSpec{{Kind: "partition", Variants: []string{"ring"}}} }, ErrInvalid},
		{"tail too short", func(c *Config) { c.Tail = 2 * time.Second }, ErrInvalid},
		{"schedule past heal", func(c *Config) {
			c.Schedule = []Event{{Fault: FaultKill, Variant: "leader", At: time.Second, Until: 59 * time.Second}}
		}, ErrInvalid},
	}
	for _, tt := range tests {
		c := base
		tt.change(&c)
		if _, err := c.withDefaults(); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestGenerateIsSeededAndBounded(t *testing.T) {
	nem, err := ParseNemeses("partition,kill,pause,clock,loss,snapshot")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Config{Nodes: 5, Nemeses: nem, Duration: 5 * time.Minute, Seed: 7, OutDir: "x"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a, b := Generate(cfg), Generate(cfg)
	if !reflect.DeepEqual(a, b) || len(a) < 10 {
		t.Fatalf("same seed, different or short schedules: %d and %d events", len(a), len(b))
	}
	cfg.Seed = 8
	if reflect.DeepEqual(a, Generate(cfg)) {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
	heal := cfg.Duration - cfg.Tail
	kinds := map[string]bool{}
	var lastPrimaryEnd time.Duration
	for _, ev := range a {
		if err := ev.validate(heal); err != nil {
			t.Fatal(err)
		}
		if ev.At < cfg.Warmup {
			t.Fatalf("%s starts at %v, in the warmup", ev.Name(), ev.At)
		}
		if !ev.Ambient {
			if ev.At < lastPrimaryEnd {
				t.Fatalf("primary faults overlap: %s at %v before %v", ev.Name(), ev.At, lastPrimaryEnd)
			}
			lastPrimaryEnd = ev.Until
		} else if ev.Fault != FaultClock && ev.Fault != FaultLoss {
			t.Fatalf("composed fault %s is not clock or loss", ev.Name())
		}
		kinds[ev.Fault] = true
		if ev.Fault == FaultLoss && (ev.Loss <= 0 || ev.Delay <= 0) {
			t.Fatalf("loss fault without parameters: %+v", ev)
		}
		if ev.Fault == FaultClock && (ev.ClockRate < 0.5 || ev.ClockRate > 2) {
			t.Fatalf("clock rate %v outside [0.5, 2]", ev.ClockRate)
		}
	}
	if len(kinds) < 5 {
		t.Fatalf("a 5-minute schedule used only %v", kinds)
	}
	cfg.Nemeses = nil
	if got := Generate(cfg); got != nil {
		t.Fatalf("no nemeses, schedule %v", got)
	}
}

// testNodes returns n agentNodes with distinct addresses (no processes).
func testNodes(n int) []*agentNode {
	var out []*agentNode
	for i := range n {
		id := string(rune('1' + i))
		out = append(out, &agentNode{ID: "n" + id, Index: i, RaftAddr: "127.0.0.1" + id + ":7000"})
	}
	return out
}

func TestPartitionShapes(t *testing.T) {
	nodes := testNodes(5)
	// Bridge: two pairs that cannot talk, one node talking to all.
	af := &activeFault{blocks: map[string][]string{}}
	p := permuted(nodes, 42)
	blockGroups(af, p[:2], p[3:])
	if len(af.blocks[p[2].ID]) != 0 {
		t.Fatalf("bridge node %s blocks %v", p[2].ID, af.blocks[p[2].ID])
	}
	for _, n := range append(slices.Clone(p[:2]), p[3:]...) {
		if len(af.blocks[n.ID]) != 2 {
			t.Fatalf("%s blocks %v, want the other pair", n.ID, af.blocks[n.ID])
		}
	}
	if !reflect.DeepEqual(permuted(nodes, 42), p) {
		t.Fatal("permuted is not deterministic in its pick")
	}
	// Isolating one node: it blocks all 4 others, each of them blocks it.
	af = &activeFault{blocks: map[string][]string{}}
	blockGroups(af, nodes[:1], nodes[1:])
	if len(af.blocks["n1"]) != 4 || !reflect.DeepEqual(af.blocks["n2"], []string{nodes[0].RaftAddr}) {
		t.Fatalf("isolate: %v", af.blocks)
	}
}

func TestDesiredComposesFaults(t *testing.T) {
	nodes := testNodes(3)
	nm := &nemesis{cl: &cluster{nodes: nodes}, active: map[int]*activeFault{}}
	nm.active[0] = &activeFault{blocks: map[string][]string{"n1": {nodes[1].RaftAddr}}, blockDial: map[string][]string{}, loss: map[string]faultState{}}
	nm.active[1] = &activeFault{blocks: map[string][]string{"n1": {nodes[2].RaftAddr, nodes[1].RaftAddr}}, blockDial: map[string][]string{"n2": {nodes[0].RaftAddr}},
		loss: map[string]faultState{"n1": {Loss: 0.05, Delay: "5ms", Jitter: "2ms"}}}
	got := nm.desired()
	want := faultState{Block: []string{nodes[1].RaftAddr, nodes[2].RaftAddr}, BlockDial: []string{}, Loss: 0.05, Delay: "5ms", Jitter: "2ms"}
	if !got["n1"].equal(want) {
		t.Fatalf("n1: %+v, want %+v", got["n1"], want)
	}
	if !got["n2"].equal(faultState{Block: []string{}, BlockDial: []string{nodes[0].RaftAddr}, Delay: "0s", Jitter: "0s"}) {
		t.Fatalf("n2: %+v", got["n2"])
	}
	if !got["n3"].equal(faultState{Block: []string{}, BlockDial: []string{}, Delay: "0s", Jitter: "0s"}) {
		t.Fatalf("n3: %+v", got["n3"])
	}
}

// TestPermitDraws: mostly 1, the others within 2..max, the same sequence
// for the same seed and worker, another for another worker.
func TestPermitDraws(t *testing.T) {
	draw := func(seed uint64, id int, max int64) []int64 {
		d := newPermitDraws(seed, id, max)
		out := make([]int64, 400)
		for i := range out {
			out[i] = d.next()
		}
		return out
	}
	a := draw(3, 1, 5)
	if !slices.Equal(a, draw(3, 1, 5)) || slices.Equal(a, draw(3, 2, 5)) {
		t.Fatal("draws are not a function of seed and worker")
	}
	ones, seen := 0, map[int64]bool{}
	for _, n := range a {
		if n < 1 || n > 5 {
			t.Fatalf("drew %d, want 1..5", n)
		}
		if n == 1 {
			ones++
		}
		seen[n] = true
	}
	if ones < 250 || ones > 350 || len(seen) != 5 {
		t.Fatalf("%d ones of 400, counts seen %v: want about 300 and every count", ones, seen)
	}
	for _, n := range draw(3, 1, 1) {
		if n != 1 {
			t.Fatalf("max 1 drew %d", n)
		}
	}
}

func TestWorkerPoolPause(t *testing.T) {
	wp := newWorkerPool(5)
	half := wp.pickHalf(3)
	if len(half) != 3 || !slices.IsSorted(half) || !reflect.DeepEqual(half, wp.pickHalf(3)) {
		t.Fatalf("pickHalf: %v", half)
	}
	wp.pause([]int{1})
	done := make(chan struct{})
	go func() { wp.pausePoint(t.Context(), 1); close(done) }()
	wp.pausePoint(t.Context(), 2) // not paused: returns at once
	select {
	case <-done:
		t.Fatal("paused worker went on")
	default:
	}
	wp.resumeAll()
	<-done
}

// syntheticRun writes a small report from made-up data: the phases, the
// checkers' inputs and the page must hold together without a cluster.
func TestReportFromSyntheticRun(t *testing.T) {
	dir := t.TempDir()
	var buf strings.Builder
	var now int64
	hw := history.NewWriter(&buf, func() int64 { now += 100e6; return now }) // 100 ms per op
	put, _ := hw.Invoke(9, "", history.FPut, "", history.LimitRequest{Limit: "jl-strict"})
	hw.Complete(put, history.OK, "", "", nil)
	nem, _ := hw.Invoke(-1, "", history.FNemesis, "", history.NemesisValue{Fault: "kill", Targets: []string{"n1"}})
	for i := range 3 {
		inv, _ := hw.Invoke(0, "", history.FReserve, "", history.ReserveRequest{Limit: "jl-strict", Permits: 1, MaxWaitNanos: 1e9})
		hw.Complete(inv, history.OK, "", "id"+string(rune('a'+i)), history.ReserveResponse{Granted: true})
	}
	hw.Complete(nem, history.Info, "", "", nil)
	if err := hw.Flush(); err != nil {
		t.Fatal(err)
	}
	ops, err := history.Read(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	end := ops[len(ops)-1].TimeNanos + 1e9
	sent := []int64{0, 300e6, 320e6}
	calls := []fakeapi.Call{{Seq: 0, Worker: "w", TimeNanos: 1e6, SentNanos: &sent[0]}, {Seq: 1, Worker: "w", TimeNanos: 301e6, SentNanos: &sent[1]}, {Seq: 2, Worker: "w", TimeNanos: 321e6, SentNanos: &sent[2]}}
	if err := writeCalls(filepath.Join(dir, "api-calls.jsonl"), calls); err != nil {
		t.Fatal(err)
	}
	sum := &Summary{
		Verdict: "unsafe", ExitCode: ExitSafety, Config: Config{OutDir: dir, Workload: WorkloadStrict, Nodes: 3},
		Limit:     limitInfo{Name: "jl-strict", IntervalNanos: 200e6, ExpiryNanos: 100e6, RatePerSecond: 5},
		HealNanos: ops[len(ops)-1].TimeNanos, EndNanos: end,
		Nemeses:       []NemesisRecord{{Event: Event{Fault: FaultKill, Variant: "leader"}, Targets: []string{"n1"}, StartNanos: nem.TimeNanos, EndNanos: ops[len(ops)-1].TimeNanos}},
		LeaderChanges: []LeaderChange{{TimeNanos: 0, Leader: "n1", Term: 2}, {TimeNanos: 2e6, Leader: "", Term: 0}},
		Checkers:      []checker.Result{{Name: "spacing", Valid: false, Violations: []string{"too close <b>"}, Details: map[string]any{"violations_total": 1}}},
	}
	sum.Phases = phases(ops, sum)
	if len(sum.Phases) == 0 || sum.Phases[0].Name != "warmup" {
		t.Fatalf("phases: %+v", sum.Phases)
	}
	var reserves int
	for _, p := range sum.Phases {
		reserves += p.Reserves
	}
	if reserves != 3 {
		t.Fatalf("phases count %d reserves, want 3: %+v", reserves, sum.Phases)
	}
	if got := violationTimes(sum, calls); !reflect.DeepEqual(got, []int64{321e6}) {
		t.Fatalf("violation times %v, want the third call", got)
	}
	page := renderHTML(sum)
	for _, want := range []string{"<svg", "kill:leader", "too close &lt;b&gt;", "UNSAFE", `fill="#d00000"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if used := callsAtUse(calls); used[1].TimeNanos != 300e6 {
		t.Fatalf("callsAtUse: %+v", used)
	}
}

func TestSearchTimeoutIsNotAViolation(t *testing.T) {
	res := func(per map[string]string, total int) checker.Result {
		return checker.Result{Name: "linearizability", Details: map[string]any{"per_limit": per, "violations_total": total}}
	}
	tests := []struct {
		r    checker.Result
		want bool
	}{
		{res(map[string]string{"a": "Unknown"}, 1), true},
		{res(map[string]string{"a": "Unknown", "b": "Ok"}, 1), true},
		{res(map[string]string{"a": "Illegal"}, 1), false},
		{res(map[string]string{"a": "Unknown"}, 2), false}, // and an op-level fault
		{checker.Result{Name: "spacing", Details: map[string]any{"violations_total": 1}}, false},
	}
	for i, tt := range tests {
		if got := searchTimedOut(tt.r); got != tt.want {
			t.Errorf("case %d: %v, want %v", i, got, tt.want)
		}
	}
}

// TestWindowBoundCountsLargestGrant: the bursty bound's n_last is the
// largest grant a worker asks for, since a grant's permits are used
// together.
func TestWindowBoundCountsLargestGrant(t *testing.T) {
	li := limitInfo{IntervalNanos: int64(200 * time.Millisecond), MaxStoredNanos: int64(time.Second), MaxPermits: 3}
	b, err := li.bound(WorkloadWindow)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Max(int64(time.Second)); got != 10+3 {
		t.Fatalf("Max(1s) = %d, want floor((1s + 1s)/200ms) + 3 = 13 (%s)", got, b.Formula)
	}
	li.MaxPermits = 0 // an older summary: one permit per grant
	if b, _ = li.bound(WorkloadWindow); b.Max(int64(time.Second)) != 11 {
		t.Fatalf("Max(1s) = %d with n_last 1, want 11", b.Max(int64(time.Second)))
	}
}
