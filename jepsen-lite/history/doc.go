// Package history is jepsen-lite's record of a test run: every operation a
// worker or a nemesis performed, as JSON lines, one Op per line.
//
// # Model
//
// An operation is two entries, as in Jepsen: an invoke, written before the
// request is sent, and a completion, written after its outcome is known.
// The completion's Type says what is known:
//
//   - ok: the operation took effect (for reserve: the permits were granted);
//   - fail: the operation certainly did not take effect (for reserve: the
//     register refused, or the request was rejected before it could reach
//     the log);
//   - info: the outcome is unknown (a timeout, a connection reset after
//     sending). An info operation may still take effect, at any time after
//     its invoke; checkers treat it that way.
//
// An invoke without a completion is read as info. A process has at most
// one operation outstanding: its next invoke comes after the previous
// completion. A completion names the same process and function as its
// invoke and is not earlier than it.
//
// Nemeses are recorded the same way, with negative process numbers and
// F = "nemesis": the invoke when the fault starts, the completion when it
// ends (healed).
//
// # Time
//
// TimeNanos is monotonic, in nanoseconds since the start of the run, from
// one Clock shared by every writer of the run (SinceStart). The fake API
// takes the same start instant, so history times and API receive times are
// comparable when both live in one process. Index is the entry's position
// in the file, 0-based, assigned by the Writer together with the time under
// one lock, so index order is time order.
//
// # Values
//
// Value is free-form JSON. The functions jepsen-lite's checkers read use
// the shapes in values.go: ReserveRequest on a reserve invoke,
// ReserveResponse on its completion, LimitRequest on put and delete,
// NemesisValue on nemeses, APICallValue on api-call. RequestID, when set,
// is the idempotency key permitd's client sent with the reserve; the worker
// passes the same key to the fake API when it spends the permit.
package history
