// Package importguard holds no code, only the test that encodes permitd's
// allowed import graph, so the layering the README draws cannot silently
// rot:
//
//	server side:  cmd → transport → node → fsm → bucket
//	client side:  transport/client → transport/wire
//	              transport/worker → transport/client, bucket, transport/wire
//	              transport/limiter → bucket, transport/wire
//	              transport/sidecar → transport/worker, transport/internal/httpapi
//	jepsen-lite:  its own packages, and permitd only through
//	              transport/client (the public API) and its binaries
//
// transport/wire is the one leaf both sides share: the binary protocol's
// frames and types, and the saturating arithmetic of the nanoseconds they
// carry (wire.AddNanos), importing nothing of permitd. node imports it to
// forward commands to the leader; the client imports it to speak the
// binary protocol; the worker and the limiter for that arithmetic. The
// client side never imports node or fsm, and its dependencies (go list
// -deps) contain no raft, bbolt or memberlist (memberlist only for the
// worker, which gossips).
package importguard
