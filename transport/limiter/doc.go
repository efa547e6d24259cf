// Package limiter is the in-process face of package bucket: a
// concurrency-safe Limiter that drives one bucket.Pacer (any of the four
// algorithms) with the process's monotonic clock.
//
// Package bucket stays pure (time is an argument, no clock, no goroutines);
// this package is the only one of the two that reads a clock and sleeps.
//
//	l, _ := limiter.New(bucket.Spec{Algorithm: bucket.Strict, Rate: 10, MaxReserved: 5})
//	if err := l.Wait(ctx, 1); err != nil { ... }   // sleeps until the permit is usable
//	ok, err := l.TryAcquire(1, 50*time.Millisecond) // gives up if the wait would be longer
//
// Model. Calls are serialized by a mutex around one Pacer decision (plain
// locking is fast enough, as the pacer table of cmd/internal/bench/README.md measures). Each caller reads the clock once; a
// caller that waited for the lock decides at the freshest time any caller
// has seen (a "last-seen time"), so it never
// decides at a time older than one already used. Wait refuses up front,
// reserving nothing, when the wait would pass the context's deadline, and
// gives back the permits of a wait cancelled while sleeping when no later
// grant depends on them (the pacer's state before the grant is restored
// byte for byte).
package limiter
