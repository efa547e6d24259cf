package runner

import (
	"strings"
	"testing"
	"time"
)

// TestSmokeMulti runs the multi workload (strict requests, bursty tokens
// and an in-flight cap reserved together, settled and released) on 3
// nodes for 22 s with a kill -9 of the leader from 4 s to 9 s. It must be
// valid, with grants, refusals, settles that refunded tokens, answered
// duplicates and conflicts, and every multi checker run.
func TestSmokeMulti(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster for about 30 seconds")
	}
	start := time.Now()
	sum := runScenario(t, Config{
		Nodes: 3, Workers: 4, Workload: WorkloadMulti, Duration: 22 * time.Second, Seed: 31, OutDir: outDir(t, "multi"),
		Schedule: []Event{{Fault: FaultKill, Variant: "leader", At: 4 * time.Second, Until: 9 * time.Second}},
	})
	t.Logf("multi in %v (%s mode): %d faults, %d API calls, %d grants, %d refused, %d unknown, %d failed", time.Since(start).Round(time.Second), sum.Mode,
		len(sum.Nemeses), sum.APICalls, sum.Workers.Granted, sum.Workers.Refused, sum.Workers.Unknown, sum.Workers.Failed)
	if sum.Multi != nil {
		t.Logf("multi: workers %+v", sum.Multi.Workers)
		if l := sum.Multi.Live; l != nil {
			t.Logf("live judge: %d calls, spacing %d, tokens %d, in-flight %d violations; max in flight %d, windows %+v",
				l.Calls, l.SpacingViolations, l.TokenViolations, l.InFlightViolations, l.MaxInFlight, l.TokenWindows)
		}
		t.Logf("nodes: %+v", sum.Multi.Nodes)
	}
	if len(sum.Nemeses) == 0 {
		t.Errorf("no fault was applied")
	}
	if sum.ExitCode != ExitValid {
		t.Fatalf("the multi scenario is not valid:\n%s", describe(sum))
	}
	seen := map[string]bool{}
	for _, c := range sum.Checkers {
		seen[c.Name] = true
	}
	for _, name := range []string{"multi-dimensions", "multi-dimensions-at-use", "multi-no-partial-grant", "multi-settle-once", "conservation", "durability"} {
		if !seen[name] {
			t.Errorf("checker %s did not run", name)
		}
	}
	m := sum.Multi
	if m == nil || sum.Workers.Granted == 0 || sum.Workers.Refused == 0 || m.Workers.Settles == 0 || m.Workers.SettlesWithRefund == 0 ||
		m.Workers.SettleDuplicates == 0 || m.Workers.SettleConflicts == 0 || m.Workers.Releases == 0 || m.Live == nil || m.Live.Violations() != 0 {
		t.Errorf("want grants, refusals, settles with refunds, duplicates, conflicts, releases and a clean live judge; got %+v, %+v", sum.Workers, m)
	}
}

// TestBrokenMultiIsCaught is TestBrokenTimelineIsCaught for the multi
// workload: agents with --test-break-timeline (a new leader resumes the
// cluster timeline from its own clock), the followers' clocks an hour
// ahead from 2.5 s to 6.5 s and the leader killed from 3 s to 6 s. With 24
// workers each holding one grant of the strict limit reserved ahead (1
// every 200 ms, max_reserved 30, max_wait 6 s: the grants queue about
// 4.8 s ahead) and an in-flight cap that never blocks (24), the broken
// leader grants at once slots the old leader had already given out, so
// the calls of both leaders' grants start closer than the strict spacing:
// the multi checkers must say so and the run exit unsafe. The same
// scenario against a correct permitd (the control) must be valid. The run
// is the shortest allowed (15 s: 2 s of warmup, 8 s of tail, recovery
// within 5 s, which a cluster healthy again well before the heal meets).
func TestBrokenMultiIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster twice for about 18 seconds")
	}
	scenario := func(t *testing.T, flags []string) *Summary {
		start := time.Now()
		sum := runScenario(t, Config{
			Nodes: 3, Workers: 24, Workload: WorkloadMulti,
			Interval: 200 * time.Millisecond, MaxReserved: 30, MaxWait: 6 * time.Second,
			Multi:    MultiConfig{MaxInFlight: 24},
			Duration: 15 * time.Second, Warmup: 2 * time.Second, Tail: 8 * time.Second, RecoveryWithin: 5 * time.Second,
			Seed: 97, OutDir: outDir(t, "multi-timeline"), AgentFlags: flags,
			Schedule: []Event{
				{Fault: FaultClock, Variant: "skew-followers", At: 2500 * time.Millisecond, Until: 6500 * time.Millisecond, ClockOffset: time.Hour, ClockRate: 1},
				{Fault: FaultKill, Variant: "leader", At: 3 * time.Second, Until: 6 * time.Second},
			},
		})
		t.Logf("in %v: %d API calls, %d grants, %d refused, %d unknown, %d failed", time.Since(start).Round(time.Second),
			sum.APICalls, sum.Workers.Granted, sum.Workers.Refused, sum.Workers.Unknown, sum.Workers.Failed)
		if m := sum.Multi; m != nil && m.Live != nil {
			t.Logf("live judge: %d calls, spacing %d, tokens %d, in-flight %d violations", m.Live.Calls,
				m.Live.SpacingViolations, m.Live.TokenViolations, m.Live.InFlightViolations)
		}
		for _, c := range sum.Checkers {
			if strings.HasPrefix(c.Name, "multi-dimensions") {
				t.Logf("%s: %d violations, per dimension %v", c.Name, c.ViolationsTotal(), c.Details["violations_per_dimension"])
			}
		}
		return sum
	}
	controlAndBroken(t, scenario, func(t *testing.T, caught map[string]bool) {
		if !caught["multi-dimensions"] && !caught["multi-dimensions-at-use"] {
			t.Fatalf("no multi-dimensions violation reported; invalid checkers: %v", caught)
		}
	})
}
