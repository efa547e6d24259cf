// Package client is the Go client of permitd's HTTP API, and the throttle
// decorator built on it.
//
// # Model
//
// A permit is reserved on the cluster and used locally: the server answers
// "use the permit W after you receive this answer", so the client's clock
// never matters, only its rate. A Grant records when its answer was
// received (measured before the body is parsed) and Grant.Wait sleeps until
// then plus W. Expiry is counted, conservatively, from when the request was
// sent.
//
// Two ways to wait for a permit:
//
//   - optimistic (Acquire, Throttle in Block mode): reserve with max_wait =
//     the time left until the context's deadline, then sleep the granted
//     wait; if refused (the limit's bounded reservations are full, or it
//     may not reserve ahead at all: a strict limit without max_reserved),
//     sleep until the server's retry_after, plus a small jitter, and
//     reserve again until the context ends (at once when the retry_after
//     ends after its deadline);
//   - pessimistic (TryAcquire, Throttle in Fail mode): reserve with a small
//     max_wait and return ErrThrottled at once when refused.
//
// # Failover and idempotency
//
// A Client knows several servers. A request goes to the last server that
// answered; on a connection error, a timeout or a 503 it moves to the next
// (round-robin), backing off with jitter after each full round, for a
// bounded number of attempts. Every reserve carries a request id (16 random
// bytes, hex) that stays the same across these retries, so a reserve whose
// answer was lost (timeout, reset after sending, 503) is never granted
// twice: the register answers the retry with the first result.
//
// # Binary reserves
//
// WithBinaryReserves sends reserves over permitd's binary, pipelined
// protocol (package transport/wire) on the same port instead of HTTP: every
// goroutine's reserves share a few connections per server, so a burst of
// them shares system calls on both sides. Each reserve is still one
// decision with its own answer, request ID, failover and error meaning.
//
// Every error this package returns starts with "client: ". Sentinels:
// ErrThrottled (refused; see RefusedError for RetryAfter), ErrNotFound,
// ErrInvalid, ErrUnavailable, ErrExpired.
package client
