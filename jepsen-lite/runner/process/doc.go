// Package process supervises the child processes of a jepsen-lite run:
// the permitd agents of the cluster (package cluster) and the `permitd
// worker` sidecars of the leased workload (package workload). One type,
// Supervisor, does it for both.
//
// # Model
//
// A Supervisor stands for one named member of the run ("n2", "g1-w3")
// that may be run by several processes over time, one at a time: each
// Start begins a new generation (1, 2, ...), whose output is appended to
// the member's one log file after a marker line
//
//	=== jepsen-lite: starting NAME (generation G) at TIME: COMMAND
//
// so that the log reads as the member's whole life. The command line is
// asked for at every start (Spec.Command), so that it may change between
// starts (the namespace mode wraps it in ip netns exec).
//
// The runner acts on the current process only through signals to its
// pid, and always waits until it has been reaped:
//
//   - Kill: SIGKILL (kill -9), then wait until reaped (10 s at most).
//   - Pause and Resume: SIGSTOP and SIGCONT.
//   - Stop: SIGCONT (in case it is paused), SIGTERM, and SIGKILL if it has
//     not exited within a grace period (a clean shutdown: a worker
//     returns its lease).
//   - Restart: Kill, then Start.
//
// A process that exits without one of these signals exited "on its own":
// UnexpectedExits lists every such process (the current one if it has
// exited, and every earlier one found exited at a Start), which the
// runner reports as harness errors. WaitReady polls a readiness probe
// (an agent's GET /readyz, a sidecar's GET /healthz) until it succeeds,
// the process exits, or a deadline passes.
//
// On Linux every process gets the parent-death signal SIGKILL, so that a
// runner killed with -9 leaves nothing running; on every exit path the
// runner also stops each process by pid. Nothing is ever signalled by
// name.
package process
