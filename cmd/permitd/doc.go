// Command permitd is the permitd binary: a register node (agent), a worker
// sidecar, admin and client commands, an embedded demo and a load
// generator.
package main
