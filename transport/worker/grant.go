package worker

// grant is one grant of the register as its holder spends it.
//
// Its permits may be spent only while it is open (no renew or return
// reporting on it has been sent) and before expiryNanos, its local expiry
// (once closed by a renewal, only the permits the renewal keeps, by the
// worker's own callers, until the renewal's answer; see kept):
// the time the request that obtained it was sent, plus the answer's
// ExpiresInNanos (at most the TTL), minus the margin, all on the worker's
// clock. Because the clock starts before the register decides, the local
// expiry comes no later than the register's (given the clock's rate error
// is below margin/TTL).
type grant struct {
	leaseID, epoch uint64
	// permits is the grant's size; spent and stolenOut what became of it
	// (spent + stolenOut <= permits, always).
	permits, spent, stolenOut int64
	// sentAtNanos is when the request that obtained the grant was sent;
	// expiryNanos its local expiry.
	sentAtNanos, expiryNanos int64
	// closed is set when a renew or return reporting on the grant is
	// sent; only a request known not to have been delivered reopens it.
	closed bool
	// kept is how many of its unspent permits the renewal that closed it
	// keeps (the in-flight allowance, Renew.KeptPermits): the worker's
	// callers may still spend them, never give them away, until the
	// renewal's answer makes them part of the next grant, and at most
	// until expiryNanos. keptSpent counts those spent since the renewal
	// was sent (not in spent, which the renewal reported).
	kept, keptSpent int64
}

// left returns the permits neither spent nor given away.
func (g *grant) left() int64 { return g.permits - g.spent - g.stolenOut - g.keptSpent }

// spendable returns the permits the worker's callers may spend at now:
// the left ones while the grant is open, what is left of the kept ones
// once a renewal closed it, and 0 from its local expiry on.
func (g *grant) spendable(nowNanos int64) int64 {
	switch {
	case g == nil || nowNanos >= g.expiryNanos:
		return 0
	case g.closed:
		return g.kept - g.keptSpent
	}
	return g.left()
}

// giveable returns the permits that may be given to peers at now: the
// left ones while the grant is open and unexpired (a donor gives nothing
// of a grant after reporting on it, kept permits included), else 0.
func (g *grant) giveable(nowNanos int64) int64 {
	if g == nil || g.closed || nowNanos >= g.expiryNanos {
		return 0
	}
	return g.left()
}

// debit spends n spendable permits (n <= spendable).
func (g *grant) debit(n int64) {
	if g.closed {
		g.keptSpent += n
		return
	}
	g.spent += n
}

// keepFor returns what a renewal sent at now keeps of g: what its
// callers could spend at share milli-permits per second until its local
// expiry (the longest the renewal may take before nothing of g is
// usable), at most what is left. A worker whose callers went quiet has a
// low share and keeps little: the rest is credited back.
func (g *grant) keepFor(nowNanos, shareMilli int64) int64 {
	if nowNanos >= g.expiryNanos {
		return 0
	}
	return max(0, min(g.left(), permitsOver(shareMilli, g.expiryNanos-nowNanos)))
}

// localExpiry returns the local expiry of a grant whose request was sent at
// sentAt and whose answer says it expires expiresIn after the register's
// decision (-1: already expired): sentAt + min(expiresIn, ttl) - margin.
func localExpiry(sentAtNanos, expiresInNanos, ttlNanos, marginNanos int64) int64 {
	if expiresInNanos < 0 {
		return sentAtNanos
	}
	return sentAtNanos + min(expiresInNanos, ttlNanos) - marginNanos
}
