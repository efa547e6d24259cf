// Package runner is jepsen-lite's runner: it starts a real permitd cluster,
// drives it with client workers through a seeded schedule of faults, and
// judges what happened with package checker.
//
// # A run
//
//  1. Build permitd (unless given a binary) and start N agents (3 or 5) on
//     loopback, each with --test-hooks, its own loopback IP
//     (127.0.0.11, .12, ...) and data directory. This is the fallback mode:
//     network namespaces (the primary mode, a later step) are detected and
//     reported but not used.
//  2. Start the fake API (package fakeapi) on a unix socket, out of the
//     faults' reach, with the history's time base.
//  3. Create the run's limit (recorded as a put), then run W workers:
//     goroutines of the runner that reserve through transport/client, wait
//     for the grant, check it is still usable (strict: not expired; window:
//     answered within 100 ms and used within 20 ms of ready) and call the
//     fake API. Every reserve and API call is an operation in the history.
//  4. Meanwhile apply the schedule (Generate, deterministic in the seed):
//     partitions, kill -9 and restart, SIGSTOP/SIGCONT, clock jumps and
//     rates, loss and delay, isolating a follower past a log compaction.
//     Each fault is a nemesis operation in the history, from start to end.
//     Partitions, loss and delay go through every agent's POST
//     /v1/debug/faults (node/faultnet.TCPFaults), clocks through POST
//     /v1/debug/clock, kills and pauses through signals to the agents' pids.
//  5. At Duration − Tail heal everything (every node running, unpaused,
//     with no fault), keep the workers going for the tail, stop them, wait
//     for every node to reach one applied index, and read every node's
//     final /v1/status, /v1/limits and /v1/debug/state.
//  6. Judge: spacing (strict: consecutive API calls >= I − expiry −
//     jitter), windows (the README's bound), conservation, linearizability
//     (strict), durability, the timeline (cluster time never ran ahead of
//     real time), logs, and recovery (throughput back after the heal).
//  7. Write the report directory: summary.json, history.jsonl,
//     api-calls.jsonl, nodes/*.log, linearizability-*.html (porcupine) and a
//     self-contained index.html with an SVG timeline.
//
// Every agent is stopped by pid on every exit path (and dies with the
// runner through the parent-death signal on Linux); every loop is bounded
// in count and time; only loopback and unix sockets are used.
//
// # Verdict
//
// Summary.ExitCode: 0 valid, 1 a safety violation (any checker but
// recovery), 3 the run could not be carried out or judged completely, 4
// safe but throughput did not recover.
package runner
