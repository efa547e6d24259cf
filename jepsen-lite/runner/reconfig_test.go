package runner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/nemesis"
)

// TestLimitPutsAndFastest: the puts of a reconfigured strict limit, read
// back from the history, give the linearizability checker its epochs and
// the bounds the fastest configuration (here the original one).
func TestLimitPutsAndFastest(t *testing.T) {
	var buf strings.Builder
	var now int64
	hw := history.NewWriter(&buf, func() int64 { now += 10e6; return now })
	li := limitInfo{Name: "jl-strict", IntervalNanos: int64(200 * time.Millisecond), ExpiryNanos: int64(100 * time.Millisecond), MaxReserved: 4}
	put := func(proc int, interval time.Duration, typ history.Type) {
		_, rec := nemesis.LimitSpec(nemesis.Limit{Name: li.Name, Strict: true, IntervalNanos: li.IntervalNanos, MaxReserved: li.MaxReserved, ExpiryNanos: li.ExpiryNanos}, interval)
		inv, err := hw.Invoke(proc, "", history.FPut, "", history.LimitRequest{Limit: li.Name, Config: rec})
		if err != nil {
			t.Fatal(err)
		}
		if typ != "" {
			if _, err := hw.Complete(inv, typ, "", "", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(4, 200*time.Millisecond, history.OK)  // creates the limit
	put(-3, 600*time.Millisecond, history.OK) // slows it down ×3
	put(-3, 200*time.Millisecond, history.Info)
	put(-3, 200*time.Millisecond, history.OK) // back
	other, _ := hw.Invoke(5, "", history.FPut, "", history.LimitRequest{Limit: "jl-probe", Config: map[string]any{"per": "1ms", "rate": 1}})
	hw.Complete(other, history.OK, "", "", nil)
	if err := hw.Flush(); err != nil {
		t.Fatal(err)
	}
	ops, err := history.Read(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	puts, err := limitPuts(ops, li.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(puts) != 4 || puts[1].IntervalNanos != int64(600*time.Millisecond) || puts[1].MaxReserved != 4 || puts[1].ExpiryNanos != li.ExpiryNanos || puts[2].ReturnNanos != -1 || !puts[3].OK {
		t.Fatalf("puts %+v", puts)
	}
	changes := registerChanges(puts, li)
	want := []checker.RegisterChange{
		{OpIndex: puts[1].OpIndex, CallNanos: puts[1].CallNanos, ReturnNanos: puts[1].ReturnNanos, IntervalNanos: int64(600 * time.Millisecond), MaxReserved: 4},
		{OpIndex: puts[2].OpIndex, CallNanos: puts[2].CallNanos, ReturnNanos: -1, IntervalNanos: li.IntervalNanos, MaxReserved: 4},
		{OpIndex: puts[3].OpIndex, CallNanos: puts[3].CallNanos, ReturnNanos: puts[3].ReturnNanos, IntervalNanos: li.IntervalNanos, MaxReserved: 4},
	}
	if len(changes) != len(want) {
		t.Fatalf("changes %+v, want %+v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("change %d: %+v, want %+v", i, changes[i], want[i])
		}
	}
	fast, n := fastestLimit(li, puts)
	if fast.IntervalNanos != li.IntervalNanos || fast.ExpiryNanos != li.ExpiryNanos || n != 2 {
		t.Fatalf("fastest %+v over %d configurations; want the original over 2", fast, n)
	}
	// A put faster than the original (not one the nemesis makes) would
	// set the bounds.
	fast, _ = fastestLimit(li, append(puts, limitPut{IntervalNanos: int64(100 * time.Millisecond), ExpiryNanos: int64(150 * time.Millisecond), MaxReserved: -1}))
	if fast.IntervalNanos != int64(100*time.Millisecond) || fast.ExpiryNanos != int64(150*time.Millisecond) {
		t.Fatalf("fastest %+v", fast)
	}
	// Leased: the lease policy's C and O count, their largest.
	lli := limitInfo{Name: "jl-leased", IntervalNanos: int64(20 * time.Millisecond), BurstPermits: 50, MaxOutstandingPermits: 50}
	fast, _ = fastestLimit(lli, []limitPut{{IntervalNanos: int64(40 * time.Millisecond), ExpiryNanos: -1, MaxReserved: -1, BurstPermits: 80, MaxOutstanding: 60}})
	if fast.IntervalNanos != lli.IntervalNanos || fast.BurstPermits != 80 || fast.MaxOutstandingPermits != 60 {
		t.Fatalf("leased fastest %+v", fast)
	}
}

// TestRestartResult: a restarted node that did not become ready, or whose
// agent exited, is a violation; one that did is not.
func TestRestartResult(t *testing.T) {
	ok := RestartRecord{Node: "n2", SnapshotIndex: 90, KilledNanos: 5e9, ReadyNanos: 6e9, ReadyAfterNanos: 1e9}
	r := restartResult([]NemesisRecord{{Restarts: []RestartRecord{ok}}})
	if !r.Valid || r.Details["slowest_ready_ns"] != int64(1e9) {
		t.Fatalf("ready node: %+v", r)
	}
	stuck := RestartRecord{Node: "n3", SnapshotIndex: 120, KilledNanos: 7e9, ReadyNanos: -1, ReadyAfterNanos: -1, LastAnswer: "connection refused", Exited: true}
	r = restartResult([]NemesisRecord{{Restarts: []RestartRecord{ok}}, {Restarts: []RestartRecord{stuck}}})
	if r.Valid || r.ViolationsTotal() != 1 || !strings.Contains(r.Violations[0], "n3") || !strings.Contains(r.Violations[0], "exited instead of becoming ready") {
		t.Fatalf("stuck node: %+v", r)
	}
	if r := restartResult(nil); !r.Valid || r.Details["note"] == nil {
		t.Fatalf("no restarts: %+v", r)
	}
}

// TestReconfigAndTransferConfig: the new kinds parse, generate with their
// parameters, and reconfig is refused for the window workload.
func TestReconfigAndTransferConfig(t *testing.T) {
	nem, err := ParseNemeses("transfer,reconfig:slow|snapshot-restart")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Config{Nemeses: nem, Duration: 5 * time.Minute, Seed: 3, OutDir: "x"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, ev := range Generate(cfg) {
		kinds[ev.Name()] = true
		if ev.Fault == FaultReconfig && ev.Factor != 2 && ev.Factor != 3 {
			t.Fatalf("reconfig factor %d, want 2 or 3", ev.Factor)
		}
	}
	for _, k := range []string{"transfer:a-b-a", "reconfig:slow", "reconfig:snapshot-restart"} {
		if !kinds[k] {
			t.Errorf("Generate never drew %s: %v", k, kinds)
		}
	}
	for _, c := range []Config{
		{Workload: WorkloadWindow, Nemeses: nem, OutDir: "x"},
		{OutDir: "x", Schedule: []Event{{Fault: FaultReconfig, Variant: "slow", At: time.Second, Until: 2 * time.Second, Factor: 1}}},
	} {
		if _, err := c.withDefaults(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", c, err)
		}
	}
	if _, err := (Config{Workload: WorkloadLeased, Nemeses: nem, OutDir: "x"}).withDefaults(); err != nil {
		t.Errorf("leased with reconfig: %v", err)
	}
}
