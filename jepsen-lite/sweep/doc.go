// Package sweep runs many short jepsen-lite runs, one per seed and
// workload, and sums them up: new seeds as routine rather than the few
// fixed ones of the CI smoke.
//
// A sweep expands its seed range and workloads into a plan (Plan: seed
// by seed, every workload for each seed, so a sweep stopped by its time
// budget has covered the workloads evenly), validates every planned run
// before the first starts, builds permitd once, and runs the plan one
// run at a time (runs are timing-sensitive: never two at once). Each
// workload has a profile (Profile, DefaultProfiles): its workers, groups
// and the full fault mix that applies to it; the cluster size alternates
// between 5 nodes (odd seeds) and 3 (even) unless fixed.
//
// A run that ends incomplete or not recovered is run again with the
// same seed (Config.Retries; the jepsen command's default is once), since
// on a loaded machine that is mostly CPU starvation; an unsafe run is
// never re-run: it is a finding. The sweep stops at the first run that
// is still not valid when Config.StopOnFailure is set, and in any case
// when the next run would overrun Config.MaxTime. Every run's report goes
// to OUT/<workload>/seed<S> (valid runs keep only summary.json unless
// Config.KeepReports); the sweep writes OUT/sweep.json (Summary) and OUT/sweep.txt (one line
// per run, with the command that replays a failed one). Its exit code
// is the worst verdict: 1 if any run was unsafe, else 3 if any was
// incomplete, else 4 if any did not recover, else 0.
package sweep
