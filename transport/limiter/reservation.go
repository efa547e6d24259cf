package limiter

import (
	"math"
	"time"
)

// reservation.go: a Reservation is a decision already taken — when its
// permits may be used, until when, and how to give them back unused.

// Reservation is the outcome of Limiter.Reserve: permits granted from a
// moment on (OK), or a refusal. The zero Reservation is a refusal. It is a
// small value: copy it freely; all copies refer to the same reservation.
type Reservation struct {
	lim *Limiter
	// seq identifies the grant (Limiter.seq after it); 0 when refused.
	seq uint64
	ok  bool
	// nowNanos is the time the decision was taken at, on the Limiter's
	// timeline; atNanos the time the permits may be used from (refused: the
	// earliest time a new request could be granted, as known then).
	nowNanos, atNanos int64
	// expiresAtNanos is when unused permits are wasted; 0 means never.
	expiresAtNanos int64
}

// OK reports whether the permits were granted.
func (r Reservation) OK() bool { return r.ok }

// Delay returns how long, from now, the holder must still wait before using
// the granted permits; 0 once that time has come. For a refused reservation
// it returns the time until the same request could have been granted as
// known at the refusal (another caller may take that slot first); the zero
// Reservation returns math.MaxInt64 (forever).
func (r Reservation) Delay() time.Duration {
	if r.lim == nil {
		return math.MaxInt64
	}
	d := r.atNanos - r.lim.clk.nowNanos()
	if d < 0 {
		return 0
	}
	return time.Duration(d)
}

// Expires returns how long from now granted permits remain usable, and
// whether they expire at all (only Strict permits do). A negative duration
// means they have expired and must not be used. For a refused reservation
// it returns (0, false).
func (r Reservation) Expires() (time.Duration, bool) {
	if !r.ok || r.expiresAtNanos == 0 {
		return 0, false
	}
	return time.Duration(r.expiresAtNanos - r.lim.clk.nowNanos()), true
}

// Cancel tells the Limiter that the granted permits will not be used, and
// reports whether they were given back.
//
// The rule: the permits are given back exactly — the Pacer state becomes
// what it would be had the request never been made — if and only if no
// other permits were granted by the Limiter since this reservation and
// SetRate was not called since. Otherwise nothing changes and the permits
// stay consumed: that wastes throughput but never lets the limit be
// exceeded. The exact undo works for every algorithm alike because it
// restores the Pacer's own encoded state (AppendState/RestoreState), and a
// Pacer's state is a pure function of the decisions it made; it does not
// depend on whether the permits' time has come (unlike x/time/rate's
// CancelAt, which refunds only before it): a cancelled holder has, by
// calling Cancel, promised not to use them.
//
// Cancel is safe to call concurrently and more than once; only the first
// call can give permits back. Cancelling a refused reservation does nothing.
func (r Reservation) Cancel() bool {
	if !r.ok {
		return false
	}
	return r.lim.cancel(r.seq)
}

// cancel restores the state from before grant seq if it is still the last
// grant and its snapshot is still held.
func (l *Limiter) cancel(seq uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq != l.seq || seq != l.undoSeq {
		return false
	}
	l.undoSeq = 0
	// The snapshot came from this Pacer under this Config, so RestoreState
	// cannot fail unless the Pacer is broken; then the permits stay
	// consumed, which is the safe side.
	return l.pacer.RestoreState(l.undo) == nil
}
