// Package nemesis injects jepsen-lite's faults: it turns a run's fault
// specification (--nemesis) into a seeded schedule (Generate) and applies
// it to the cluster (Nemesis.Run), recording every fault as a nemesis
// operation in the history.
//
// # Faults
//
//   - partition (isolate-leader, isolate-one, halves, ring, bridge,
//     one-way), snapshot (isolate-follower until the leader compacted its
//     log past it) and loss (drop, delay, jitter): fault states pushed to
//     every node through package cluster (POST /v1/debug/faults, or
//     packet filters in the namespace mode), recomputed from all active
//     faults and pushed again to a node that missed them (restarted or
//     paused);
//   - kill and pause: signals to the agents through their supervisors
//     (package process); pause:workers blocks the runner's client workers
//     (Workers);
//   - clock: jumps and rates of the agents' test clocks (POST
//     /v1/debug/clock), healed forward only;
//   - transfer (transfer.go): leadership A→B→A through POST
//     /v1/cluster/transfer-leadership, each transfer an operation of its
//     own;
//   - reconfig (reconfig.go): the workload's limit put again slower for
//     the window, optionally followed by a forced snapshot, kill -9 and
//     restart of one node, whose readiness is timed (RestartRecord);
//   - worker (leased workload only, worker.go): group isolation from the
//     register, pause and kill of the worker sidecars (Sidecars);
//   - relay (leased workload with lease relays, relay.go): kill -9 of a
//     relay, relays stopped and started again in turn, and every relay
//     cut off from the register (Sidecars).
//
// Which nodes a fault hits is decided when it starts ("the leader" is
// whoever leads then), from the event's Pick; everything else is drawn
// when the schedule is generated, so a seed replays the same schedule.
// At the final heal every fault ends, every node runs unpaused with no
// fault state, every worker and relay runs and the limit has its original
// configuration.
//
// The package acts on the system only through package cluster (the
// agents' public HTTP API, test hooks and processes) and on the workload
// only through the Workers and Sidecars interfaces, which the runner
// fills with package workload's types.
package nemesis
