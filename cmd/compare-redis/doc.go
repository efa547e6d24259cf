// Command compare-redis measures permitd side by side with the approaches
// it competes with, on the same machine, in the same run: a single Redis
// running a GCRA Lua script (in the style of go-redis/redis_rate), and a
// 3-member etcd, the durable peer, running the same GCRA by
// compare-and-swap; and bare hashicorp/raft, permitd's consensus without
// permitd, the floor under its latency. (The name predates the other
// peers; it is kept.)
//
// # What it measures
//
// For each concurrency level (--concurrency, default 1,16,128,512) it runs a
// closed loop against each side, alternating them (by default redis,
// binary, etcd, http, raft) for --rounds rounds (default 2), each run --duration
// (default 5s) after an unmeasured --warmup (default 1s). A closed loop has that many workers,
// each sending its next request as soon as the last one returns, so the
// throughput it reports is what that many synchronous callers get, and
// latency is one request's round trip as the caller sees it. Every request
// is exactly one decision on one key:
//
//   - redis (--peers): one EVALSHA of the GCRA script (gcra.lua) through
//     go-redis, whose pool has exactly as many connections as there are
//     workers.
//   - etcd (--peers): the same GCRA by compare-and-swap: read the key
//     holding the theoretical arrival time (TAT), compute on the load
//     generator's clock, then one transaction that puts the new TAT if the
//     key's ModRevision is still the one read; when another decision won,
//     the transaction's Else branch returns the key's current value and the
//     decision is computed again on it (one more transaction per lost
//     race). One go.etcd.io/etcd/client/v3 client shared by all workers
//     (gRPC multiplexes them on one connection per member).
//   - raft (--peers): one Apply of a 64-byte entry on the leader of a
//     3-node hashicorp/raft cluster in this process (raft-boltdb/v2 on
//     disk, fsync on, TCP on loopback, permitd's raft settings, a no-op
//     state machine), until its future returns. The summary shows each
//     permitd side's p50 over raft's, per round.
//   - permitd, one side per --protocol (default binary,http): binary, one
//     reserve frame of the binary protocol (transport/wire) on one
//     pipelined connection per node shared by all workers, no request ID;
//     client, the same through the Go client (client.WithBinaryReserves),
//     which adds a request ID to every reserve for exactly-once retries; or
//     http, one POST /v1/limits/{name}/reserve per request over keep-alive
//     HTTP/1.1 (as permitd bench sends it). Requests go to all 3 nodes in
//     turn (--target all, the default; followers forward to the leader) or
//     only to the leader (--target leader; etcd's client then also has only
//     the leader's endpoint).
//
// Every limit is set so high (--rate 1e9 per second, --burst 1000000,
// which is permitd's max_reserved; permitd's permits stay usable for a
// minute after their time, its expiry) that nothing is refused: the cost
// of the decision is measured, not the limit. It prints a summary table,
// per concurrency: each side's decisions per second and each permitd
// protocol's throughput ratio to each peer as the range over the rounds
// (round r's runs ran next to each other); then a detail table, per side,
// with p50 and p99 latency, errors and refusals, and the CPU used by the
// side's servers and by the load generator. With --json, all of it and
// every run as JSON.
//
// # What each side guarantees
//
// The sides do not buy the same thing, and the tables should be read
// with that in mind:
//
//   - Redis here is one node, no replica, persistence off (--save ""
//     --appendonly no). Decisions are atomic and, while it runs, linearizable
//     (one thread, one key), but nothing is durable: if the process or the
//     machine stops, every limit's state is lost, and while it is down no
//     decision can be made at all. Adding a replica (asynchronous) would not
//     make a granted decision survive a failover.
//   - etcd is 3 members with fsync on (its default): a transaction is
//     answered after a majority has written it to disk, so decisions are
//     linearizable and durable and survive the failure of any one member,
//     as permitd's. Its GCRA runs in the client, so under contention most
//     transactions lose the race and are sent again.
//   - permitd is a 3-node raft cluster with fsync on (the default): a
//     decision is answered only after a majority has written it to disk, so
//     decisions are linearizable and durable, and the cluster keeps deciding
//     through the failure of any one node (a minority).
//
// # What it runs
//
// It installs the Debian packages redis-server and etcd-server if
// redis-server or etcd is not on PATH (apt-get update && apt-get install
// -y; it needs root; --install-redis=false, --install-etcd=false refuse),
// builds permitd's cmd/permitd of this checkout (or uses --permitd-bin),
// and starts redis-server, 3 etcd members and 3 permitd agents on free
// 127.0.0.1 ports with data under one temporary directory. Everything it
// started is stopped, by pid (SIGTERM, then SIGKILL after 5s; etcd's
// members, whose data is thrown away, SIGKILL at once), and the temporary
// directory is removed, whether the run ends normally, on an error or on
// Ctrl-C (a second Ctrl-C exits at once; the kernel then kills the
// children). Every loop is bounded in time and count (a decision on etcd
// gives up after 10 000 lost races in a row). All traffic is on loopback.
//
// The load generator and every server share the machine's
// CPUs: on a small machine the numbers say as much about that sharing as
// about either side. The load average at the start and end is reported.
//
// Usage:
//
//	go run -C cmd/compare-redis . [--concurrency 1,16,128,512] [--rounds 2]
//	    [--duration 5s] [--warmup 1s] [--target all|leader]
//	    [--peers redis,etcd] [--protocol binary,http,client] [--json]
//
// (from the checkout's root: the command is a module of its own).
package main
