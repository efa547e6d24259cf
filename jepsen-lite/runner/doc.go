// Package runner is jepsen-lite's runner: it starts a real permitd cluster,
// drives it with client workers through a seeded schedule of faults, and
// judges what happened with package checker.
//
// # Layout
//
// The runner orchestrates; each concern is a package of its own, and the
// imports go one way (runner → workload, nemesis → cluster → process,
// netns):
//
//   - process: one Supervisor for every child process (agents and worker
//     sidecars): start, kill -9, pause, resume, stop, generations, logs,
//     unexpected exits, readiness;
//   - netns: the namespace mode's network (namespaces, veths, blackhole,
//     nftables partitions);
//   - cluster: the agents (addresses, command lines, one Supervisor each)
//     and Control, one node's public HTTP API and test hooks; Observer
//     for leader changes and snapshot installs;
//   - nemesis: the fault specification, the seeded schedule and the fault
//     injectors (partition, kill, pause, clock, loss, snapshot, transfer,
//     reconfig, worker, relay);
//   - workload: the client workers (strict, window, leased), the worker
//     sidecars, history recording of reserves and API calls;
//   - runner (this package): configuration, mode choice, the run's
//     sequence, the checkers' inputs and verdict, the report.
//
// Two internal packages serve them all: httpjson, the raw JSON requests
// to agents and sidecars, and secure, a secure run's credentials (see
// secure.go here): nil for a plain run, whose requests stay as they were.
//
// jepsen-lite talks to permitd only through its public HTTP API, its Go
// client (transport/client) and its binaries.
//
// # A run
//
//  1. Choose the mode (Config.Mode: auto, namespaces, fallback; see
//     below), build permitd (unless given a binary) and start N agents (3
//     or 5), each with --test-hooks and its own data directory: in the
//     namespace mode each in its own network namespace at 10.213.S.1,
//     .2, ...; in the fallback mode on loopback, each on its own loopback
//     IP (127.0.0.11, .12, ...). A secure run (Config.Secure) first
//     makes a CA, node certificates and tokens, and every agent serves
//     TLS and requires tokens; every client of the run uses them.
//  2. Start the fake API (package fakeapi) on a unix socket, out of the
//     faults' reach, with the history's time base.
//  3. Create the run's limit (recorded as a put), then run W workers:
//     goroutines of the runner that reserve n permits (mostly 1, up to
//     Config.MaxPermits) through transport/client, wait for each permit's
//     turn (strict: wait + j·spacing), check it is still usable (strict:
//     not expired; window: answered within 100 ms and used within 20 ms of
//     ready) and call the fake API once per permit. Every reserve and API
//     call is an operation in the history.
//  4. Meanwhile apply the schedule (Generate, deterministic in the seed):
//     partitions, kill -9 and restart, SIGSTOP/SIGCONT, clock jumps and
//     rates, loss and delay, isolating a follower past a log compaction,
//     leadership transfers A→B→A, and slowing the limit down for a
//     window, optionally with a forced snapshot, kill -9 and restart of
//     one node right after (package nemesis).
//     Each fault is a nemesis operation in the history, from start to end.
//     Partitions and loss are nftables rules in the node namespaces
//     (namespace mode) or go through every agent's POST /v1/debug/faults
//     (node/faultnet.TCPFaults, fallback mode); delay and jitter always go
//     through the fault layer (netem is not available); clocks through
//     POST /v1/debug/clock, kills and pauses through signals to the
//     agents' pids.
//  5. At Duration − Tail heal everything (every node running, unpaused,
//     with no fault), keep the workers going for the tail, stop them, wait
//     for every node to reach one applied index, and read every node's
//     final /v1/status, /v1/limits and /v1/debug/state.
//  6. Judge: spacing (strict: consecutive API calls >= I − expiry −
//     jitter), windows (the README's bound), conservation, linearizability
//     (strict), durability, the timeline (cluster time never ran ahead of
//     real time), logs, restart-ready (a node restarted from its own
//     snapshot is ready within 20 s), and recovery (throughput back after
//     the heal). Across a reconfiguration the bounds are judged with the
//     fastest configuration in effect and linearizability epoch by epoch.
//  7. Write the report directory: summary.json, history.jsonl,
//     api-calls.jsonl, nodes/*.log, linearizability-*.html (porcupine) and a
//     self-contained index.html with an SVG timeline.
//
// Every agent is stopped by pid on every exit path (and dies with the
// runner through the parent-death signal on Linux); every loop is bounded
// in count and time.
//
// # Modes
//
// The namespace mode (primary; root with ip(8) and nft(8), proven by a
// probe in DetectNamespaces) gives every agent a network namespace
// pdj<pid>-n<i>, started with ip netns exec (which execs the agent, so
// the pid signalled is the agent's), with one end of a veth pair; the
// other ends sit on a bridge in a namespace of its own, pdj<pid>-br. The
// runner claims a /24 of 10.213.0.0/16 and, before creating any
// namespace, blackholes it in the root namespace (proto 213, metric =
// its pid); the nodes live in its lower /25 and the runner reaches them
// through one more veth pair, pdj<pid>-h (.126) in the root namespace, whose
// connected /25 is more specific than the blackhole (checked at setup:
// blackholed while it is down, routed through it once up). Partitions are
// packet drops in the nodes' namespaces (addresses of other nodes only,
// never the runner's), replaced atomically with nft -f. One
// idempotent cleanup (netns.Env.Cleanup) kills what runs in the
// namespaces, deletes them, the root links and then the blackhole on
// every exit of Run (end, error, panic in Run's goroutine, SIGINT/SIGTERM
// of the jepsen command); every run first sweeps the leftovers of runners
// that are gone (a runner killed with -9). The fallback mode uses only
// loopback and unix sockets.
//
// # The leased workload
//
// Workload leased (leased.go here; package workload's Fleet and leased
// clients; package nemesis's worker faults) runs
// W real `permitd worker` sidecars on loopback in the runner's namespace
// (in both modes: in the namespace mode they reach the agents through the
// root-side veth, like the runner's clients, and the partitions drop only
// traffic between nodes), worker i in group g(i%G+1), each gossiping
// with all the others and leasing one limit jl-leased (strict, 1 per I,
// with a lease policy C, O) from the agents. Client goroutine i reserves
// one permit at a time from sidecar i (POST /v1/limits/jl-leased/reserve,
// max_wait 50 ms) and calls the fake API at once, within 100 ms of the
// reserve's invoke (else it drops the grant: the sidecar spent the permit
// between invoke and completion, so the use is at most 100 ms after the
// spend). The runner reads every sidecar's GET /v1/status every 250 ms
// (and right before a kill, and twice after the load stopped). Judged by
// the README's leased bound C + O + floor(W/I) + 1 over W = 1, 5, 10 s
// (tolerance: the 100 ms use delay plus the measured delivery jitter),
// lease conservation (checker.LeasedConservation: per process spent <=
// leased + stolen_in − stolen_out and grants answered <= spent; over the
// fleet Σ stolen_in <= Σ stolen_out), request-ID conservation, durability
// of the puts, the timeline, logs (agents' and workers') and recovery
// (over 1 s windows). Worker faults (kind worker): isolate-group cuts one
// group off from the register through the sidecars' --test-hooks
// endpoint (POST /v1/debug/faults {"register":"drop"|"blackhole"}), so it
// finishes its lease, steals, then fails closed with 503; pause SIGSTOPs
// half the sidecars; kill SIGKILLs one and restarts it at the fault's end.
// Some sidecars send their lease commands through a lease relay
// (`permitd relay`, package workload's relay.go: by default 2 relays from
// 3 workers on, sidecar i through relay i mod 3 when that is 0 or 1, the
// others direct), each relay reaching the agents through TCP proxies of
// the runner's; relay faults (kind relay) kill relays, restart them in
// turn, and cut them off from the register at those proxies.
//
// # Verdict
//
// Summary.ExitCode: 0 valid, 1 a safety violation (any checker but
// recovery), 3 the run could not be carried out or judged completely, 4
// safe but throughput did not recover.
package runner
