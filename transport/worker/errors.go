package worker

import "errors"

// Errors returned by the worker. Every error it returns wraps one of these
// (or a context error) and says what was wrong and what is allowed.
var (
	// ErrInvalidConfig is returned by New for a Config it cannot run with.
	ErrInvalidConfig = errors.New("worker: invalid config")
	// ErrInvalidPermits is returned by Acquire and TryAcquire for n < 1.
	ErrInvalidPermits = errors.New("worker: invalid permit count")
	// ErrNoPermits is returned (failing closed) when the worker holds no
	// permit it may spend and cannot expect one: the register refuses it a
	// lease (unknown limit, limit not leased, ...) or cannot be reached
	// (then the error also wraps ErrRegisterUnreachable).
	ErrNoPermits = errors.New("worker: no permits")
	// ErrRegisterUnreachable is wrapped, together with ErrNoPermits, by the
	// error of a worker whose calls the register has left unanswered for
	// Config.UnreachableAfter, once its grant is spent or expired and
	// stealing no longer helps (a shorter silence, such as an election,
	// is waited out); the message says how long the register has been
	// silent and how long ago the last good renewal was.
	ErrRegisterUnreachable = errors.New("worker: register unreachable")
	// ErrNotStarted is returned by Acquire, TryAcquire and Stop before
	// Start.
	ErrNotStarted = errors.New("worker: not started")
	// ErrStopped is returned by Acquire and TryAcquire once Stop was
	// called, and by Start after Stop.
	ErrStopped = errors.New("worker: stopped")
)
