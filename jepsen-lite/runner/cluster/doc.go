// Package cluster is the permitd cluster of a jepsen-lite run: N agents
// (3 or 5), each a `permitd agent --test-hooks` process supervised by
// package process, and Control, the runner's direct line to each agent's
// HTTP API.
//
// # Model
//
// Node i (ID n<i+1>) has a fixed raft and HTTP address, a data directory
// it keeps across restarts and one log file for its whole life. In the
// fallback mode every node listens on its own loopback IP (127.0.0.11,
// .12, ...; all on 127.0.0.1 when those cannot be bound); in the namespace
// mode package netns relocates the nodes (Relocate) onto its addresses
// and wraps their command lines in ip netns exec. Every agent gets the
// same --initial-cluster, --test-hooks (the fault, clock and snapshot
// hooks the nemeses use) and the run's extra flags.
//
// Control sends one request to one node, with a short timeout and no
// failover (package transport/client does failover for the workloads):
// GET /v1/status, /readyz and /v1/debug/state to observe, POST
// /v1/debug/faults (FaultState: partitions, loss, delay), /v1/debug/clock,
// /v1/debug/snapshot and /v1/cluster/transfer-leadership to act. In the
// namespace mode Control.Kernel turns a fault state's partitions and loss
// into packet filters first (package netns), so that only delay and
// jitter reach permitd's fault layer. The leader is whoever claims
// leadership in the highest term among the nodes that answer (LeaderOf);
// Settle waits until every node has applied the same index.
//
// Observer polls every node's GET /v1/status for the run's timeline: the
// changes of leadership, and the snapshots nodes must have installed from
// their leader (SnapshotInstall: a node seen needing an entry that no
// other node still had in its log, later seen with a snapshot covering
// it). permitd logs raft's own "Installed remote snapshot" line only at
// debug level, so the public status is the source of that count.
package cluster
