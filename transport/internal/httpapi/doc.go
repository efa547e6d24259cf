// Package httpapi holds what the register's HTTP API (package transport)
// and a worker's sidecar (package transport/sidecar) share: reading and
// answering JSON (bounded bodies, one object of known fields, errors that
// say what was wrong and what is allowed), names and request ids, and the
// reserve request, which both serve with the same body and answers.
//
// It imports no server package: the sidecar runs on the worker side.
package httpapi
