// Package cluster starts three `permitd agent` processes on loopback for
// the measurement programs (cmd/leased-scale, cmd/keys-scale): it builds
// the binary, starts the agents with data directories of their own
// (raft-boltdb, fsync on), waits for a ready leader, reads their CPU time
// and memory from /proc, stops them and starts them again on the same
// data directories and ports.
package cluster
