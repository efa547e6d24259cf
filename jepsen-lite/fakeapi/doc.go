// Package fakeapi is the judge of a jepsen-lite run: a fake third-party
// API, a rate-limited service ("at most 1 call every I"), that records every
// call it receives and counts, live, the calls that break the limit it was
// configured with.
//
// # Model
//
// Workers reserve a permit through permitd's client, exactly as a user's
// code would, and then call POST /call here, naming themselves, the request
// ID of the grant they spend and, optionally, their own monotonic send time.
// The server stamps each call with one monotonic time base (nanoseconds
// since Config.Start; the runner passes the instant its history writer
// counts from, so API times and history times compare directly), assigns
// it a sequence number and keeps it. The stamp is taken under the server's
// lock, so sequence order is time order.
//
// It listens on a unix socket (or a loopback address) that the network
// faults of a run cannot touch: only permitd's own traffic is faulted, never
// the judge's.
//
// # Live monitor
//
// Two modes, the same formulas as package checker:
//
//   - Spacing ("1 every I"): a call closer than I - Tolerance to the previous
//     call is a violation;
//   - Window ("at most Bound.Max(W) per window W"): every call that ends a
//     closed window of length W - Tolerance holding more than Bound.Max(W)
//     calls is a violation.
//
// Keyed mode applies one of them (KeyMode) to every key alone: each call
// names its key (a templated limit), and Stats sums the keys' counts.
//
// GET /stats reports the counts, the smallest gap and the fullest window.
// The live numbers are a monitor for dashboards and early stops; the
// verdict of a run is the checker's, computed from GET /calls afterwards
// (with zero tolerance both count the same calls).
//
// # Endpoints
//
//	POST /call   {"worker":"w1","request_id":"..","sent_ns":123} → 200 Call
//	GET  /calls  {"calls":[Call...]} in sequence order
//	GET  /stats  Stats
//
// Bodies are at most 4 KiB, exactly one JSON object without unknown fields;
// bad input is answered 400 with {"error":"..."} saying what is allowed. The
// number of calls kept is bounded (Config.MaxCalls); past it a call is
// answered 503 and not recorded.
package fakeapi
