package bucket

// BurstyPacer is Guava's SmoothBursty: idle time is stored, up to
// MaxBurstSeconds of it, and stored permits are served without waiting.
//
// # Model
//
// The pacer remembers nextFree, the time the next request will be served,
// and storedNanos, the idle time it remembers (stored permits times the
// interval I; see smooth.go for the fixed point). When a request arrives
// after nextFree, the idle time now-nextFree is added to the store (capped
// at MaxStoredNanos = round(MaxBurstSeconds*1e9)) and nextFree moves to now.
// A request for n permits is then served at nextFree: it takes what it can
// from the store for free and pays I for every other permit, by pushing
// nextFree forward. The request itself never waits for its own permits; the
// next request pays. A fresh pacer starts with an empty store.
//
// A request with maxWait is granted iff nextFree - maxWait <= now, whatever
// its size (Guava's canAcquire): a large request is granted at once and the
// caller after it waits.
//
// # Worked example
//
// One permit per second, unused for 10 s (MaxBurstSeconds >= 10): the store
// holds 10 permits. acquire(3) is served now from the store (7 left);
// acquire(10) right after is also served now: 7 from the store, 3 fresh, so
// nextFree moves 3 s ahead and the following request waits 3 s. At 5
// permits per second fresh permits are 200 ms apart and acquire(15) from an
// empty store pushes nextFree 3 s ahead. An acquire(100) at one per second
// on an idle pacer is granted at once, and the next request waits 100 s.
//
// With an infinite rate (I = 0) every request is granted at once.
//
// # Bound
//
// Let P = nextFree - storedNanos. A grant of n permits raises P by exactly
// n*I (fresh time added to nextFree plus stored time taken), and accruing
// idle time never lowers it; at a grant served at time a, a - MaxStoredNanos
// <= P <= a. Hence for grants served at a_1 <= ... <= a_L inside a window
// of length W, the permits of all but the last sum to at most
// (W + MaxStoredNanos)/I:
//
//	permits served in any window of length W
//	    <= floor((W + MaxStoredNanos)/I) + n_last
//
// where n_last is the size of the last grant in the window (1 for callers
// that take one permit at a time, at most MaxPermits() in general).
type BurstyPacer struct{ smooth }

var _ Scheduler = (*BurstyPacer)(nil)

var _ Refunder = (*BurstyPacer)(nil)

// GrantSlackNanos returns MaxStoredNanos minus the stored time as of
// atNanos: with P = nextFree - storedNanos, a grant served at a keeps
// a - MaxStoredNanos <= P (the bound's lower invariant) with exactly this
// much to spare. It changes nothing.
func (p *BurstyPacer) GrantSlackNanos(nowNanos, atNanos int64) int64 {
	_, _, stored := p.synced(max(nowNanos, atNanos))
	return p.cfg.MaxStoredNanos - stored
}

// Refund takes back r = min(n, floor(maxNanos/I)) permits at now by
// lowering P by r*I: nextFree comes back towards max(now, notBeforeNanos)
// first, and what is left goes to the store, up to MaxStoredNanos (time
// beyond that is lost, which only keeps P higher). It returns r.
func (p *BurstyPacer) Refund(nowNanos, n, maxNanos, notBeforeNanos int64) int64 {
	i := p.cfg.IntervalNanos
	if n <= 0 || i <= 0 || maxNanos < i {
		return 0
	}
	r := min(n, maxNanos/i)
	give := r * i // <= maxNanos: no overflow
	now := max(nowNanos, p.lastNow)
	if floor := max(now, notBeforeNanos); p.nextFree > floor {
		back := min(give, p.nextFree-floor)
		p.nextFree -= back
		give -= back
	}
	p.storedNanos = min(p.cfg.MaxStoredNanos, satAdd(p.storedNanos, give))
	p.lastNow = now
	return r
}
