// Package checker holds jepsen-lite's judges: pure functions from what a
// run recorded (the history, the fake API's calls, every node's final
// state, the logs) to a Result. Each one can fail, and its tests prove it
// on hand-made histories that break it.
//
// # The checkers
//
//  1. Spacing (strict mode, at the fake API): consecutive calls are at
//     least I − tolerance apart.
//  2. Window (window modes, at the fake API): every closed window of length
//     W − tolerance holds at most Bound.Max(W) calls, where Bound is the
//     README's formula (package bound); the worst window is reported.
//  3. Conservation: tokens come only from grants (later: leases) and are
//     spent once: no request ID is granted twice, every API call spends a
//     token of a distinct grant, never before the grant was received or
//     ready. A ledger of Credit / Transfer / Spend events, so lease and
//     steal events plug in as TokenEvents.
//  4. Linearizability: porcupine over a model of the strict register as
//     clients see it (relative waits), per limit. See Linearizability for
//     exactly what the model checks and what it cannot.
//  5. Durability: every acknowledged limit and grant is in every node's
//     final state, and replicas at equal applied index have equal state
//     hashes.
//  6. Recovery: after the final heal, throughput at the fake API returns to
//     a fraction (0.9) of the limit within a stated time.
//  7. Logs: no "panic:", "DATA RACE" or "fatal error:" in any log.
//  8. KeyedBounds and KeysFull (templated keys, keyed.go): each key's calls
//     against that key's bound in force, across drops and re-creations;
//     keys_full answers are refusals, never on a surely live or explicit
//     key.
//
// # Tolerance
//
// The fake API sees a call some delay after the worker made it. Only the
// spread of that delay (the jitter) can bring two calls closer together,
// so the checkers at the API relax their bounds by exactly the measured
// jitter, and report it: DeliveryJitter computes it from the send times
// workers put in their calls (see its doc). A tolerance is never a guess.
//
// # Results
//
// Every checker returns a Result (Name, Valid, at most MaxViolations
// Violations, Details with "violations_total" and the measurements behind
// the verdict), and an error only for input it cannot judge (a malformed
// history, a spec out of range), wrapping ErrInvalid. Checkers never read
// a clock, never sleep and never panic on input.
package checker
