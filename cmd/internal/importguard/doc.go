// Package importguard holds no code, only the tests that encode the rules
// the README states about permitd's structure, so that they cannot
// silently rot. Every rule is a function over parsed files, import lists
// or dependency lists, and TestGuardCatchesAViolation feeds each one
// made-up input it must reject.
//
// The import graph (TestImportGraph, importguard_test.go): every package,
// test files included (internal and external test packages, every
// platform's files), imports only the module packages its entry in
// allowed lists; every package has an explicit entry, so a new package
// states its place. Imports only tests make (end-to-end tests of the
// client side that start a real register, test certificates, the
// fault-injecting network) are exceptions in testAllowed, each with its
// reason; an exception no test uses any more fails the test. The layering
// the README draws:
//
//	server side:  cmd → transport/server → node → fsm → bucket
//	client side:  transport/client → transport/wire
//	              transport/worker → transport/client, bucket, transport/wire
//	              transport/limiter → bucket, transport/wire
//	              transport/sidecar → transport/worker, transport/api
//	shared leaves: transport/api → transport/wire; transport/wire → nothing
//	jepsen-lite:  its own packages, and permitd only through
//	              transport/client (the public API) and its binaries
//
// is itself checked against the tables (TestTablesKeepTheLayers), so that
// an added line cannot contradict it: the server chain's imports point
// down, the client side never imports the server, bucket and
// transport/wire import nothing of permitd, and jepsen-lite reaches
// permitd only through transport/client, in its tests too.
//
// Determinism (TestDeterministicPackages, purity_test.go): bucket and fsm
// never read a clock, use randomness, do I/O or log. Their files import
// only a standard-library allowlist (pureImports; fsm also raft, for the
// raft.FSM interface), and go/ast finds the uses of allowed packages that
// would break the rule: the clock reads and waits of package time (Now,
// Since, Sleep, After, timers, the local zone), fmt's printing and
// scanning, the print builtins, dot imports, and go statements. Test files
// are checked too: they may import the testing helpers of pureTestImports,
// and break a rule only where pureExceptions names the file, the rule and
// the reason (seeded random inputs, the concurrent-read tests' goroutines).
//
// Dependencies (TestClientSideIsLight, deps_test.go): the full dependency
// graphs (go list -deps) of the client side (transport/client, wire,
// limiter, relay, worker, sidecar) and of every jepsen-lite package
// contain neither node nor fsm, nor raft or bbolt; only the worker, which
// gossips, and the sidecar that runs it link memberlist.
//
// transport/wire is the one leaf both sides share: the binary protocol's
// frames and types, and the saturating arithmetic of the nanoseconds they
// carry (wire.AddNanos), importing nothing of permitd. node imports it to
// forward commands to the leader; the client imports it to speak the
// binary protocol; the worker and the limiter for that arithmetic.
package importguard
