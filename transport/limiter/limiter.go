package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/permitd/permitd/bucket"
)

// Errors returned by Limiter in addition to the ones of the Pacer it wraps.
var (
	// ErrWaitExceedsDeadline is returned (together with
	// context.DeadlineExceeded) by Limiter.Wait when the wait the permits
	// need ends after the context's deadline. Nothing was reserved.
	ErrWaitExceedsDeadline = errors.New("limiter: wait would exceed the context deadline")
	// ErrPermitExpired is returned when a granted permit expired (see
	// Decision.ExpiresAtNanos) before the sleep until it ended, on every one
	// of maxExpiredRetries+1 attempts. It means the Expiry of the limit is
	// shorter than the scheduling jitter of the process.
	ErrPermitExpired = errors.New("limiter: granted permit expired before the sleep ended")
)

// maxExpiredRetries is how many times Wait and TryAcquire reserve again after
// oversleeping the expiry of a granted permit before giving up with
// ErrPermitExpired. It bounds the loop when the sleep jitter always exceeds
// the expiry window.
const maxExpiredRetries = 3

// unboundedNanos is the deadline of a request that is willing to wait any
// time. The wait passed to the Pacer is unboundedNanos-now, which cannot
// overflow when the Pacer adds now back.
const unboundedNanos = math.MaxInt64

// Limiter is a concurrency-safe, in-process rate limiter: one Pacer driven by
// the process's monotonic clock. It is the local pacing used by workers for
// leased shares; it is not replicated, and it is the only type of this
// package that reads a clock (see clock.go); the Pacers stay pure.
//
// Time model: the Limiter's timeline is nanoseconds since New, read
// from the monotonic clock (never the wall clock), so a wall-clock step
// changes nothing. Each operation reads the clock once, before taking the
// lock, and then uses max(that reading, the largest time any operation has
// handed to the Pacer) — a "last-seen nanotime":
// a goroutine that waited for the lock uses the freshest time anyone has seen
// instead of its own older reading, so it does not over-wait, and the Pacer
// always sees a non-decreasing now.
//
// What the Limiter deliberately does not do is skip the clock read (document
// 001's fast path, deciding at the last-seen time alone while it is
// "enough"). For these Pacers that fast path only ever applies when the
// limit has spare capacity, i.e. after idle time, and then it back-dates the
// grant to the stale time: with Strict, a permit granted at a last-seen time
// L but used at real time T > L leaves the next permit free at L+interval,
// which can be right after T, breaking the stated spacing by up to T-L (the
// whole idle period). One monotonic clock read per operation (time.Since:
// 20-70 ns depending on the machine's vDSO clock; 65 ns on the 2-core VM of
// the performance manual's benchmarks, the largest part of an uncontended
// TryAcquire) is the price of keeping every stated bound on the real
// timeline. The bound holds for the times the Limiter gives permits out; a
// goroutine descheduled between its clock read and the decision, or after
// the return, uses its permit later, as with any in-process limiter.
//
// Concurrency: a sync.Mutex serializes the Pacer (plain locking is fast
// enough: see the pacer table of cmd/internal/bench/README.md); the critical section is one Pacer decision,
// plus a state snapshot for cancellable reservations. Sleeping happens
// outside the lock.
//
// A Limiter must not be copied after first use.
type Limiter struct {
	// clk is read before taking mu, so it is kept off the cache line that
	// mu and the fields it guards bounce between CPUs on.
	clk clock
	_   [cacheLine]byte

	mu sync.Mutex
	// pacer is the algorithm and state; guarded by mu.
	pacer bucket.Pacer
	// spec is the Spec as the user gave it (defaults not filled in), which
	// SetRate recompiles so that rate-dependent defaults follow the rate.
	spec bucket.Spec
	// lastNanos is the largest now handed to pacer (the last-seen time).
	lastNanos int64
	// seq counts granted reservations; the last one granted has seq == seq.
	seq uint64
	// undoSeq is the seq of the reservation whose pre-reservation state is
	// in undo, or 0 when undo holds nothing usable.
	undoSeq uint64
	// undo holds the encoded Pacer state from just before reservation
	// undoSeq; spare is the buffer the next snapshot is written into. They
	// are swapped on a cancellable grant, so a refused request never
	// destroys the undo of the reservation before it.
	undo, spare []byte
}

// cacheLine is the padding that keeps fields read without the lock away
// from the contended ones (64-byte lines on amd64 and arm64).
const cacheLine = 64

// snapshotBytes is the initial capacity of the undo buffers. States longer
// than this grow the buffer once; it is reused afterwards.
const snapshotBytes = 64

// New compiles s and returns a Limiter for it, starting now with the
// Pacer's initial state. Errors are those of Compile and New.
func New(s bucket.Spec) (*Limiter, error) {
	c, err := bucket.Compile(s)
	if err != nil {
		return nil, err
	}
	return newLimiterClock(c, s, newMonoClock())
}

// NewFromConfig returns a Limiter for an already compiled Config (for
// example one decoded with DecodeConfig). Errors are those of New. Its
// SetRate keeps the options of c.Spec as they are, defaults included (with
// New, defaults that depend on the rate, like Strict's expiry, follow
// the new rate).
func NewFromConfig(c bucket.Config) (*Limiter, error) {
	return newLimiterClock(c, c.Spec, newMonoClock())
}

// newLimiterClock returns a Limiter for c, compiled from s, on the clock
// chosen by the caller (tests).
func newLimiterClock(c bucket.Config, s bucket.Spec, clk clock) (*Limiter, error) {
	// The pacer's timeline starts now, as Guava's limiter starts at its
	// construction.
	p, err := bucket.New(c, clk.nowNanos())
	if err != nil {
		return nil, err
	}
	return &Limiter{
		clk:   clk,
		pacer: p,
		spec:  s,
		undo:  make([]byte, 0, snapshotBytes),
		spare: make([]byte, 0, snapshotBytes),
	}, nil
}

// Config returns the configuration the Limiter currently runs with.
func (l *Limiter) Config() bucket.Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pacer.Config()
}

// SetRate changes the rate (permits per Spec.Per) from now on, keeping the
// other options of the Spec given to New. The new Spec is compiled again (so an invalid
// rate is reported exactly as Compile reports it, and nothing changes), and
// the Pacer is reconfigured with what its algorithm carries over (see
// Pacer.Reconfigure). Reservations made before SetRate can no longer be
// cancelled.
func (l *Limiter) SetRate(rate float64) error {
	now := l.clk.nowNanos()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.spec
	s.Rate = rate
	c, err := bucket.Compile(s)
	if err != nil {
		return err
	}
	now = l.observe(now)
	if err := l.pacer.Reconfigure(now, c); err != nil {
		return err
	}
	l.spec = s
	l.undoSeq = 0
	return nil
}

// observe folds a clock reading into the last-seen time and returns the
// time to decide at: the larger of the two. Callers hold mu.
func (l *Limiter) observe(now int64) int64 {
	if now < l.lastNanos {
		return l.lastNanos
	}
	l.lastNanos = now
	return now
}

// reserve decides n permits for a request read at now that accepts waiting
// until deadlineNanos (unboundedNanos: any wait). With cancellable, the
// Pacer state from before a grant is kept so that Cancel can undo it.
func (l *Limiter) reserve(now, n, deadlineNanos int64, cancellable bool) (Reservation, error) {
	l.mu.Lock()
	now = l.observe(now)
	maxWait := deadlineNanos - now
	if maxWait < 0 {
		maxWait = 0
	}
	if cancellable {
		l.spare = l.pacer.AppendState(l.spare[:0])
	}
	d, err := l.pacer.Reserve(now, n, maxWait)
	if err != nil || !d.Granted {
		l.mu.Unlock()
		return Reservation{lim: l, nowNanos: now, atNanos: d.AtNanos}, err
	}
	l.seq++
	seq := l.seq
	if cancellable {
		l.undo, l.spare = l.spare, l.undo
		l.undoSeq = seq
	}
	l.mu.Unlock()
	return Reservation{
		lim:            l,
		seq:            seq,
		ok:             true,
		nowNanos:       now,
		atNanos:        d.AtNanos,
		expiresAtNanos: d.ExpiresAtNanos,
	}, nil
}

// Reserve reserves n permits, however long the wait for them, and returns
// at once; the holder must wait Delay() before using them, or Cancel them.
// The Pacer may still refuse (OK false), for example Strict when more than
// MaxReserved permits are already reserved ahead. Invalid n (n < 1, or more
// than the limit can ever grant) is returned as the Pacer's error.
func (l *Limiter) Reserve(n int64) (Reservation, error) {
	return l.reserve(l.clk.nowNanos(), n, unboundedNanos, true)
}

// TryAcquire acquires n permits if they can be granted within timeout, with
// Guava's tryAcquire semantics: it decides at once, without reserving
// anything when the wait would exceed timeout (returning false), and
// otherwise reserves the permits and sleeps the wait (not interruptible)
// before returning true. A negative timeout is treated as zero: acquire
// only if no wait is needed. Invalid n is returned as the Pacer's error.
//
// If a granted permit expires (Strict) before the sleep ends, TryAcquire
// reserves again within what is left of timeout, up to maxExpiredRetries
// times, then fails with ErrPermitExpired.
func (l *Limiter) TryAcquire(n int64, timeout time.Duration) (bool, error) {
	if timeout < 0 {
		timeout = 0
	}
	now := l.clk.nowNanos()
	deadline := int64(unboundedNanos)
	if int64(timeout) <= unboundedNanos-now {
		deadline = now + int64(timeout)
	}
	for attempt := 0; ; attempt++ {
		r, err := l.reserve(now, n, deadline, false)
		if err != nil {
			return false, err
		}
		if !r.ok {
			return false, nil
		}
		if r.atNanos <= r.nowNanos {
			return true, nil // usable now, so not expired
		}
		l.clk.sleep(nil, time.Duration(r.atNanos-r.nowNanos))
		if r.expiresAtNanos == 0 {
			return true, nil
		}
		now = l.clk.nowNanos()
		if now <= r.expiresAtNanos {
			return true, nil
		}
		if attempt == maxExpiredRetries {
			return false, expiredError(n, r, now)
		}
	}
}

// Wait blocks until n permits are granted and their time has come, or ctx
// is done.
//
// The decision is taken up front, like x/time/rate: if ctx has a deadline
// and the permits cannot be used before it, Wait returns at once an error
// wrapping ErrWaitExceedsDeadline and context.DeadlineExceeded, and reserves
// nothing. Otherwise it reserves the permits and sleeps; if ctx is done
// during the sleep, it cancels the reservation (see Reservation.Cancel for
// when the permits are given back) and returns an error wrapping ctx.Err().
//
// When the Pacer refuses although the wait fits (Strict with no room for
// more reservations ahead), Wait sleeps until the time the Pacer named and
// tries again, within the deadline. If a granted permit expires (Strict)
// before the sleep ends, it reserves again, up to maxExpiredRetries times,
// then fails with ErrPermitExpired. Invalid n is returned as the Pacer's
// error.
func (l *Limiter) Wait(ctx context.Context, n int64) error {
	done := ctx.Done() // nil for context.Background: nothing to cancel
	deadlineTime, hasDeadline := ctx.Deadline()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bucket: wait for %d permits: %w", n, err)
	}
	// The loop does not look at ctx.Err again: a sleep that returned true
	// ended before ctx was done (or exactly at its deadline, which counts
	// as met), and the deadline itself bounds every later decision.
	expired := 0
	for {
		now := l.clk.nowNanos()
		deadline := int64(unboundedNanos)
		if hasDeadline {
			deadline = l.clk.nanosAt(deadlineTime)
		}
		r, err := l.reserve(now, n, deadline, done != nil)
		if err != nil {
			return err
		}
		if !r.ok {
			if r.atNanos > deadline {
				return fmt.Errorf("bucket: wait for %d permits needs %v but the context deadline is in %v: %w (%w)",
					n, time.Duration(r.atNanos-r.nowNanos), time.Duration(deadline-r.nowNanos),
					ErrWaitExceedsDeadline, context.DeadlineExceeded)
			}
			if r.atNanos <= r.nowNanos {
				return fmt.Errorf("bucket: %v pacer refused %d permits at %d ns yet named %d ns, not later, as the earliest time they could be granted: %w",
					l.Config().Spec.Algorithm, n, r.nowNanos, r.atNanos, bucket.ErrCorruptState)
			}
			// Not reserved: sleep until the named time and ask again.
			if !l.clk.sleep(done, time.Duration(r.atNanos-r.nowNanos)) {
				return fmt.Errorf("bucket: wait for %d permits: %w", n, ctx.Err())
			}
			continue
		}
		if r.atNanos <= r.nowNanos {
			return nil
		}
		if !l.clk.sleep(done, time.Duration(r.atNanos-r.nowNanos)) {
			r.Cancel()
			return fmt.Errorf("bucket: wait for %d permits: %w", n, ctx.Err())
		}
		if r.expiresAtNanos == 0 {
			return nil
		}
		if now = l.clk.nowNanos(); now <= r.expiresAtNanos {
			return nil
		}
		if expired == maxExpiredRetries {
			return expiredError(n, r, now)
		}
		expired++
	}
}

// expiredError describes a permit that expired while its holder slept.
func expiredError(n int64, r Reservation, now int64) error {
	return fmt.Errorf("bucket: %d permits granted for %d ns expired at %d ns but the sleep ended at %d ns, %d times in a row (the expiry window is shorter than the sleep jitter; use a longer Expiry): %w",
		n, r.atNanos, r.expiresAtNanos, now, maxExpiredRetries+1, ErrPermitExpired)
}
