package runner

import (
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
