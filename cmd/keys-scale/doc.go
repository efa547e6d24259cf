// Command keys-scale measures templated keys at scale (issue 41): on a
// real 3-node cluster of the permitd binary on loopback (package
// cmd/internal/cluster: built from ./cmd/permitd unless -permitd names a
// binary, fsync on, --test-hooks for its snapshot call), for each count
// N of -keys, on a fresh cluster:
//
//   - fill: a template (strict, 1e9/s, as permitd bench creates by
//     default; idle -idle, so that no key goes) and N reserves on
//     ks:k0 ... ks:k(N-1) in a fixed random order (-fill-order
//     sequential: in order, which appends to a sorted index),
//     -fill-concurrency at once over the binary protocol, each creating
//     its key; then the template's live keys must be N;
//   - memory: each node's VmRSS and VmHWM (/proc/PID/status);
//   - throughput: `permitd bench` (the same binary) on the leader, in
//     -rounds rounds, each running in turn a single explicit limit
//     (ks-single, the same configuration), the hot key (--keys 1:
//     ks:k0) and a random key among N (--keys N), over each of
//     -protocols, at -concurrency for -duration after -warmup; the table
//     gives each side's median over the rounds;
//   - restart: a raft snapshot on every node (POST /v1/debug/snapshot),
//     then -after-snapshot reserves one by one (log entries after it),
//     then all three agents stopped (SIGTERM) and started again on the
//     same data directories: the time until every node answers
//     /v1/status (its HTTP server starts after its snapshot is
//     restored), until every node has applied the last entry from before
//     the stop (log replay, after an election), and until a reserve on
//     ks:k0 is granted and the template has N live keys again (ready);
//     and the nodes' VmHWM after it (restore's peak).
//
// It prints one table (and -json writes the results); the load average
// is printed next to every phase. See cmd/internal/bench/README.md,
// "Per-key scale".
package main
