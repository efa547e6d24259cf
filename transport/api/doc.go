// Package api is the vocabulary of permitd's HTTP API that its servers and
// clients share: what the register's API (package transport/server) and a
// worker's sidecar (package transport/sidecar) share to read and answer
// JSON (bounded bodies, one object of known fields, errors that say what
// was wrong and what is allowed), names and request ids, and the reserve
// request, which both serve with the same body and answers.
//
// It imports no server package, only the standard library and
// transport/wire: the sidecar and the clients run on the worker side.
package api
