// Package sidecar serves a worker of a leased limit over HTTP: the
// register's reserve contract (POST /v1/limits/{name}/reserve, the same
// body and answers as the register's API) on the worker's own address,
// answered from the worker's lease instead of a raft decision, plus
// /v1/status, /healthz, /readyz and the worker's metrics. It is what
// `permitd worker` runs; a Go program can serve the same from its own
// worker with NewHandler.
//
// # Model
//
// A sidecar grants only permits its worker has already handed out: the
// pacing wait happens before it answers, so wait_ns is 0, and the n
// permits of one answer are usable together (a leased limit's bound is
// C + O + floor(W/I) + 1 in any window W, not strict spacing). With no
// permit within max_wait it answers 429 with retry_after_ns (and
// Retry-After): the worker's next renewal when it holds too few permits,
// else one pacing slot at its share, never 0. A worker that has failed
// closed (cut off from the register past its grants and its steal grace)
// answers 503, and /readyz fails while the worker holds no lease or is
// cut off. A sidecar does not deduplicate (a resent reserve is a new one,
// served from permits the worker counts as spent), but it accepts
// sessions, so that a client of the register works against it unchanged.
//
// Bad input gets the register API's messages (package
// transport/api parses both) and reaches no worker.
package sidecar
