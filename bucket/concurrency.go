package bucket

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// ConcurrencyPacer is an in-flight cap: at most MaxInFlight permits held at
// once. A permit is held from its grant until it is released (Release) or
// its hold TTL passes, so that a caller that crashes while holding permits
// cannot leak the capacity: its permits come back when their hold lapses.
// It has no rate: IntervalNanos is 0 and a grant's SpacingNanos is 0.
//
// # Model
//
// The state is the pacer's clock lastNow and a list of holds, each an
// expiry and a permit count, sorted by strictly ascending expiry (grants
// whose holds lapse at the same instant share one hold). With T = HoldTTL
// and M = MaxInFlight, the permits in flight at time x are
//
//	inflight(x) = sum of the permits of the holds with expiry > x
//
// which never increases with x. A request for n permits at now is served
// at the earliest time t >= now with inflight(t) + n <= M: t = now if the
// permits fit at once, otherwise the expiry of the hold at which, walking
// the holds in expiry order, enough of them have lapsed. Reserve grants at
// t if t-now <= maxWait (Query returns t, ReserveAt grants at any at >= t),
// and a grant at t adds a hold of n permits expiring at t+T; the Decision's
// ExpiresAtNanos is that expiry, which is also the name of the hold a later
// Release gives permits back to.
//
// The pacer decides on arrival, from the holds' TTLs: it does not know of
// releases to come. The replicated register (package fsm, waiters.go)
// does not use that wait: a request that does not fit at once waits in
// the register's first-in, first-out queue and is granted, with
// ReserveAt at the instant its permits fit (a release, or the lapse of a
// hold: NextExpiry), which is a semaphore's semantics; this pacer keeps
// the holds and the bound.
//
// A hold counts from its decision, not from the time it is served: a grant
// at t > now is counted in inflight(x) for every x in [now, t+T). This is
// conservative (between now and t the permits are reserved but not yet
// used) and it is what makes the bound below hold with a short proof.
//
// Holds that have lapsed (expiry <= now) are dropped at every state change
// (a grant, a release that removes permits, Reconfigure), never by a
// refusal or a Query, so identical calls leave identical state and bytes.
//
// Reconfigure keeps every hold: a new MaxInFlight and HoldTTL apply to new
// grants, and permits in flight above a lowered maximum only make new
// grants wait until enough holds lapse or are released. A caller that
// replaces the pacer (package fsm, when a limit changes algorithm and
// back, or is deleted and re-created) carries the live holds of the old
// one into the new one (Carry), so that they count as they did.
//
// The bound below counts the holds of every pacer that carried them: a
// carried hold is, to the new pacer, a grant decided before any of its
// own.
//
// Two limits keep the state representable. All the holds together never
// carry more than MaxInFlightLimit permits: a grant that would make them
// exceed it is refused (AtNanos t), which can only happen when more than
// MaxInFlightLimit permits have been granted ahead of their time. And a
// grant whose hold would lapse at math.MaxInt64, the end of the timeline,
// is refused (AtNanos t), as Strict refuses slots past the end: such a hold
// could never lapse.
//
// # Worked example
//
// MaxInFlight 2, HoldTTL 10 s, a limit created at 0, requests with maxWait
// 0 unless given, holds written expiry:permits:
//
//	now  call                      holds alive   decision
//	0s   1 permit                  -             granted at 0s, hold 10s:1
//	2s   1 permit                  10s:1         granted at 2s, hold 12s:1
//	3s   1 permit                  10s:1 12s:1   refused, retry at 10s
//	4s   release 1 of hold 12s     10s:1 12s:1   1 released
//	4s   1 permit                  10s:1         granted at 4s, hold 14s:1
//	5s   2 permits, maxWait 0      10s:1 14s:1   refused, retry at 14s
//	5s   2 permits, maxWait 9s     10s:1 14s:1   granted at 14s, hold 24s:2
//	11s  1 permit                  14s:1 24s:2   refused, retry at 24s
//	30s  release 2 of hold 24s     -             0 released (lapsed)
//
// At 3 s the request waits for the first hold to lapse; at 5 s two
// permits need both holds gone. At 11 s only one permit is in use, yet
// the request must wait until 24 s: the two permits granted at 5 s for
// 14 s count from their decision, and once the 14 s hold lapses they
// are in use until 24 s.
//
// # Bound
//
// At any instant s, the permits of the grants served at or before s
// (AtNanos <= s) that have neither lapsed (expiry > s) nor been released
// number at most MaxInFlight (the MaxInFlight in force when the last of
// them was decided, if Reconfigure changed it).
//
// Proof: let g be the grant, among those served at or before s and still
// held at s, that was decided last, at a clock now_g <= at_g <= s. Every
// other such grant h was decided before g, and its hold expires after s
// >= at_g >= now_g, so when g was decided h's permits were in the state
// (only holds with expiry <= now_g are dropped), at least as many as h
// still holds at s (a release before g's decision gave back permits that
// are not held at s; one after it only lowers what is held at s). g was
// granted only if inflight(at_g) + n_g <= M, M the MaxInFlight in force
// then, and inflight(at_g) counts every hold with expiry > at_g, hence
// every such h: the permits held at s by those grants, g's included, are
// at most inflight(at_g) + n_g <= M. (Grants served after s are not
// counted at s, but their holds were counted when decided: the cap is
// conservative, never exceeded.)
type ConcurrencyPacer struct {
	cfg     *Config
	lastNow int64
	// holds are sorted by strictly ascending expiry; every count is >= 1.
	holds []hold
	// total is the sum of the counts of holds (derived, not encoded).
	total int64
}

// hold is a number of permits held until expiresAtNanos.
type hold struct {
	expiresAtNanos int64
	permits        int64
}

var (
	_ Pacer     = (*ConcurrencyPacer)(nil)
	_ Scheduler = (*ConcurrencyPacer)(nil)
	_ Releaser  = (*ConcurrencyPacer)(nil)
)

// Config returns the configuration the pacer runs with.
func (p *ConcurrencyPacer) Config() Config { return *p.cfg }

// InFlight returns the permits in flight at now (holds expiring after
// now, including holds granted ahead of their time), without changing
// anything.
func (p *ConcurrencyPacer) InFlight(nowNanos int64) int64 {
	now := max(nowNanos, p.lastNow)
	return p.total - p.lapsed(now)
}

// NextExpiry returns the earliest expiry of a hold after afterNanos (when
// permits come back by themselves), and false if no hold lapses after it.
// It changes nothing.
func (p *ConcurrencyPacer) NextExpiry(afterNanos int64) (int64, bool) {
	i, found := p.search(afterNanos)
	if found {
		i++
	}
	if i == len(p.holds) {
		return 0, false
	}
	return p.holds[i].expiresAtNanos, true
}

// lapsed returns the permits of the holds with expiry <= x.
func (p *ConcurrencyPacer) lapsed(x int64) int64 {
	var sum int64
	for _, h := range p.holds {
		if h.expiresAtNanos > x {
			break
		}
		sum += h.permits
	}
	return sum
}

// earliest returns the earliest t >= now with inflight(t) + n <= max, for
// 1 <= n <= max: now if the permits fit at once, otherwise, walking the
// holds not lapsed at now in expiry order, the first expiry at which what
// is left fits. The walk ends at the latest with the last hold (0 + n <=
// max).
func (p *ConcurrencyPacer) earliest(now, n int64) int64 {
	limit := p.cfg.Spec.MaxInFlight - n
	inflight := p.total - p.lapsed(now)
	if inflight <= limit {
		return now
	}
	for _, h := range p.holds {
		if h.expiresAtNanos <= now {
			continue // lapsed, not counted
		}
		if inflight -= h.permits; inflight <= limit {
			return h.expiresAtNanos
		}
	}
	return now // not reached: inflight reaches 0 <= limit
}

// Reserve grants n permits at the earliest time t >= now at which they fit
// under MaxInFlight, if t-now <= maxWaitNanos, with a hold until t+HoldTTL;
// it changes nothing when it refuses (AtNanos t).
func (p *ConcurrencyPacer) Reserve(nowNanos, n, maxWaitNanos int64) (Decision, error) {
	if err := checkPermits(p.cfg, n); err != nil {
		return Decision{}, err
	}
	if err := checkMaxWait(maxWaitNanos); err != nil {
		return Decision{}, err
	}
	now := max(nowNanos, p.lastNow)
	t := p.earliest(now, n)
	if satSub(t, now) > maxWaitNanos {
		return Decision{AtNanos: t}, nil
	}
	return p.grant(now, n, t, t), nil
}

// Query returns the earliest time t >= now at which n permits fit under
// MaxInFlight, counting every hold not lapsed by then.
func (p *ConcurrencyPacer) Query(nowNanos, n int64) (int64, error) {
	if err := checkPermits(p.cfg, n); err != nil {
		return 0, err
	}
	return p.earliest(max(nowNanos, p.lastNow), n), nil
}

// ReserveAt grants n permits served at atNanos, decided at now, if atNanos
// is at or after Query(now, n) (then inflight(atNanos) + n <= MaxInFlight),
// with a hold until atNanos+HoldTTL; the pacer's clock stays at now, and
// the holds that lapse before atNanos are kept until then. Otherwise, or
// when the grant is refused for the reasons of the Model (the end of the
// timeline, the total of all holds), it refuses with AtNanos =
// Query(now, n) and changes nothing.
func (p *ConcurrencyPacer) ReserveAt(nowNanos, n, atNanos int64) (Decision, error) {
	if err := checkPermits(p.cfg, n); err != nil {
		return Decision{}, err
	}
	now := max(nowNanos, p.lastNow)
	t := p.earliest(now, n)
	if atNanos < t {
		return Decision{AtNanos: t}, nil
	}
	return p.grant(now, n, atNanos, t), nil
}

// Admits reports, without changing anything, whether ReserveAt(now, n,
// atNanos) would grant: atNanos is at or after Query(now, n), the hold's
// expiry stays before the end of the timeline, and all holds together
// stay within MaxInFlightLimit. A caller that must not commit a grant it
// may have to undo (a multi-limit reserve) checks it first.
func (p *ConcurrencyPacer) Admits(nowNanos, n, atNanos int64) bool {
	if checkPermits(p.cfg, n) != nil {
		return false
	}
	now := max(nowNanos, p.lastNow)
	if atNanos < p.earliest(now, n) {
		return false
	}
	exp := satAdd(atNanos, int64(p.cfg.Spec.HoldTTL))
	return exp != math.MaxInt64 && satAdd(p.total-p.lapsed(now), n) <= MaxInFlightLimit
}

// grant adds a hold of n permits served at at >= t, t the earliest time
// they fit, decided at now: it drops the holds lapsed at now, checks the
// two representation limits (refusing with AtNanos t) and inserts or
// merges the hold.
func (p *ConcurrencyPacer) grant(now, n, at, t int64) Decision {
	exp := satAdd(at, int64(p.cfg.Spec.HoldTTL))
	lapsed := p.lapsed(now)
	if exp == math.MaxInt64 || satAdd(p.total-lapsed, n) > MaxInFlightLimit {
		return Decision{AtNanos: t}
	}
	p.add(now, exp, n)
	return Decision{Granted: true, AtNanos: at, ExpiresAtNanos: exp}
}

// add moves the clock to now, drops the holds lapsed at now and adds n
// permits to the hold expiring at exp (a new one if none does).
func (p *ConcurrencyPacer) add(now, exp, n int64) {
	p.prune(now)
	p.lastNow = now
	if i, found := p.search(exp); found {
		p.holds[i].permits += n
	} else {
		p.holds = slices.Insert(p.holds, i, hold{expiresAtNanos: exp, permits: n})
	}
	p.total += n
}

// prune drops the holds with expiry <= now.
func (p *ConcurrencyPacer) prune(now int64) {
	k := 0
	for k < len(p.holds) && p.holds[k].expiresAtNanos <= now {
		p.total -= p.holds[k].permits
		k++
	}
	if k > 0 {
		p.holds = slices.Delete(p.holds, 0, k)
	}
}

// search returns the index of the hold expiring at exp and true, or the
// index at which such a hold would be inserted and false.
func (p *ConcurrencyPacer) search(exp int64) (int, bool) {
	return slices.BinarySearchFunc(p.holds, exp, func(h hold, e int64) int {
		return cmp.Compare(h.expiresAtNanos, e)
	})
}

// Charge always fails: a concurrency limit holds permits, it does not
// space them, so a permit used without a grant has no cost to charge.
func (p *ConcurrencyPacer) Charge(nowNanos, n int64) error {
	return fmt.Errorf("bucket: concurrency charge of %d permits: %w: a concurrency limit cannot be charged for an overrun (allowed: release held permits)", n, ErrInvalidOption)
}

// Release gives back up to n permits of the hold expiring at
// expiresAtNanos, at now, and returns how many it removed: min(n, the
// hold's permits) when that hold exists and has not lapsed
// (expiresAtNanos > now); otherwise 0, and nothing changes. A release that
// removes permits is a state change: the clock moves to now and the holds
// lapsed at now are dropped.
func (p *ConcurrencyPacer) Release(nowNanos, expiresAtNanos, n int64) int64 {
	now := max(nowNanos, p.lastNow)
	if n <= 0 || expiresAtNanos <= now {
		return 0
	}
	i, found := p.search(expiresAtNanos)
	if !found {
		return 0
	}
	removed := min(n, p.holds[i].permits)
	p.holds[i].permits -= removed
	p.total -= removed
	if p.holds[i].permits == 0 {
		p.holds = slices.Delete(p.holds, i, i+1)
	}
	p.prune(now)
	p.lastNow = now
	return removed
}

// Carry counts, at now, n permits held until expiresAtNanos by a grant
// this pacer did not make: a grant of an earlier pacer of the same limit,
// whose hold outlives that pacer (the caller replaced it, by a
// reconfiguration to another algorithm and back or by a re-creation, and
// carries its live holds over so that they keep counting). The permits
// join the hold expiring at expiresAtNanos, as a grant's would. Nothing
// changes, and Carry returns nil, when n <= 0 or the hold has lapsed
// (expiresAtNanos <= now). It fails, changing nothing, when the holds
// would carry more than MaxInFlightLimit permits in all.
func (p *ConcurrencyPacer) Carry(nowNanos, expiresAtNanos, n int64) error {
	now := max(nowNanos, p.lastNow)
	if n <= 0 || expiresAtNanos <= now {
		return nil
	}
	if satAdd(p.total-p.lapsed(now), n) > MaxInFlightLimit {
		return fmt.Errorf("bucket: concurrency carry of %d permits: %w (the holds would carry more than %d permits in all)", n, ErrTooManyPermits, MaxInFlightLimit)
	}
	p.add(now, expiresAtNanos, n)
	return nil
}

// Reconfigure switches to c (a Concurrency config) at now. Every hold not
// lapsed at now is kept with its expiry; the new MaxInFlight and HoldTTL
// apply to the next grants.
func (p *ConcurrencyPacer) Reconfigure(nowNanos int64, c Config) error {
	return reconfigure(p, nowNanos, c)
}

// reconfigure is Reconfigure of a checked config.
func (p *ConcurrencyPacer) reconfigure(nowNanos int64, c *Config) error {
	now := max(nowNanos, p.lastNow)
	p.prune(now)
	p.lastNow = now
	p.cfg = c
	return nil
}

// AppendState appends version, algorithm, flags, lastNow, the number of
// holds and, for each hold in ascending expiry, its expiry and its permit
// count (27 + 16*holds bytes).
func (p *ConcurrencyPacer) AppendState(b []byte) []byte {
	b = appendStateHeader(b, Concurrency)
	b = appendInt64s(b, p.lastNow, int64(len(p.holds)))
	for _, h := range p.holds {
		b = appendInt64s(b, h.expiresAtNanos, h.permits)
	}
	return b
}

// RestoreState replaces the state by the one encoded in b. It rejects,
// changing nothing, more than MaxInFlightLimit holds, expiries that are not
// strictly ascending, a hold of fewer than 1 permit, and holds carrying
// more than MaxInFlightLimit permits in all (a pacer never holds more).
func (p *ConcurrencyPacer) RestoreState(b []byte) error {
	var f [1]int64
	count, recs, err := decodeVarState(b, Concurrency, f[:], 2, MaxInFlightLimit)
	if err != nil {
		return err
	}
	holds := make([]hold, count)
	var total int64
	for i := range holds {
		h := hold{expiresAtNanos: recs[2*i], permits: recs[2*i+1]}
		if i > 0 && h.expiresAtNanos <= holds[i-1].expiresAtNanos {
			return fmt.Errorf("bucket: concurrency state hold %d expiring at %d after one expiring at %d: %w (expiries must be strictly ascending)",
				i, h.expiresAtNanos, holds[i-1].expiresAtNanos, ErrCorruptState)
		}
		if h.permits < 1 {
			return fmt.Errorf("bucket: concurrency state hold %d of %d permits: %w (allowed: at least 1)", i, h.permits, ErrCorruptState)
		}
		// total <= MaxInFlightLimit before the addition, which cannot overflow.
		if h.permits > MaxInFlightLimit-total {
			return fmt.Errorf("bucket: concurrency state holds of more than %d permits in all: %w (a pacer never holds more)", MaxInFlightLimit, ErrCorruptState)
		}
		total += h.permits
		holds[i] = h
	}
	p.lastNow, p.holds, p.total = f[0], holds, total
	return nil
}
