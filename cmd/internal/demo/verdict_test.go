package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// at0 is the start of the synthetic histories below.
var at0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// after is at0 + d.
func after(d time.Duration) time.Time { return at0.Add(d) }

// wantChecks fails t unless checks has exactly the ok values want, in
// order, and each check's line contains the matching part of lines.
func wantChecks(t *testing.T, checks []check, want []bool, lines []string) {
	t.Helper()
	if len(checks) != len(want) {
		t.Fatalf("%d checks, want %d: %v", len(checks), len(want), checks)
	}
	for i, c := range checks {
		if c.ok != want[i] {
			t.Errorf("check %d ok=%v, want %v: %s", i, c.ok, want[i], c)
		}
		if i < len(lines) && !strings.Contains(c.String(), lines[i]) {
			t.Errorf("check %d: %q lacks %q", i, c.String(), lines[i])
		}
	}
}

// TestScene1Bounds computes scene 1's bounds from its strict limit at
// the demo's default rate, 10/s with an expiry of a tenth of the
// interval: uses at least 90 ms apart, at most 11 in any 1 s.
func TestScene1Bounds(t *testing.T) {
	limit, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 10, Per: time.Second, MaxReserved: 6, Expiry: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := newScene1Bounds(limit)
	if b.minGap != 90*time.Millisecond || b.maxInWindow != 11 {
		t.Fatalf("bounds: min gap %v, most in 1 s %d; want 90ms, 11", b.minGap, b.maxInWindow)
	}
	// Uses every 100 ms, each asked 50 ms before; the leader killed at
	// 420 ms.
	var uses []use
	for i := range 20 {
		uses = append(uses, use{at: after(time.Duration(i) * 100 * time.Millisecond), wait: 50 * time.Millisecond})
	}
	run := scene1Run{uses: uses, killedAt: after(420 * time.Millisecond), killed: "n1"}
	wantChecks(t, b.checks(run), []bool{true, true, true}, []string{
		"smallest gap between any two permits used: 100 ms — allowed: ≥ interval - expiry = 100 ms - 10 ms = 90 ms",
		"most permits used in any sliding 1 s window: 10 — allowed: ≤ floor((W + expiry) / interval) + 1 = floor((1000 ms + 10 ms) / 100 ms) + 1 = 10 + 1 = 11",
		"permits asked for after the leader's crash and used: 15, the first used 0.1 s after the crash",
	})
}

// TestScene1ChecksFail makes each of scene 1's checks fail on its own.
func TestScene1ChecksFail(t *testing.T) {
	limit, _ := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 10, Per: time.Second, MaxReserved: 6, Expiry: 10 * time.Millisecond})
	b := newScene1Bounds(limit)
	spaced := func(gaps ...time.Duration) []use {
		at := at0
		uses := []use{{at: at}}
		for _, g := range gaps {
			at = at.Add(g)
			uses = append(uses, use{at: at})
		}
		return uses
	}
	ms := time.Millisecond
	// A gap of 89 ms: below interval - expiry.
	wantChecks(t, b.checks(scene1Run{uses: spaced(100*ms, 89*ms, 100*ms)}), []bool{false, true}, []string{"89 ms"})
	// 12 uses 90 ms apart: each gap allowed, 12 in one second too many.
	var gaps []time.Duration
	for range 11 {
		gaps = append(gaps, 90*ms)
	}
	wantChecks(t, b.checks(scene1Run{uses: spaced(gaps...)}), []bool{true, false}, []string{"", "in any sliding 1 s window: 12"})
	// Only permits asked for before the crash were used after it.
	uses := spaced(100*ms, 100*ms, 100*ms)
	for i := range uses {
		uses[i].wait = uses[i].at.Sub(at0) + ms
	}
	wantChecks(t, b.checks(scene1Run{uses: uses, killedAt: after(50 * ms)}), []bool{true, true, false}, []string{"", "", "after the leader's crash and used: 0"})
	// Fewer than two permits: nothing measured is a failure.
	wantChecks(t, b.checks(scene1Run{uses: spaced()}), []bool{false, true}, []string{"not measured"})
}

// TestScene2Bounds computes scene 2's bounds from the pool of a 300/s
// leased limit with the default C and O (299 each), and checks a fleet
// history against them: within C + O + floor(W/I) + 1 = 898, the cut-off
// group quiet from cut + 0.25 s + 2 s + 1 s, back after reconnecting.
func TestScene2Bounds(t *testing.T) {
	pool := fsm.LeasePoolInfo{BurstPermits: 299, MaxOutstandingPermits: 299, IntervalNanos: 3_333_334}
	b := newScene2Bounds(pool, 250*time.Millisecond, 2*time.Second, time.Second)
	if b.fleetMax != 898 || b.quiet != 3250*time.Millisecond {
		t.Fatalf("bounds: fleet %d, quiet %v; want 898, 3.25s", b.fleetMax, b.quiet)
	}
	x := len(Groups) - 1
	ms := time.Millisecond
	history := func(perSecond int, xAt ...time.Duration) scene2Run {
		var spends []spend
		for i := range 10 * perSecond {
			spends = append(spends, spend{at: after(time.Duration(i) * time.Second / time.Duration(perSecond)), group: i % x})
		}
		for _, d := range xAt {
			spends = append(spends, spend{at: after(d), group: x})
		}
		return scene2Run{spends: spends, cutAt: after(2 * time.Second), reconnectedAt: after(7 * time.Second)}
	}
	quietFrom := "from 5.25 s to its reconnection at 7.00 s"
	wantChecks(t, b.checks(history(300, 1000*ms, 5000*ms, 7500*ms), at0), []bool{true, true, true}, []string{
		"most permits the fleet spent in any sliding 1 s window: 301 — allowed: ≤ C + O + floor(W / I) + 1 = 299 + 299 + 299 + 1 = 898",
		quietFrom + ": 0 — allowed: 0 after cut + request timeout + steal grace + TTL = 2.00 s + 0.25 s + 2 s + 1 s = 5.25 s",
		"after its reconnection: 1",
	})
	// 899 in a second: above the bound.
	wantChecks(t, b.checks(history(899, 1000*ms, 7500*ms), at0), []bool{false, true, true}, []string{"any sliding 1 s window: 900"})
	// The cut-off group spent after its lease and borrowed permits
	// expired.
	wantChecks(t, b.checks(history(300, 5300*ms, 7500*ms), at0), []bool{true, false, true}, []string{"", quietFrom + ": 1"})
	// Nothing after the reconnection.
	wantChecks(t, b.checks(history(300, 1000*ms), at0), []bool{true, true, false}, []string{"", "", "after its reconnection: 0"})
	// A cut too short to see the group fail closed is no pass.
	short := history(300, 7500*ms)
	short.reconnectedAt = after(5 * time.Second)
	wantChecks(t, b.checks(short, at0), []bool{true, false, true}, []string{"", "not measured"})
	// A scene that ended before the reconnection is no pass either.
	none := history(300)
	none.reconnectedAt = time.Time{}
	wantChecks(t, b.checks(none, at0), []bool{true, false}, []string{"", "ended before the cut was over"})
}

// TestScene3Bounds computes the fake API's tolerances from scene 3's
// limits at their defaults (10 requests/s with an expiry of 50 ms, 15000
// tokens/s with 1 s of store, estimates of 3000, 4 at once), and makes
// each check fail on its own.
func TestScene3Bounds(t *testing.T) {
	rpm, tpm, _, err := s3Configs(Scene3DefaultTokensPerSec, Scene3DefaultBurstSeconds)
	if err != nil {
		t.Fatal(err)
	}
	b := newScene3Bounds(rpm, tpm)
	if b.maxRequests != 11 || b.maxTokens != 33749 || b.maxInFlight != 4 {
		t.Fatalf("tolerances: %d requests, %d tokens, %d at once; want 11, 33749, 4", b.maxRequests, b.maxTokens, b.maxInFlight)
	}
	ok := llmTotals{calls: 100, tokens: 170_000, maxWinRequests: 11, maxWinTokens: 33749, maxInFlight: 4}
	wantChecks(t, b.checks(ok), []bool{true, true, true, true}, []string{
		"calls the API answered 429 (too many requests): 0 — allowed: 0",
		"most calls started in any sliding 1 s window: 11 — allowed: ≤ floor((W + E) / I) + 1 = floor((1000 ms + 50 ms) / 100 ms) + 1 = 10 + 1 = 11",
		"most tokens used by calls started in any sliding 1 s window: 33749 — allowed: ≤ floor((W + E + B) / I) + estimate = floor((1000 ms + 50 ms + 1000 ms) / 0.066667 ms) + 3000 = 30749 + 3000 = 33749",
		"most calls at once: 4 — allowed: ≤ 4",
	})
	bad := ok
	bad.rejected, bad.rejTokens = 1, 1
	wantChecks(t, b.checks(bad), []bool{false, true, true, true}, []string{"429 (too many requests): 1 (for calls at once 0, requests 0, tokens 1)"})
	bad = ok
	bad.maxWinRequests = 12
	wantChecks(t, b.checks(bad), []bool{true, false, true, true}, nil)
	bad = ok
	bad.maxWinTokens = 33750
	wantChecks(t, b.checks(bad), []bool{true, true, false, true}, nil)
	bad = ok
	bad.maxInFlight = 5
	wantChecks(t, b.checks(bad), []bool{true, true, true, false}, nil)
}

// TestVerdictAndSummary checks the verdict lines and that the summary
// fails the run when a scene failed (permitd demo then exits 1).
func TestVerdictAndSummary(t *testing.T) {
	pass := sceneResult{n: 1, title: "one", checks: []check{{what: "x", got: "1", want: "allowed: ≤ 2", ok: true}}}
	fail := sceneResult{n: 2, title: "two", checks: []check{{what: "y", got: "3", want: "allowed: ≤ 2"}, {what: "z", got: "0", want: "allowed: 0", ok: true}}}
	empty := sceneResult{n: 3, title: "three"}
	for r, want := range map[*sceneResult]string{
		&pass:  "scene 1 (one): PASS",
		&fail:  "scene 2 (two): FAIL: y was 3 (allowed: ≤ 2)",
		&empty: "scene 3 (three): FAIL: nothing was checked",
	} {
		if got := r.verdict(); got != want {
			t.Errorf("verdict %q, want %q", got, want)
		}
	}
	// Stopped by Ctrl-C: an unmet expectation is not judged, a broken
	// bound still fails.
	stopped := sceneResult{n: 4, title: "four", stopped: true, checks: []check{{what: "w", got: "0", want: "expected: at least one"}}}
	if got, want := stopped.verdict(), "scene 4 (four): STOPPED by Ctrl-C, not judged"; got != want {
		t.Errorf("verdict %q, want %q", got, want)
	}
	stopped.checks = append(stopped.checks, check{what: "v", got: "12", want: "allowed: ≤ 11"})
	if got, want := stopped.verdict(), "scene 4 (four): FAIL: v was 12 (allowed: ≤ 11)"; got != want {
		t.Errorf("verdict %q, want %q", got, want)
	}
	var out bytes.Buffer
	if err := summary(&out, []sceneResult{pass}, false, time.Second); err != nil {
		t.Errorf("a passing run failed: %v", err)
	}
	out.Reset()
	err := summary(&out, []sceneResult{pass, fail}, false, time.Second)
	if err == nil || !strings.Contains(err.Error(), "scene 2 failed") {
		t.Errorf("a run with a failing scene: error %v, want one naming scene 2", err)
	}
	for _, want := range []string{"scene 1 (one): PASS\n", "scene 2 (two): FAIL: ", "1 of 2 scenes FAILED"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestIntervalPrinting: an interval prints with three significant digits,
// and when that is not exact (scene 2's 1/300 s) its exact value and
// floor(W / I) follow, so that the bound's arithmetic can be checked.
func TestIntervalPrinting(t *testing.T) {
	i := time.Duration(3333334)
	if got := ms3(i); got != "3.33 ms" {
		t.Errorf("ms3(%v) = %q, want 3.33 ms", i, got)
	}
	if got := intervalNote(time.Second, i); got != " (exactly 3333334 ns, so floor(W / I) = 299)" {
		t.Errorf("intervalNote = %q", got)
	}
	for d, want := range map[time.Duration]string{100 * time.Millisecond: "100 ms", 97100 * time.Microsecond: "97.1 ms", 1000 * time.Millisecond: "1000 ms"} {
		if got := ms3(d); got != want || intervalNote(time.Second, d) != "" {
			t.Errorf("ms3(%v) = %q, want %q and no note", d, got, want)
		}
	}
}
