package bucket

import "math"

// StrictPacer is the strict register: one permit
// slot every IntervalNanos, no memory of under-utilisation, a bounded number
// of slots reserved ahead of now, and permits that expire.
//
// # Model
//
// The whole state is one linearized register, nextFree: the earliest slot
// not yet given out (the last permit's slot plus one interval). A request
// for n permits at now gets the n consecutive slots
//
//	at, at+I, ..., at+(n-1)*I   with at = max(nextFree, now), I = IntervalNanos
//
// and moves nextFree to at+n*I. Permit j (0-based) of a grant may be used
// from its slot at+j*I until that slot plus ExpiryNanos; Decision.AtNanos is
// the first slot, Decision.ExpiresAtNanos = AtNanos + ExpiryNanos is the
// expiry of the first permit and Decision.SpacingNanos = I the spacing of
// the others. A caller must use permit j at its own slot: n permits used
// together would break the spacing the limit exists to enforce. Because at is never earlier than now, time
// nobody used is forgotten: an API that counts no past under-utilisation
// (the document's premise) never sees two slots closer than I.
//
// A grant is optimistic but bounded. Counting the slots already given out
// that lie after now (they are contiguous and end at nextFree) together with
// the new ones, the grant must leave at most MaxReserved slots after now:
//
//	ceil((at-now)/I) - 1 + n  <=  MaxReserved   (the new slots after now
//	                                              plus those before them)
//
// and it must not wait longer than the caller allows: at-now <= maxWait.
// With MaxReserved = 0 the register is pessimistic: only n = 1 at exactly
// now (nextFree <= now) is granted, everything else is refused with the time
// to come back (AtNanos = max(nextFree, now)). MaxPermits is MaxReserved+1.
//
// Expiry defaults to half an interval (DefaultExpiryNanos). Document 002
// introduces expiry for callers that oversleep: a permit used late is
// wasted rather than used next to the following one. The longer the
// expiry, the more lateness is tolerated but the closer two used permits
// may come (>= I-expiry apart): one full interval, the naive choice, would
// allow two uses at the same instant. Half an interval keeps used permits
// at least I/2 apart (never more than twice the rate at any instant) and
// tolerates lateness of up to half the spacing the limit exists to enforce.
//
// # Worked example
//
// One permit every 6 s, MaxReserved 0, default expiry 3 s:
//
//	t=2s   nextFree=0    granted at 2s, expires 5s;  nextFree=8s
//	t=8s   nextFree=8s   granted at 8s (6 s later);  nextFree=14s
//	t=13s  nextFree=14s  refused, come back at 14s (only 5 s after the last)
//	t=14s  nextFree=14s  granted at 14s;              nextFree=20s
//
// With MaxReserved 1 and maxWait >= 1 s the request at t=13s is instead
// granted at 14s: the caller waits one second.
//
// # Bound
//
// Slots are given out in increasing order, each at least I after the
// previous one, so any window of length W contains at most floor(W/I)+1
// permit slots (and a single grant spans at most MaxReserved+1 of them).
// A permit used up to ExpiryNanos after its slot shrinks the spacing of use
// times to >= I-ExpiryNanos and lets any window of length W see at most
// floor((W+ExpiryNanos)/I)+1 uses.
type StrictPacer struct {
	cfg      *Config
	lastNow  int64
	nextFree int64
}

var _ Scheduler = (*StrictPacer)(nil)

// Config returns the configuration the pacer runs with.
func (p *StrictPacer) Config() Config { return *p.cfg }

// clock returns now clamped to the largest now already seen, and nextFree.
func (p *StrictPacer) clock(now int64) (int64, int64) {
	return max(now, p.lastNow), p.nextFree
}

// Reserve grants n consecutive slots from max(nextFree, now) if the wait is
// at most maxWaitNanos and at most MaxReserved slots end up after now; it
// changes nothing when it refuses.
func (p *StrictPacer) Reserve(nowNanos, n, maxWaitNanos int64) (Decision, error) {
	if err := checkPermits(p.cfg, n); err != nil {
		return Decision{}, err
	}
	if err := checkMaxWait(maxWaitNanos); err != nil {
		return Decision{}, err
	}
	now, next := p.clock(nowNanos)
	at := max(next, now)
	wait := satSub(at, now)
	ahead := satAdd(ceilDiv(wait, p.cfg.IntervalNanos)-1, n)
	end := satAdd(at, satMul(n, p.cfg.IntervalNanos))
	// A grant whose slots would run past the end of the int64 timeline is
	// refused: a saturated nextFree would serve every later request at the
	// same instant.
	if wait > maxWaitNanos || ahead > p.cfg.Spec.MaxReserved || end == math.MaxInt64 {
		return Decision{AtNanos: at}, nil
	}
	p.lastNow = now
	p.nextFree = end
	return Decision{Granted: true, AtNanos: at, ExpiresAtNanos: satAdd(at, p.cfg.ExpiryNanos), SpacingNanos: p.cfg.IntervalNanos}, nil
}

// ReserveAt grants n consecutive slots from atNanos on, decided at now, if
// atNanos >= max(nextFree, now) (= Query(now, n)), the grant leaves at most
// MaxReserved slots after now (ceil((atNanos-now)/I) - 1 + n <=
// MaxReserved, counted from now, not from atNanos) and its end
// atNanos+n*I stays before the end of the int64 timeline. nextFree then
// becomes atNanos+n*I: the slots between the old nextFree and atNanos are
// skipped, as they would be by a request arriving at atNanos. Refused below
// Query(now, n), AtNanos is Query(now, n); refused for MaxReserved or the
// end of the timeline, AtNanos is atNanos. A refusal changes nothing.
func (p *StrictPacer) ReserveAt(nowNanos, n, atNanos int64) (Decision, error) {
	if err := checkPermits(p.cfg, n); err != nil {
		return Decision{}, err
	}
	now, next := p.clock(nowNanos)
	if natural := max(next, now); atNanos < natural {
		return Decision{AtNanos: natural}, nil
	}
	ahead := satAdd(ceilDiv(satSub(atNanos, now), p.cfg.IntervalNanos)-1, n)
	end := satAdd(atNanos, satMul(n, p.cfg.IntervalNanos))
	if ahead > p.cfg.Spec.MaxReserved || end == math.MaxInt64 {
		return Decision{AtNanos: atNanos}, nil
	}
	p.lastNow = now
	p.nextFree = end
	return Decision{Granted: true, AtNanos: atNanos, ExpiresAtNanos: satAdd(atNanos, p.cfg.ExpiryNanos), SpacingNanos: p.cfg.IntervalNanos}, nil
}

// Charge takes n >= 1 slots at now without a grant, whatever the wait and
// MaxReserved: nextFree becomes max(nextFree, now) + n*I, so the next grant
// comes n intervals later than it would have. It fails with ErrOverflow,
// changing nothing, if that passes the end of the int64 timeline.
func (p *StrictPacer) Charge(nowNanos, n int64) error {
	if err := checkChargePermits(p.cfg, n); err != nil {
		return err
	}
	now, next := p.clock(nowNanos)
	cost := satMul(n, p.cfg.IntervalNanos)
	end := satAdd(max(next, now), cost)
	if cost == math.MaxInt64 || end == math.MaxInt64 {
		return errChargeOverflow(p.cfg, now, n)
	}
	p.lastNow = now
	p.nextFree = end
	return nil
}

// Query returns max(nextFree, now): the first slot a request made now would
// get (granted then with maxWait 0 if n <= MaxReserved+1).
func (p *StrictPacer) Query(nowNanos, n int64) (int64, error) {
	if err := checkPermits(p.cfg, n); err != nil {
		return 0, err
	}
	now, next := p.clock(nowNanos)
	return max(next, now), nil
}

// Reconfigure switches to c at now. Slots already given out stay given out
// (nextFree is kept); the new interval, expiry and MaxReserved apply to the
// next grant, and the time still reserved ahead of now is counted in new
// intervals.
func (p *StrictPacer) Reconfigure(nowNanos int64, c Config) error {
	return reconfigure(p, nowNanos, c)
}

// reconfigure is Reconfigure of a checked config.
func (p *StrictPacer) reconfigure(nowNanos int64, c *Config) error {
	p.lastNow = max(nowNanos, p.lastNow)
	p.cfg = c
	return nil
}

// AppendState appends version, algorithm, flags, lastNow and nextFree
// (19 bytes).
func (p *StrictPacer) AppendState(b []byte) []byte {
	b = appendStateHeader(b, Strict)
	return appendInt64s(b, p.lastNow, p.nextFree)
}

// RestoreState replaces the state by the one encoded in b.
func (p *StrictPacer) RestoreState(b []byte) error {
	var f [2]int64
	if err := decodeState(b, Strict, f[:]); err != nil {
		return err
	}
	p.lastNow, p.nextFree = f[0], f[1]
	return nil
}
