// Package server is the register's edge, everything a client reaches of
// a node in one place: the HTTP/JSON API (NewHandler), the binary client
// protocol on the same port (NewSniffListener, Binary), API tokens on both
// (RequireTokens, AuthenticatedBinary), the Prometheus metrics and the
// OpenAPI document's serving.
//
// # Model
//
// The HTTP layer is a thin, strict edge in front of a Store (a *node.Node in
// production, the fake register of package transport/server/fakestore in
// tests). It declares the interface it consumes, in the manner of hraftd
// and rqlite: the node knows nothing about HTTP, and the handler knows
// nothing about raft. The binary protocol reads its calls with the node's
// own call loop (node.ServeCalls, which the nodes forward to each other
// on) and gives each its meaning here. Answers are the types of package
// transport/api, which the Go client reads.
//
// Every request is validated completely before the Store is called, so an
// invalid request never reaches the replicated log ("reject before
// replicate"). Bodies are limited to 1 MiB, must be exactly one JSON object
// with no unknown fields and no trailing data, and every error is answered
// with a JSON object {"error": "..."} that says what was wrong and what is
// allowed. Store errors map to status codes:
//
//	node.ErrNotFound                → 404
//	node.ErrInvalid                 → 400 (the store's message)
//	node.ErrConflict                → 409
//	node.ErrNoLeader, ErrShutdown,
//	context deadline, anything else → 503 (with Retry-After)
//
// No input makes the handler panic or answer a 5xx other than 503. The
// whole contract, every endpoint with its fields and answers, is the
// OpenAPI document of package transport/openapi, served at
// GET /v1/openapi.json.
//
// # Grants are relative
//
// A granted reserve answers {"granted":true,"wait_ns":W}: the permits may be
// used W nanoseconds after the client received the answer. A refused reserve
// answers 429 with {"granted":false,"retry_after_ns":R} and a Retry-After
// header in whole seconds, rounded up. Client clocks never matter, only their
// rate.
//
// # Endpoints
//
//	PUT    /v1/limits/{name}           create or replace a limit
//	GET    /v1/limits/{name}           one limit (linearizable)
//	GET    /v1/limits                  all limits, sorted by name
//	DELETE /v1/limits/{name}           remove a limit
//	POST   /v1/limits/{name}/reserve   reserve permits
//	PUT    /v1/limits/{name}/lease-policy        make a limit leased or linearized
//	GET    /v1/limits/{name}/leases              lease pool and leases (linearizable)
//	POST   /v1/limits/{name}/lease               open a lease
//	POST   /v1/limits/{name}/leases/{id}/renew   report on a grant, get the next
//	POST   /v1/limits/{name}/leases/{id}/return  report on a grant, close the lease
//	POST   /v1/sessions                open a session for exactly-once reserves (sessions.go)
//	GET    /v1/status                  api.Status
//	GET    /v1/cluster                 leader and raft servers
//	POST   /v1/cluster/join            add a server {"id","raft_addr"}: a voter once caught up
//	POST   /v1/cluster/transfer-leadership  hand the leadership to {"to"}
//	DELETE /v1/cluster/servers/{id}    remove a server
//	GET    /v1/snapshot                the leader's consistent snapshot
//	GET    /metrics                    Prometheus metrics
//	GET    /healthz                    200 while the process serves
//	GET    /readyz                     200 only when Status.Ready
//	GET    /v1/openapi.json            this API's OpenAPI 3 document (no token needed)
//
// Every GET but the snapshot's also answers HEAD.
//
// # Leases
//
// A leased limit (see package fsm) hands its permits to workers by lease
// instead of one reserve at a time; reserves on it are answered 400.
// Lease, renew and return answer {"status": ...}: 200 "granted" (with
// lease_id, epoch, permits, expires_in_ns and the holder's
// share_milli_per_sec) or "returned", 429 "refused" (the holder already
// holds a lease, named by lease_id; with retry_after_ns and a Retry-After
// header), 409 "fenced" (the lease is not live at that epoch: stop using
// the grant). expires_in_ns counts from when the client sent the request,
// not from when it received the answer. Demands and shares are integers
// of thousandths of a permit per second (demand_milli_per_sec,
// share_milli_per_sec); the older demand_per_sec is a JSON number
// converted exactly from its decimal text to thousandths, rounding any
// remainder up (so a positive demand never becomes 0).
//
// # Metrics
//
// Metrics live on a registry the caller owns (no global state). Label
// cardinality is bounded: reserve and lease outcomes and HTTP routes are fixed sets;
// limit names never become labels.
//
// # Binary reserves
//
// NewSniffListener lets the HTTP port also serve permitd's binary,
// pipelined protocol (package transport/wire): a connection that starts
// with wire.ClientPreface (0x00) is handed to a Binary (binary.go), which
// reads its reserves, sessions and lease commands, and validates,
// deduplicates and forwards them exactly as their HTTP forms; every other
// connection reaches the HTTP server with its first byte intact. The
// node serves the connection's calls (node.ServeCalls: the window of
// calls in flight, the read-loop admission of reserves) and Binary says
// what each call means; AuthenticatedBinary puts API tokens in front.
//
// The Go client is in package transport/client.
package server
