// Command compare-redis measures permitd side by side with the approach it
// competes with: a single Redis running a GCRA Lua script (in the style of
// go-redis/redis_rate), on the same machine, in the same run.
//
// # What it measures
//
// For each concurrency level (--concurrency, default 1,16,128,512) it runs a
// closed loop against each side, alternating redis, permitd, redis, permitd
// (--rounds, default 2), each run --duration (default 5s) after an
// unmeasured --warmup (default 1s). A closed loop has that many workers,
// each sending its next request as soon as the last one returns, so the
// throughput it reports is what that many synchronous callers get, and
// latency is one request's round trip as the caller sees it. Every request
// is exactly one decision on one key:
//
//   - Redis: one EVALSHA of the GCRA script (gcra.lua) through go-redis,
//     whose pool has exactly as many connections as there are workers.
//   - permitd, by --protocol: binary (the default), one reserve frame of
//     the binary protocol (transport/wire) on one pipelined connection per
//     node shared by all workers, no request ID; client, the same through
//     the Go client (client.WithBinaryReserves), which adds a request ID to
//     every reserve for exactly-once retries; or http, one POST
//     /v1/limits/{name}/reserve per request over keep-alive HTTP/1.1 (as
//     permitd bench sends it). Requests go to all 3 nodes in turn (--target
//     all, the default; followers forward to the leader) or only to the
//     leader (--target leader).
//
// Both limits are set so high (--rate 1e9 per second, --burst 1000000,
// which is permitd's max_reserved; permitd's permits stay usable for a
// minute after their time, its expiry) that nothing is refused: the cost
// of the decision is measured, not the limit. Per concurrency it reports decisions
// per second, p50 and p99 latency, errors and refusals, for both sides, and
// the ratio permitd/redis, as a markdown table or, with --json, as JSON.
//
// # What each side guarantees
//
// The two sides do not buy the same thing, and the table should be read
// with that in mind:
//
//   - Redis here is one node, no replica, persistence off (--save ""
//     --appendonly no). Decisions are atomic and, while it runs, linearizable
//     (one thread, one key), but nothing is durable: if the process or the
//     machine stops, every limit's state is lost, and while it is down no
//     decision can be made at all. Adding a replica (asynchronous) would not
//     make a granted decision survive a failover.
//   - permitd is a 3-node raft cluster with fsync on (the default): a
//     decision is answered only after a majority has written it to disk, so
//     decisions are linearizable and durable, and the cluster keeps deciding
//     through the failure of any one node (a minority).
//
// # What it runs
//
// It installs the Debian package redis-server if redis-server is not on
// PATH (apt-get update && apt-get install -y redis-server; it needs root),
// builds permitd's cmd/permitd of this checkout (or uses --permitd-bin), and
// starts redis-server and 3 permitd agents on free 127.0.0.1 ports with
// data under one temporary directory. Everything it started is stopped, by
// pid (SIGTERM, then SIGKILL after 5s), and the temporary directory is
// removed, whether the run ends normally, on an error or on Ctrl-C (a
// second Ctrl-C exits at once; the kernel then kills the children). Every
// loop is bounded in time and count. All traffic is on loopback.
//
// The load generator, redis-server and the 3 agents share the machine's
// CPUs: on a small machine the numbers say as much about that sharing as
// about either side. The load average at the start and end is reported.
//
// Usage:
//
//	go run -C cmd/compare-redis . [--concurrency 1,16,128,512] [--rounds 2]
//	    [--duration 5s] [--warmup 1s] [--target all|leader]
//	    [--protocol binary|client|http] [--json]
//
// (from the checkout's root: the command is a module of its own).
package main
