// Package node runs one member of a permitd register: hashicorp/raft with
// a raft-boltdb log, the replicated state machine of package fsm, and what
// a node adds around it — the leader's clock, the batching of reserves,
// forwarding to the leader, readiness and membership. Package
// transport/server is its edge: it serves a Node to clients over HTTP and
// the binary protocol, through ServeCalls, the pipelined call loop the
// nodes also forward to each other on; nothing here speaks HTTP or reads
// a client's request.
//
// # Roles
//
// Every node answers every request. Only the leader decides: it stamps a
// command with the cluster time, appends it to the raft log and returns
// the register's result once the entry is applied. A follower validates a
// request (an invalid request never reaches the log), then forwards it to
// the leader and relays the answer (command.go, forward.go). Reads of
// limits and lease pools are linearizable: the leader confirms its
// leadership with a barrier and answers from applied state.
//
// # The invariants
//
// The register's decisions are fsm's (see fsm's package doc: Apply and its
// proven bound). A node keeps three promises around them, each with its
// own file:
//
//  1. Never early across leader changes (timeline.go, takeover.go). The
//     cluster time is the leader's timeline: after a raft Barrier has
//     applied every entry of earlier terms, a new leader continues from
//     the last applied cluster time plus the time since it took that
//     state in (receipt.go: the last entry of the old term it stored, a
//     snapshot it installed, or its start), and counts forward on its own
//     monotonic clock, each step between two stamps capped by the real
//     time that passed on the process's monotonic clock. Only
//     the time between the old leader's last stamp and its receipt is
//     lost, which only makes grants later. Wall clocks
//     play no part. Assumptions: each node's monotonic clock does not run
//     faster than real time (the cap enforces it for injected clocks),
//     and raft's Barrier returns only after every earlier entry applied.
//     A stamp carries its term and fsm.Apply trusts it only in an entry
//     of that term, so a stamp held by a stalled goroutine across A→B→A
//     is "no time passed".
//  2. Batching shares an fsync, never an instant (batcher.go). Concurrent
//     reserves queue behind the entries being committed and leave together
//     in the next entry, each stamped at its own arrival and decided at
//     it, as if applied alone. No timer: a lone reserve leaves at once.
//  3. An answer's durations count from when it leaves (answer.go). The
//     node that sends an answer subtracts the time it held it, measured
//     so that it never exceeds the real time since the decision. A grant
//     whose permit expired meanwhile leaves as a refusal, and that node
//     reports it to the register in a later entry, so that the limit's
//     counters, which cannot see the departure, count a refusal too
//     (expiredgrants.go; fsm's "Counters"). A reserve that waits in an
//     in-flight cap's queue is answered only once an applied entry
//     decided it (waiters.go): the leader holds the answer, writes a
//     no-op whenever a hold lapses or a deadline comes (waker.go), and
//     subtracts the time its timeline counted since the deciding entry.
//
// # Forwarding
//
// One format: a forwarded command is the fsm entry its follower built,
// stamped 0 (wire.OpCommand); the leader decodes it (bounded and
// validated: it came from the network), checks it against its own state,
// stamps and applies it; one tagged codec carries every result back
// (resultcodec.go). The channel is one persistent pipelined connection per
// leader, multiplexed on the raft port. A command with an idempotency key
// (a request ID, a session reference) is retried on ambiguous failures,
// and the register answers the retry with the first decision. Lease
// commands, which a fleet sends once per worker per period, travel in
// batches (wire.OpCommandBatch, forwardbatch.go): those that reach a
// follower while its earlier batches are with the leader leave together
// in one call, each with its own answer, so the leader reads, schedules
// and answers one call per batch instead of one per renewal.
//
// # Readiness
//
// A node is ready (Status.Ready, /readyz) when it can decide now: the
// leader once its timeline is active (after the takeover barrier), a
// follower while it knows a leader and has applied what it knows to be
// committed, a removed node never (cluster.go). Requests wait for a
// leader at most Config.LeaderWait, then fail with ErrNoLeader.
//
// # Membership
//
// A join adds a raft non-voter; the leader probes it over the raft port
// (wire.OpProgress, inside the cluster's mutual TLS when it is on) and
// makes it a voter once it has stayed caught up for Config.PromoteAfter
// (promote.go), so a joiner that never catches up never dilutes the
// quorum. At most Config.MaxPendingJoins non-voters are pending at once.
//
// # Errors
//
// Errors are the sentinels of errors.go, wrapped with %w: ErrNoLeader,
// ErrRemoved and ErrShutdown (retry elsewhere or later), ErrNotFound,
// ErrInvalid and ErrConflict (the request is wrong), and ErrUnknownOutcome
// for a command that may or may not have been applied.
package node
