// Package api is the vocabulary of permitd's HTTP API that its servers and
// clients share: the JSON of what crosses it, and the rules both HTTP
// servers (the register's, package transport/server, and a worker's
// sidecar, package transport/sidecar) read and answer requests by.
//
// # The JSON, once
//
// Each answer the API gives has one Go type here, which the register
// writes and the Go client (package transport/client, which names them
// under its own aliases) and jepsen-lite read: a limit (LimitSpec, the
// configuration a PUT sends and every answer shows; Limit, LimitPut,
// Limits), a node's status and the cluster (Status, Server, Promotion,
// Cluster), a leased limit's pool and its leases (LeasePool, LeaseState),
// the answers of lease commands and lease policies (LeaseAnswer,
// LeasePolicyResult), of reserves (ReserveAnswer), settlements, releases
// and joins, and every error (ErrorAnswer). The register writes its hot
// answers (reserves, sessions) by hand for speed, with the same keys;
// transport/server's TestReserveAnswersDecodeAsTheAPIs decodes each kind
// of answer strictly into its type here, so that neither side can add a
// key alone. The OpenAPI document (package transport/openapi) is the
// contract these types implement.
//
// # Reading requests
//
// Both HTTP servers read requests the same way: bounded bodies (1 MiB),
// exactly one JSON object of known fields with no null and no trailing
// data (DecodeObject, Opt, Fields), errors that say what was wrong and
// what is allowed (Error, BadRequest, WriteError), names and request ids
// (ValidateName, ValidateRequestID), and the reserve body, which both
// serve with the same fields and answers (ParseReserve, into a
// wire.Reserve).
//
// It imports no server package, only the standard library and
// transport/wire: the sidecar and the clients run on the worker side.
package api
