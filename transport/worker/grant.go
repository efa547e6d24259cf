package worker

// grant is one grant of the register as its holder spends it.
//
// Its permits may be spent only while it is open (no renew or return
// reporting on it has been sent) and before expiryNanos, its local expiry:
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
}

// left returns the permits neither spent nor given away.
func (g *grant) left() int64 { return g.permits - g.spent - g.stolenOut }

// spendable returns the permits that may be spent (or given away) at now:
// the left ones while the grant is open and unexpired, else 0.
func (g *grant) spendable(nowNanos int64) int64 {
	if g == nil || g.closed || nowNanos >= g.expiryNanos {
		return 0
	}
	return g.left()
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
