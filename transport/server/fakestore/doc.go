// Package fakestore is a server.Store for tests of the HTTP handler, the
// Go client and the worker: the real register (an fsm.FSM, fed one log
// entry per command) on a manual clock, without raft, goroutines or disks,
// deterministic.
//
// What a node adds around the register is mirrored here, and only that:
// requests are validated before they reach the log (node.ErrInvalid), an
// unknown limit is node.ErrNotFound, a reserve on a leased limit or of more
// permits than the limit can grant is refused at the edge, the register's
// domain outcomes that the API reports as errors become errors, and a grant
// that expired before its answer is a refusal. Everything else — pacing,
// deduplication, sessions, lease books, snapshots — is the register's own.
//
// Test hooks replace or observe calls: SetErr, SetReserveFunc,
// SetLeaseFunc, SetStatus, Reserves, LeaseCommands, Calls; Advance moves
// the clock.
package fakestore
