// Package lazyctx is a context with a deadline that costs nothing unless
// something waits on it: context.WithDeadline arms a runtime timer and
// registers itself with its parent for every call, which the register's
// hot paths (a reserve decided on the leader waits for its entry's
// outcome whatever its context says) never consult. A Context reports the
// same deadline, and Err reads the clock against it; only Done (anything
// that selects on the context, or derives a context from it) makes a real
// context.WithDeadline of the parent, from then on the context's whole
// behaviour, so a call that waits is bounded exactly as before.
//
// node serves its forwarded calls with one (no parent, carrying the
// call's place in its connection's window); transport/server bounds each
// request with one (the request's context as parent).
package lazyctx
