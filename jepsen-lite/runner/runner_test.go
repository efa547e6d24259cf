package runner

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
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
		if err := ev.Validate(heal); err != nil {
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
	_ = renderHTML(sum) // without worker stats
	sum.Workers = WorkerStats{Granted: 3, PermitsGranted: 5, MultiPermitGrants: 1}
	page := renderHTML(sum)
	for _, want := range []string{"<svg", "kill:leader", "too close &lt;b&gt;", "UNSAFE", `fill="#d00000"`, "<b>1 of several permits</b>"} {
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

// TestConfigMode checks --mode's values: auto by default, the three modes
// accepted, anything else rejected with the allowed values.
func TestConfigMode(t *testing.T) {
	for _, tt := range []struct{ in, want string }{{"", ModeAuto}, {ModeAuto, ModeAuto}, {ModeNamespaces, ModeNamespaces}, {ModeFallback, ModeFallback}} {
		c, err := Config{OutDir: t.TempDir(), Mode: tt.in}.withDefaults()
		if err != nil || c.Mode != tt.want {
			t.Errorf("mode %q: got %q, %v; want %q", tt.in, c.Mode, err, tt.want)
		}
	}
	_, err := Config{OutDir: t.TempDir(), Mode: "netns"}.withDefaults()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "auto, namespaces, fallback") {
		t.Errorf("mode netns: %v, want ErrInvalid listing the modes", err)
	}
}
