// Command leased-scale measures how permitd's leased path scales with the
// number of workers and groups on one leased limit (issue 13, point 4).
//
// The register is real and separate: three `permitd agent` processes on
// loopback (built from ./cmd/permitd unless --permitd names a binary),
// each with its own raft-boltdb data directory in a temporary directory,
// fsync on. The workers are in this process (a thousand worker processes
// do not fit a small machine): transport/worker.Worker, each with its own
// memberlist on loopback UDP/TCP (-gossip udp) or on an in-memory network
// in this process (-gossip mem, memnet.go), each with a register client of
// its own (-clients 0) over the binary protocol (-protocol) starting at
// the nodes -via picks (holders.go). The leader's CPU is read from
// /proc/PID/stat, so it is the register's alone.
//
// A thousand workers fit one 2-core machine only with -gossip mem
// -gossip-uncompressed -gossip-slowdown 4: at memberlist's LAN defaults
// hundreds of memberlists in one process miss each other's probe
// deadlines and fall into suspicion storms (and its compression builds an
// LZW writer for every packet); -start-parallel bounds how many join at
// once.
//
// For every configuration (workers x groups, a group count above the
// worker count is skipped) it starts a fresh register and fleet, offers an
// open-loop demand of 1.5x the limit's rate split unevenly over the
// groups, waits for a warm-up, and measures over a window: register log
// entries and lease commands per second, the leader's CPU (cores, and
// per lease command), memberlist bytes sent per worker per second, and the
// fairness error of the register's own lease view. Then it measures the
// time to converge after a join (10 % more workers into the smallest
// group), a leave (as many workers stopped from the largest groups) and a
// partition (the smallest group's register calls fail; then healed).
//
// It writes the results as JSON and an SVG chart (see cmd/internal/bench/README.md's
// "Leased path" section for the definitions and the measured numbers).
//
// With -register-load N,... it measures instead only what the register
// sees of a fleet of N workers, for fleets too large for this machine:
// N lease holders without gossip, each renewing every TTL/2 at its own
// phase (registerload.go), and prints the leader's CPU per renewal, the
// log entries per second and the renewal latency; -pprof-out keeps the
// leader's CPU profile over the window (and each follower's, at the same
// path with .followerN appended). With -align-every P every holder sends
// its renewal at the next multiple of P instead of at its own phase, so
// that holders sharing a client (-clients) send them together, as a group
// relay flushing every P would: what such a relay would save the register.
//
// -debug-addr serves Go's profiler for the measuring process itself (the
// in-process workers), on loopback only (debug.go).
package main
