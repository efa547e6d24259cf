package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/client"
)

func TestGroupsAndFairnessError(t *testing.T) {
	leases := []client.LeaseState{
		{Active: true, Holder: "a1", Group: "a", Weight: 1, DemandMilliPerSec: 100, ShareMilliPerSec: 100},
		{Active: true, Holder: "b1", Group: "b", Weight: 1, DemandMilliPerSec: 2000, ShareMilliPerSec: 450},
		{Active: true, Holder: "b2", Group: "b", Weight: 1, DemandMilliPerSec: 2000, ShareMilliPerSec: 450},
		{Active: false, Holder: "c1", Group: "c", Weight: 1, DemandMilliPerSec: 5000, ShareMilliPerSec: 900},
	}
	v := groupsOf(leases)
	if len(v) != 2 || v[0].Group != "a" || v[1].ShareMilli != 900 || v[1].DemandMilli != 4000 || v[1].ActiveLeases != 2 {
		t.Fatalf("groupsOf: %+v", v)
	}
	// Rate 1000 milli: max-min gives a 100, b 900: exact.
	if e, _, err := registerFairnessError(v, 1000); err != nil || e != 0 {
		t.Fatalf("register error %v %v, want 0", e, err)
	}
	// A target that gives a 200 and b 800: b is 12.5 % over, a 50 % under.
	e, g := fairnessError(v, map[string]int64{"a": 200, "b": 800}, 1000)
	if g != "a" || math.Abs(e-0.5) > 1e-12 {
		t.Fatalf("fairnessError = %v at %s, want 0.5 at a", e, g)
	}
	// A group with a share it should not have counts share/rate.
	e, g = fairnessError(v, map[string]int64{"b": 900}, 1000)
	if g != "a" || math.Abs(e-0.1) > 1e-12 {
		t.Fatalf("fairnessError = %v at %s, want 0.1 at a", e, g)
	}
}

func TestConvergedAt(t *testing.T) {
	s := func(at int64, e float64, m bool) sample { return sample{AtNanos: at, Err: e, Members: m} }
	for _, tc := range []struct {
		name string
		in   []sample
		want int64
	}{
		{"never", []sample{s(1, 0.5, true), s(2, 0.3, true)}, -1},
		{"stays", []sample{s(1, 0.5, true), s(2, 0.01, true), s(3, 0.0, true), s(4, 0.01, true)}, 2},
		{"relapse", []sample{s(1, 0.01, true), s(2, 0.5, true), s(3, 0.01, true), s(4, 0.01, true), s(5, 0, true)}, 3},
		{"members missing", []sample{s(1, 0.0, false), s(2, 0.0, true), s(3, 0.0, true), s(4, 0.0, true)}, 2},
		{"too short", []sample{s(1, 0.5, true), s(2, 0.0, true), s(3, 0.0, true)}, -1},
	} {
		if got := convergedAt(tc.in, 0.02, 3); got != tc.want {
			t.Errorf("%s: convergedAt = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestGrowthAndDemands(t *testing.T) {
	if k := growthExponent([]float64{10, 100, 1000}, []float64{5, 50, 500}); math.Abs(k-1) > 1e-9 {
		t.Errorf("linear: k = %v", k)
	}
	if k := growthExponent([]float64{10, 100, 1000}, []float64{3, 3, 3}); math.Abs(k) > 1e-9 {
		t.Errorf("flat: k = %v", k)
	}
	if k := growthExponent([]float64{10}, []float64{3}); !math.IsNaN(k) {
		t.Errorf("one point: k = %v", k)
	}
	d := groupDemands(1500, 3)
	if math.Abs(d[0]-250) > 1e-9 || math.Abs(d[2]-750) > 1e-9 || math.Abs(d[0]+d[1]+d[2]-1500) > 1e-9 {
		t.Errorf("groupDemands = %v", d)
	}
}

func TestSVG(t *testing.T) {
	rep := report{TTL: "2s", Results: []result{
		{Workers: 10, Groups: 1, EntriesPerSec: 10, FairnessErr: 0.001, JoinS: 1, LeaveS: -1},
		{Workers: 100, Groups: 1, EntriesPerSec: 100, FairnessErr: 0.002, JoinS: 2, LeaveS: 1},
		{Workers: 100, Groups: 10, EntriesPerSec: 100, Error: "boom"},
	}}
	var b strings.Builder
	if err := writeSVG(&b, "t <&>", chartPanels(rep), 3); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "<svg ") || !strings.HasSuffix(out, "</svg>\n") || strings.Contains(out, "NaN") {
		t.Fatalf("bad svg:\n%s", out)
	}
	for _, want := range []string{"t &lt;&amp;&gt;", "register log entries / s", "1 group", "10 groups", "polyline", "goal", "not measured"} {
		if !strings.Contains(out, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if g := growth(rep.Results); g["raft_entries_per_sec/g1"] != 1 {
		t.Errorf("growth = %v", g)
	}
}

func TestReadReportsMergesRunsOfOneFleet(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r report) string {
		p := filepath.Join(dir, name)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	row := func(w int, entries float64) result {
		return result{Workers: w, Groups: 1, EntriesPerSec: entries, RenewalsPerSec: float64(w), JoinS: 1, LeaveS: 1, CutS: 1, HealS: 1}
	}
	settings := report{TTL: "2s (default)", RatePerWorker: 100, Gossip: "mem", GossipSlowdown: 4, Via: "spread", Protocol: "binary"}
	small, large := settings, settings
	small.Results = []result{row(10, 1), row(100, 10)}
	large.Results = []result{row(1000, 100)}
	a, b := write("small.json", small), write("large.json", large)

	rep, err := readReports([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 || rep.Results[2].Workers != 1000 {
		t.Fatalf("merged results: %+v", rep.Results)
	}
	// Entries grow linearly over all three sizes, not only the first file's.
	if k := rep.Growth["raft_entries_per_sec/g1"]; math.Abs(k-1) > 1e-9 {
		t.Fatalf("growth over the merged runs = %v (%v), want 1", k, rep.Growth)
	}
	other := settings
	other.Gossip = "udp"
	c := write("other.json", other)
	if _, err := readReports([]string{a, c}); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Fatalf("merging runs of different fleets: %v, want an error naming the difference", err)
	}
}

func TestAlignedWaitEndsOnTheNextMultiple(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		now, d, every, want time.Duration
	}{
		{0, time.Second, 0, time.Second},                                                      // no alignment
		{0, time.Second, 100 * time.Millisecond, 1100 * time.Millisecond},                     // on a multiple: the next one
		{30 * time.Millisecond, time.Second, 100 * time.Millisecond, 1070 * time.Millisecond}, // 1.03 s -> 1.1 s
		{99 * time.Millisecond, 950 * time.Millisecond, 250 * time.Millisecond, 1151 * time.Millisecond},
		{0, -time.Second, 100 * time.Millisecond, 100 * time.Millisecond}, // late: the next multiple after now-1s
	} {
		got := alignedWait(base.Add(c.now), c.d, c.every)
		if got != c.want {
			t.Errorf("alignedWait(+%v, %v, %v) = %v, want %v", c.now, c.d, c.every, got, c.want)
		}
		if c.every > 0 && base.Add(c.now+got).UnixNano()%int64(c.every) != 0 {
			t.Errorf("alignedWait(+%v, %v, %v) wakes at %v, not a multiple", c.now, c.d, c.every, base.Add(c.now+got))
		}
	}
}

func TestDebugAddrMustBeLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.1.2.3:6060", ":6060", "example.com:6060", "nocolon"} {
		if err := checkDebugAddr(addr); err == nil {
			t.Errorf("checkDebugAddr(%q) = nil, want an error (only loopback is allowed)", addr)
		} else if !strings.Contains(err.Error(), "-debug-addr") {
			t.Errorf("checkDebugAddr(%q) = %v, want it to name the flag", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:6060", "localhost:6060"} {
		if err := checkDebugAddr(addr); err != nil {
			t.Errorf("checkDebugAddr(%q): %v, want it accepted", addr, err)
		}
	}
}
