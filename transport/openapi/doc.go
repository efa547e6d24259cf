// Package openapi holds the OpenAPI 3 description of the register's HTTP
// API (package transport), kept in the repository as openapi.json and
// embedded here, so that every node serves exactly the reviewed document at
// GET /v1/openapi.json.
//
// # Model
//
// The document is written by hand and is the contract: one path per route
// of the handler (routeLabels in transport/handler.go), and for each method
// the path serves, its parameters, its request body and every answer it
// can give, with status, headers (Retry-After on 429 and 503,
// WWW-Authenticate on 401, Allow on 405) and JSON body. Request and answer
// objects list every field, say which are required, and set
// additionalProperties to false wherever the server rejects unknown fields
// or never sends others, so that a field renamed, added or retyped on
// either side breaks the conformance test instead of a client. Limit
// configurations and limit views are discriminated by "algorithm" (strict,
// bursty, warmup, hybrid), each variant listing only its algorithm's
// options, as the server answers them. Each operation names the role its
// token needs in x-permitd-role (see package transport/auth); the
// bearerAuth scheme applies to every operation but /healthz, /readyz and
// /v1/openapi.json.
//
// # Keeping it honest
//
// The conformance test of this package (conformance_test.go) starts a
// real 3-node raft cluster in the process, serves each node with
// transport.NewHandler behind transport.RequireTokens over httptest, and
// drives every operation through its successes and its errors, validating
// each request and each answer against the document with kin-openapi. It
// fails when a route of the handler has no path here or a path no route,
// when an operation or a documented status is never exercised, when an
// answer has a status, header or field the document does not allow, when
// the document accepts a request the server rejects as malformed, and when
// the 405 answers' Allow headers disagree with the documented methods.
//
// This package imports nothing from the module, so that any program (a
// client generator, a gateway) can embed the document without the server.
package openapi
