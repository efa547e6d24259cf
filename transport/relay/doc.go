// Package relay is a host's lease relay: the workers on a host send their
// lease commands (lease, renew, return) to it over the binary protocol,
// and it sends them on to the register together, several commands in one
// call (wire.OpLeaseBatch).
//
// # Why
//
// A worker renews its lease every TTL/2, and each renewal is a call of its
// own to a register node: the node reads it off its connection, hands it to
// a goroutine, decides it and writes its answer. At a thousand workers
// renewing every second that per-call work, repeated on every renewal, is
// most of what the register spends on the fleet; the decision itself is a
// fraction. A relay on each host (or in front of each group) turns the
// renewals of its workers into one call per batch, so the register's
// per-call work is paid once per batch instead of once per renewal. It is
// the model of etcd's gRPC proxy and of Consul's client agents: a local
// process that spares the servers one connection and one call per client.
//
// # Batching
//
// Nothing waits on a timer. A command that arrives while no batch is with
// the register leaves at once, alone; the commands that arrive while a
// batch is out (at most MaxInFlight batches at once) leave together as
// soon as one comes back, at most wire.MaxLeaseBatch commands and one
// client frame of payload each. Under load a command waits at most for one
// batch's round trip; alone, it waits for nothing. At most MaxQueue
// commands wait; beyond, a command is answered CodeOverloaded at once.
//
// # What it guarantees, and what it does not change
//
// The relay decides nothing: each command reaches the register as its
// worker encoded it, and the register decides and validates it as if it
// had come alone (package transport/server's binarybatch.go), so the over-grant
// bound is the register's and the workers' (a relay is one more hop, like
// a follower forwarding a renewal). A grant's expiry counts from when the
// worker sent its request, which is before the relay sent it on, so the
// hop only shortens the time a worker thinks it may spend a grant.
//
// Every relayed command must carry a request ID (the Go client's lease
// calls always do): a batch whose answer is lost is retried at the next
// register node with the same commands, and a worker whose relay does not
// answer retries at the register directly, and the register answers a
// command it already decided with its first decision. A command without
// one is refused (CodeInvalid) before it is queued.
//
// When the register does not answer a batch (no node reachable, no
// leader, a timeout), every command of the batch is answered
// CodeNoLeader: its outcome is unknown, and the worker's client retries it
// at its next server (give workers the relay first and the register's
// nodes after it: `permitd worker --relay`).
//
// # Security
//
// The relay speaks the binary protocol only, with TLS when given a
// certificate (Config.TLS). With a token store (Config.Tokens) a
// connection's first call must be wire.OpAuth with a token of the worker
// (or admin) role, checked again on every call so that a token revoked by
// a reload stops working on open connections; without one, an OpAuth is
// answered CodeOK and ignored (loopback use). Upstream, the relay talks to
// the register as one worker, with its own client's TLS and token.
package relay
