package runner

import (
	"os"
	"testing"
	"time"
)

// TestSmokeTemplated runs the templated workload on 3 nodes for 16 s: a
// strict template (1 per 200 ms, 7 slots reserved ahead at most, idle
// 1 s) over 120 keys, 4 of them hot, at most 8 keys live; the leader
// killed -9 from 2.5 s to 5 s, one node isolated from 6 s to 8 s; an
// explicit put of a hot key at twice the rate and the template deleted
// and put again in between. It must be valid, with keys dropped and
// created again, KeysFull answers, and every templated checker run.
func TestSmokeTemplated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real cluster for about 20 seconds")
	}
	start := time.Now()
	sum := runScenario(t, Config{
		Nodes: 3, Workers: 8, Workload: WorkloadTemplated, Duration: 16 * time.Second, Warmup: 2 * time.Second, Tail: 8 * time.Second,
		RecoveryWithin: 5 * time.Second, Seed: 41, OutDir: outDir(t, "templated"),
		Templated: TemplatedConfig{Keys: 120, HotKeys: 4, Algorithm: "strict", MaxKeys: 8, Override: 1, Churn: 1},
		Schedule: []Event{
			{Fault: FaultKill, Variant: "leader", At: 2500 * time.Millisecond, Until: 5 * time.Second},
			{Fault: FaultPartition, Variant: "isolate-one", At: 6 * time.Second, Until: 8 * time.Second},
		},
	})
	ts := sum.Templated
	t.Logf("templated in %v (%s mode): %d API calls, %d grants, %d refused, %d unknown, %d failed; %+v", time.Since(start).Round(time.Second), sum.Mode,
		sum.APICalls, sum.Workers.Granted, sum.Workers.Refused, sum.Workers.Unknown, sum.Workers.Failed, ts)
	if sum.ExitCode != ExitValid {
		t.Fatalf("the templated scenario is not valid:\n%s", describe(sum))
	}
	seen := map[string]bool{}
	for _, c := range sum.Checkers {
		seen[c.Name] = true
	}
	for _, name := range []string{"keyed-bounds", "keyed-bounds-at-use", "keys-full", "linearizability", "conservation", "durability"} {
		if !seen[name] {
			t.Errorf("checker %s did not run", name)
		}
	}
	if ts == nil || ts.Dropped == 0 || ts.Created <= ts.Workers.KeysGranted || ts.Workers.KeysFull == 0 || ts.KeysFull == 0 || ts.Live.Keys < 10 || ts.Live.Violations != 0 {
		t.Errorf("want keys dropped and created again (created > keys granted), KeysFull answers seen by the workers and counted by the nodes, 10 keys or more called and a clean live judge; got %+v", ts)
	}
}

// TestBrokenTemplatedIsCaught is TestBrokenMultiIsCaught for templated
// keys: agents with --test-break-timeline, the followers' clocks an hour
// ahead from 2.5 s to 6.5 s and the leader killed from 3 s to 6 s; 24
// workers on 10 strict keys (1 per 200 ms, max_reserved 30, max_wait 6 s:
// the keys queue seconds ahead). The broken leader's timeline jumps an
// hour, every key is idle and at rest at once, is dropped and created
// again, and grants slots the old queue had given out: keyed-bounds must
// say so and the run exit unsafe; the same scenario against a correct
// permitd must be valid. 36 s, so not in CI (checker's
// TestKeyedBoundsCatchesAnOverGrantAcrossADrop is): set
// JEPSEN_BROKEN_TEMPLATED=1.
func TestBrokenTemplatedIsCaught(t *testing.T) {
	if testing.Short() || os.Getenv("JEPSEN_BROKEN_TEMPLATED") != "1" {
		t.Skip("runs a real cluster twice for about 18 seconds: set JEPSEN_BROKEN_TEMPLATED=1")
	}
	scenario := func(t *testing.T, flags []string) *Summary {
		sum := runScenario(t, Config{
			Nodes: 3, Workers: 24, Workload: WorkloadTemplated,
			Interval: 200 * time.Millisecond, MaxReserved: 30, MaxWait: 6 * time.Second, MaxPermits: 1,
			Templated: TemplatedConfig{Keys: 10, HotKeys: 9, Algorithm: "strict", MaxKeys: 100, Override: -1, Churn: -1},
			Duration:  15 * time.Second, Warmup: 2 * time.Second, Tail: 8 * time.Second, RecoveryWithin: 5 * time.Second,
			Seed: 97, OutDir: outDir(t, "templated-timeline"), AgentFlags: flags,
			Schedule: []Event{
				{Fault: FaultClock, Variant: "skew-followers", At: 2500 * time.Millisecond, Until: 6500 * time.Millisecond, ClockOffset: time.Hour, ClockRate: 1},
				{Fault: FaultKill, Variant: "leader", At: 3 * time.Second, Until: 6 * time.Second},
			},
		})
		t.Logf("templated: %+v", sum.Templated)
		return sum
	}
	controlAndBroken(t, scenario, func(t *testing.T, caught map[string]bool) {
		if !caught["keyed-bounds"] || !caught["keyed-bounds-at-use"] {
			t.Fatalf("no keyed-bounds violation reported; invalid checkers: %v", caught)
		}
	})
}
