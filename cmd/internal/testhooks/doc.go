// Package testhooks owns the testing-only hooks of the permitd binary,
// served behind --test-hooks (and --test-double-lease) for jepsen-lite:
// an agent's clock skew, state hash and forced snapshot
// (/v1/debug/clock, /v1/debug/state, /v1/debug/snapshot) and its raft
// fault layer (/v1/debug/faults, hooks.go); a worker's fault switch
// between it and the register (FaultyRegister, its /v1/debug/faults)
// and the deliberately broken double-spending sidecar (worker.go).
//
// Nothing here runs unless a flag asks for it; the demo borrows
// FaultyRegister to cut a worker group off from the register.
package testhooks
