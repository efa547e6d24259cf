package bucket

import (
	"fmt"
	"math"
)

// HybridPacer is the EngineBlock hybrid limiter: tokens are nanoseconds of time, held in an active, a burst and a
// waiting pool.
//
// # Model
//
// Every permit costs one op, I = IntervalNanos tokens. Time is the only
// source of tokens: a fill adds the nanoseconds elapsed since the pools'
// clock, fillNanos. Fills happen lazily, at every call that changes the
// state (a grant, a Reconfigure), so no filler thread is needed; a refused
// Reserve and a Query compute on a copy and change nothing.
//
// Pool sizes (Config.ActiveNanos, Config.BurstNanos), from the EngineBlock
// boundary rules:
//
//	active A = max(I, 1 ms)          at least one op, at least 1/1000 s
//	burst  B = round(A*(r-1))        r = BurstRatio, default 1.1
//	waiting: unbounded               unclaimed time: how far behind we are
//
// At 1 op/s the active pool is one op, 1e9 ns, and the burst pool 1e8 ns:
// the 1.1e9 ns combined pool. (EngineBlock's own example quotes that
// pool for 1000 ops/s as a pool of many ops; the sizing rule it states,
// which this package follows, gives 1000 ops/s an
// active pool of 1 ms, one op.) At 1e6 ops/s the active pool holds 1000
// ops: callers are served in bulk between fills.
//
// A fill of e nanoseconds:
//
//  1. adds tokens to the active pool until it is full;
//  2. adds what is left over to the waiting pool;
//  3. moves min(waiting, B-burst, floor(B*e/A)) tokens from the waiting to
//     the burst pool. Scaling by e/A normalises for jitter: one fill of a
//     whole active pool of time may refill the whole burst pool, and so may
//     ten fills of a tenth each; a caller behind schedule thus gets up to
//     r*e tokens per e nanoseconds;
//  4. with burst compensation (Strictness 1/2^k), forfeits waiting>>k of
//     the waiting pool: every fill closes 1/2^k of the open gap.
//
// Tokens are never created or destroyed otherwise:
// active+burst+waiting+forfeited+consumed always equals the time filled
// (fillNanos minus the first time seen) plus the initial full active pool.
// A fresh pacer starts with a full active pool and empty burst and waiting
// pools.
//
// A request for n permits needs n*I tokens, drawn from the active pool
// first, then from the burst pool. The pools are first filled up to
// max(now, fillNanos). If they then hold n*I tokens the request is served
// at that time; otherwise it must wait for the smallest d such that one
// fill of d nanoseconds brings them to n*I tokens (found by bisection; at
// most the deficit, and less when the burst pool refills too). The request
// is served at at = max(now, fillNanos)+d and granted iff at-now <= maxWait:
// it then draws its tokens at at, and fillNanos moves to at. That is how a
// request goes into debt: the pools' clock runs ahead of now, and later
// requests queue behind it, so grants are served in order. Refused, the
// request gets AtNanos = at. A request never needs more than the pools can
// hold: MaxPermits = floor((A+B)/I).
//
// Strictness selects what happens to unclaimed time:
//
//	0 (default)  average rate: the whole gap is kept and caught up at
//	             BurstRatio times the rate, however long that takes;
//	1            strict: no burst pool (B = 0), unclaimed time is never
//	             caught up; BurstRatio must be 0 or 1;
//	s > 1        burst allowance: the same as BurstRatio = s;
//	1/2^k        burst compensation: as 0, but every fill forfeits 1/2^k
//	             of the waiting pool, so an idle period gives a
//	             proportional, geometrically fading catch-up.
//
// Unbounded catch-up speed (a strictness of 0.0 taken literally: throttle
// only once the long-run average is reached) is not offered: the speed of
// catch-up is always bounded by the burst ratio, and the bound below holds
// in every mode.
//
// # Worked example
//
// One op per second, burst ratio 1.1: A = 1e9, B = 1e8. A fresh pacer
// serves one op at once and the next one 1 s later. Left idle for 10 s, the
// active pool refills (1 s), the burst pool refills (0.1 s) and 8.9 s go to
// the waiting pool: the caller may take 1.1 s of tokens at once, and while
// behind it gets 1.1 s of tokens per second, i.e. 1.1 ops/s (an op every
// 909090909 or 909090910 ns), until the 8.9 s of unclaimed time are used up.
//
// # Bound
//
// Grants are served at non-decreasing times, each drawing its tokens from
// the pools at its own time. Over a window [t, t+W], the pools hold at most
// A+B tokens at the first grant served in it, and the fills between the
// first and the last grant served in it add at most W tokens to the active
// pool and at most floor(B*W/A) to the burst pool (a sum of floors is at
// most the floor of the sum). Hence, for a fixed config:
//
//	tokens of the grants served in any window of length W
//	    <= A + B + W + floor(B*W/A)
//	permits <= floor((A + B + W + floor(B*W/A)) / I)
//
// With B = 0 (strict) and rates of at most 1000/s (A = I) this is
// floor(W/I)+1, the strict register's bound.
type HybridPacer struct {
	cfg *Config
	// lastNow is the largest now seen by a state change.
	lastNow int64
	// fillNanos is the pools' clock, the time of the last fill; ahead of
	// lastNow while grants are queued (in debt).
	fillNanos int64
	pools     Pools
}

var _ Scheduler = (*HybridPacer)(nil)

// Pools are the token pools of a HybridPacer, in nanoseconds.
type Pools struct {
	// ActiveNanos is the active pool, 0 <= ActiveNanos <= Config.ActiveNanos.
	ActiveNanos int64
	// BurstNanos is the burst pool, 0 <= BurstNanos <= Config.BurstNanos.
	BurstNanos int64
	// WaitingNanos is the waiting pool: unclaimed time, >= 0.
	WaitingNanos int64
	// ForfeitedNanos counts the tokens burst compensation took out of the
	// waiting pool (saturating).
	ForfeitedNanos int64
}

// Config returns the configuration the pacer runs with.
func (p *HybridPacer) Config() Config { return *p.cfg }

// Pools returns the pools as of FillNanos.
func (p *HybridPacer) Pools() Pools { return p.pools }

// WaitingNanos returns the waiting pool as of FillNanos: the time unclaimed
// by callers, a measure of how far behind schedule they are.
func (p *HybridPacer) WaitingNanos() int64 { return p.pools.WaitingNanos }

// FillNanos returns the pools' clock: the time of the last fill, ahead of
// now while grants are queued; the origin for a fresh pacer.
func (p *HybridPacer) FillNanos() int64 { return p.fillNanos }

// filled returns the clamped now and the pools filled up to
// max(now, fillNanos), with that time, without changing p.
func (p *HybridPacer) filled(nowNanos int64) (now, at int64, q Pools) {
	now = max(nowNanos, p.lastNow)
	at = max(now, p.fillNanos)
	return now, at, fill(p.cfg, p.pools, satSub(at, p.fillNanos))
}

// fill adds e >= 0 nanoseconds of tokens to the pools (steps 1 to 4 of the
// model).
func fill(c *Config, q Pools, e int64) Pools {
	if e <= 0 {
		return q
	}
	q.ActiveNanos, q.WaitingNanos, q.BurstNanos = fillGain(c, q, e)
	if k := c.CompensationShift; k > 0 && q.WaitingNanos > 0 {
		closed := q.WaitingNanos >> k
		q.WaitingNanos -= closed
		q.ForfeitedNanos = satAdd(q.ForfeitedNanos, closed)
	}
	return q
}

// fillGain returns the active, waiting and burst pools after steps 1 to 3
// of a fill of e >= 0 nanoseconds. Each is non-decreasing in e, and so is
// active+burst.
func fillGain(c *Config, q Pools, e int64) (active, waiting, burst int64) {
	add := min(e, c.ActiveNanos-q.ActiveNanos)
	active = q.ActiveNanos + add
	waiting = satAdd(q.WaitingNanos, e-add)
	burst = q.BurstNanos
	if waiting > 0 && c.BurstNanos > burst {
		share, ok := mulDiv(c.BurstNanos, e, c.ActiveNanos)
		if !ok {
			share = c.BurstNanos
		}
		move := min(waiting, c.BurstNanos-burst, share)
		burst += move
		waiting -= move
	}
	return active, waiting, burst
}

// waitFor returns the smallest d >= 0 such that a fill of d nanoseconds
// brings active+burst to need, and false if no d fits in int64.
func waitFor(c *Config, q Pools, need int64) (int64, bool) {
	has := func(d int64) bool {
		a, _, b := fillGain(c, q, d)
		return a+b >= need
	}
	deficit := need - (q.ActiveNanos + q.BurstNanos)
	if deficit <= 0 {
		return 0, true
	}
	// A fill of deficit+A always suffices: the active pool is then full and
	// either the burst pool too or the overflow covers the deficit.
	hi := satAdd(deficit, c.ActiveNanos)
	if !has(hi) {
		return 0, false
	}
	lo := int64(0) // has(lo) is false, has(hi) is true
	if has(deficit) {
		hi = deficit
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if has(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}

// Reserve serves n permits at max(now, FillNanos) plus the time the pools
// need to hold n*I tokens, if that is at most maxWaitNanos after now; it
// changes nothing when it refuses.
func (p *HybridPacer) Reserve(nowNanos, n, maxWaitNanos int64) (Decision, error) {
	if err := checkPermits(p.cfg, n); err != nil {
		return Decision{}, err
	}
	if err := checkMaxWait(maxWaitNanos); err != nil {
		return Decision{}, err
	}
	now, at, q := p.filled(nowNanos)
	need := n * p.cfg.IntervalNanos // <= A+B: n <= MaxPermits
	d, ok := waitFor(p.cfg, q, need)
	if !ok {
		return Decision{AtNanos: math.MaxInt64}, nil
	}
	at = satAdd(at, d)
	if satSub(at, now) > maxWaitNanos || at == math.MaxInt64 {
		return Decision{AtNanos: at}, nil
	}
	q = fill(p.cfg, q, d)
	q.draw(need) // the wait filled the pools with need tokens
	p.lastNow, p.fillNanos, p.pools = now, at, q
	return Decision{Granted: true, AtNanos: at}, nil
}

// ReserveAt grants n permits served at atNanos, decided at now, if atNanos
// is at or after Query(now, n) (and before the end of the int64
// timeline); otherwise it refuses with AtNanos = Query(now, n) (atNanos at
// the end of the timeline) and changes nothing. A grant fills the pools in
// one fill from FillNanos to atNanos, draws n*I tokens from the active
// pool, then the burst pool, and moves FillNanos to atNanos: the state a
// Reserve(atNanos, n, 0) would leave, except that the clock stays at now.
//
// One fill to atNanos holds at least the tokens of the fill to
// max(now, FillNanos) followed by the wait Query found: the active pool
// gets the same time, and the burst pool at least as much (its share
// floor(B*e/A) is superadditive in e, and the waiting pool it is moved
// from loses nothing to compensation between the two steps).
func (p *HybridPacer) ReserveAt(nowNanos, n, atNanos int64) (Decision, error) {
	if err := checkPermits(p.cfg, n); err != nil {
		return Decision{}, err
	}
	now, at, q := p.filled(nowNanos)
	need := n * p.cfg.IntervalNanos // <= A+B: n <= MaxPermits
	d, ok := waitFor(p.cfg, q, need)
	if !ok {
		return Decision{AtNanos: math.MaxInt64}, nil
	}
	if natural := satAdd(at, d); atNanos < natural {
		return Decision{AtNanos: natural}, nil
	}
	if atNanos == math.MaxInt64 {
		return Decision{AtNanos: atNanos}, nil
	}
	// atNanos >= max(now, fillNanos): fill from the stored pools, as a
	// request arriving at atNanos would.
	q = fill(p.cfg, p.pools, atNanos-p.fillNanos)
	if !q.draw(need) {
		// Unreachable (see above); refusing keeps the pools non-negative.
		return Decision{AtNanos: atNanos}, nil
	}
	p.lastNow, p.fillNanos, p.pools = now, atNanos, q
	return Decision{Granted: true, AtNanos: atNanos}, nil
}

// Charge takes n >= 1 permits (n*I tokens) at now without a grant,
// whatever the wait: the pools are filled up to max(now, FillNanos), the
// tokens are drawn from the active pool, then the burst pool, and the
// deficit D left pushes FillNanos to max(now, FillNanos) + D. The time it
// takes to mint D tokens is spent on the charge and credited to no pool,
// not even the burst share a fill of D would have added (conservative: the
// overrun is paid at the plain rate, never at the burst ratio). It fails
// with ErrOverflow, changing nothing, if n*I or the new FillNanos passes
// the end of the int64 timeline.
func (p *HybridPacer) Charge(nowNanos, n int64) error {
	if err := checkChargePermits(p.cfg, n); err != nil {
		return err
	}
	now, at, q := p.filled(nowNanos)
	need := satMul(n, p.cfg.IntervalNanos)
	fromActive := min(need, q.ActiveNanos)
	fromBurst := min(need-fromActive, q.BurstNanos)
	debt := need - fromActive - fromBurst
	end := satAdd(at, debt)
	if need == math.MaxInt64 || end == math.MaxInt64 {
		return errChargeOverflow(p.cfg, now, n)
	}
	q.ActiveNanos -= fromActive
	q.BurstNanos -= fromBurst
	p.lastNow, p.fillNanos, p.pools = now, end, q
	return nil
}

// draw takes need tokens from the active pool, then from the burst pool,
// and reports true; if the two hold fewer, it takes nothing and reports
// false.
func (q *Pools) draw(need int64) bool {
	fromActive := min(need, q.ActiveNanos)
	if need-fromActive > q.BurstNanos {
		return false
	}
	q.ActiveNanos -= fromActive
	q.BurstNanos -= need - fromActive
	return true
}

// Query returns the time a request for n permits made now would be served.
func (p *HybridPacer) Query(nowNanos, n int64) (int64, error) {
	if err := checkPermits(p.cfg, n); err != nil {
		return 0, err
	}
	_, at, q := p.filled(nowNanos)
	d, ok := waitFor(p.cfg, q, n*p.cfg.IntervalNanos)
	if !ok {
		return math.MaxInt64, nil
	}
	return satAdd(at, d), nil
}

// Reconfigure fills at now under the old config, then switches to c: the
// pools' clock is kept (queued grants stay queued), and pools above their
// new sizes spill into the waiting pool (no token is lost).
func (p *HybridPacer) Reconfigure(nowNanos int64, c Config) error {
	return reconfigure(p, nowNanos, c)
}

// reconfigure is Reconfigure of a checked config.
func (p *HybridPacer) reconfigure(nowNanos int64, c *Config) error {
	now, at, q := p.filled(nowNanos)
	if q.ActiveNanos > c.ActiveNanos {
		q.WaitingNanos = satAdd(q.WaitingNanos, q.ActiveNanos-c.ActiveNanos)
		q.ActiveNanos = c.ActiveNanos
	}
	if q.BurstNanos > c.BurstNanos {
		q.WaitingNanos = satAdd(q.WaitingNanos, q.BurstNanos-c.BurstNanos)
		q.BurstNanos = c.BurstNanos
	}
	p.cfg = c
	p.lastNow, p.fillNanos, p.pools = now, at, q
	return nil
}

// AppendState appends version, algorithm, flags, lastNow, fillNanos,
// active, burst, waiting and forfeited (51 bytes).
func (p *HybridPacer) AppendState(b []byte) []byte {
	b = appendStateHeader(b, Hybrid)
	q := p.pools
	return appendInt64s(b, p.lastNow, p.fillNanos, q.ActiveNanos, q.BurstNanos, q.WaitingNanos, q.ForfeitedNanos)
}

// RestoreState replaces the state by the one encoded in b, checking the
// pool invariants against the current config: 0 <= active <= A,
// 0 <= burst <= B, waiting >= 0, forfeited >= 0.
func (p *HybridPacer) RestoreState(b []byte) error {
	var f [6]int64
	if err := decodeState(b, Hybrid, f[:]); err != nil {
		return err
	}
	q := Pools{ActiveNanos: f[2], BurstNanos: f[3], WaitingNanos: f[4], ForfeitedNanos: f[5]}
	c := p.cfg
	var err error
	switch {
	case q.ActiveNanos < 0 || q.ActiveNanos > c.ActiveNanos:
		err = fmt.Errorf("active pool %d (allowed: 0 to %d)", q.ActiveNanos, c.ActiveNanos)
	case q.BurstNanos < 0 || q.BurstNanos > c.BurstNanos:
		err = fmt.Errorf("burst pool %d (allowed: 0 to %d)", q.BurstNanos, c.BurstNanos)
	case q.WaitingNanos < 0:
		err = fmt.Errorf("waiting pool %d (allowed: >= 0)", q.WaitingNanos)
	case q.ForfeitedNanos < 0:
		err = fmt.Errorf("forfeited %d (allowed: >= 0)", q.ForfeitedNanos)
	}
	if err != nil {
		return fmt.Errorf("bucket: hybrid state: %w: %v", ErrCorruptState, err)
	}
	p.lastNow, p.fillNanos, p.pools = f[0], f[1], q
	return nil
}
