package bucket

import (
	"fmt"
	"math"
)

// smooth is the core shared by BurstyPacer and WarmingUpPacer, after
// Guava's SmoothRateLimiter: the pacer remembers the time of the next
// request (nextFree) rather than of the last one, and stores idle time as
// permits that are served before fresh ones.
//
// Stored permits are kept in fixed point as stored time: storedNanos =
// storedPermits * IntervalNanos. One stored permit is exactly IntervalNanos
// of stored time, so a whole number of permits is always exact, Bursty
// accrues exactly one stored nanosecond per idle nanosecond, and the only
// rounding anywhere is the floor of the warm-up accrual and of the warm-up
// integral (warmup.go), both monotone and deterministic.
type smooth struct {
	cfg         Config
	lastNow     int64
	nextFree    int64
	storedNanos int64
}

// newSmooth returns the state of a fresh pacer whose timeline starts at
// originNanos: nothing reserved, and the store as initialStoredNanos says.
func newSmooth(c Config, originNanos int64) smooth {
	s := smooth{cfg: c, lastNow: originNanos, nextFree: originNanos}
	s.storedNanos = s.initialStoredNanos()
	return s
}

// initialStoredNanos is what a fresh pacer holds at its origin: Bursty
// starts empty, WarmingUp starts cold (full), as Guava's do.
func (s *smooth) initialStoredNanos() int64 {
	if s.cfg.Spec.Algorithm == WarmingUp {
		return s.cfg.MaxStoredNanos
	}
	return 0
}

// accrual converts idle time into stored time (Guava's
// idle/coolDownInterval, times IntervalNanos).
func (s *smooth) accrual(elapsed int64) int64 {
	if s.cfg.Spec.Algorithm == WarmingUp {
		return warmupAccrual(&s.cfg, elapsed)
	}
	return elapsed
}

// storedCost is the wait charged for taking take of the stored time stored.
func (s *smooth) storedCost(stored, take int64) int64 {
	if s.cfg.Spec.Algorithm == WarmingUp {
		return warmupCost(&s.cfg, stored, take)
	}
	return 0
}

// synced returns the state as of now (Guava's resync) without changing s:
// the clamped now, nextFree and the stored time.
func (s *smooth) synced(nowNanos int64) (now, next, stored int64) {
	now = max(nowNanos, s.lastNow)
	next, stored = s.nextFree, s.storedNanos
	if now > next {
		stored = min(s.cfg.MaxStoredNanos, satAdd(stored, s.accrual(satSub(now, next))))
		next = now
	}
	return now, next, stored
}

// reserve implements Pacer.Reserve (Guava's canAcquire followed by
// reserveEarliestAvailable).
func (s *smooth) reserve(nowNanos, n, maxWaitNanos int64) (Decision, error) {
	if err := checkPermits(&s.cfg, n); err != nil {
		return Decision{}, err
	}
	if err := checkMaxWait(maxWaitNanos); err != nil {
		return Decision{}, err
	}
	now, next, stored := s.synced(nowNanos)
	// canAcquire: nextFree - maxWait <= now, whatever n is.
	if satSub(next, now) > maxWaitNanos {
		return Decision{AtNanos: next}, nil
	}
	newNext, newStored := s.spend(next, stored, satMul(n, s.cfg.IntervalNanos))
	if newNext == math.MaxInt64 {
		// The debt would run past the end of the int64 timeline: a
		// saturated nextFree would serve every later request at once.
		return Decision{AtNanos: next}, nil
	}
	s.lastNow = now
	s.nextFree = newNext
	s.storedNanos = newStored
	return Decision{Granted: true, AtNanos: next}, nil
}

// spend serves need nanoseconds of permits (n*I) at next from the store
// stored: stored time first, at its storedCost, then fresh time, which
// pushes nextFree forward. It returns the new nextFree (saturated) and the
// stored time left.
func (s *smooth) spend(next, stored, need int64) (newNext, newStored int64) {
	take := min(need, stored)
	wait := satAdd(s.storedCost(stored, take), need-take)
	return satAdd(next, wait), stored - take
}

// reserveAt implements Scheduler.ReserveAt: granted iff atNanos >= the
// next free time as of now (Query(now, n)) and the debt stays before the
// end of the int64 timeline. The state becomes the one a Reserve(atNanos,
// n, 0) would leave: the store accrues the idle time up to atNanos, in one
// step from the stored nextFree (as the request arriving at atNanos would
// compute it; two steps, to now and then to atNanos, could floor the
// warm-up accrual twice), and the permits are spent at atNanos.
func (s *smooth) reserveAt(nowNanos, n, atNanos int64) (Decision, error) {
	if err := checkPermits(&s.cfg, n); err != nil {
		return Decision{}, err
	}
	now, next, _ := s.synced(nowNanos)
	if atNanos < next {
		return Decision{AtNanos: next}, nil
	}
	// atNanos >= next >= now >= lastNow: synced(atNanos) is the state a
	// request arriving at atNanos sees, with next == atNanos.
	_, next, stored := s.synced(atNanos)
	newNext, newStored := s.spend(next, stored, satMul(n, s.cfg.IntervalNanos))
	if newNext == math.MaxInt64 {
		return Decision{AtNanos: atNanos}, nil
	}
	s.lastNow = now
	s.nextFree = newNext
	s.storedNanos = newStored
	return Decision{Granted: true, AtNanos: next}, nil
}

// charge implements Scheduler.Charge: n >= 1 permits served at the next
// free time as of now whatever the wait, spent as a grant spends them
// (stored permits first).
func (s *smooth) charge(nowNanos, n int64) error {
	if err := checkChargePermits(&s.cfg, n); err != nil {
		return err
	}
	now, next, stored := s.synced(nowNanos)
	need := satMul(n, s.cfg.IntervalNanos)
	newNext, newStored := s.spend(next, stored, need)
	if need == math.MaxInt64 || newNext == math.MaxInt64 {
		return errChargeOverflow(&s.cfg, now, n)
	}
	s.lastNow = now
	s.nextFree = newNext
	s.storedNanos = newStored
	return nil
}

// query implements Pacer.Query: the request is served at nextFree.
func (s *smooth) query(nowNanos, n int64) (int64, error) {
	if err := checkPermits(&s.cfg, n); err != nil {
		return 0, err
	}
	_, next, _ := s.synced(nowNanos)
	return next, nil
}

// reconfigure implements Pacer.Reconfigure as Guava's setRate: resync at
// now under the old config, keep nextFree (the debt already incurred), and
// scale the stored permits by newMax/oldMax. An old infinite Bursty rate
// leaves the new maximum stored (Guava); an old maximum of zero leaves
// Bursty empty and WarmingUp cold.
func (s *smooth) reconfigure(nowNanos int64, c Config) error {
	if err := checkReconfigure(s.cfg.Spec.Algorithm, c); err != nil {
		return err
	}
	now, next, stored := s.synced(nowNanos)
	old := s.cfg
	switch {
	case old.IntervalNanos == 0:
		stored = c.MaxStoredNanos
	case old.MaxStoredNanos == 0:
		if c.Spec.Algorithm == WarmingUp {
			stored = c.MaxStoredNanos
		} else {
			stored = 0
		}
	default:
		// stored <= oldMax, so the quotient is <= newMax and fits.
		stored, _ = mulDiv(stored, c.MaxStoredNanos, old.MaxStoredNanos)
	}
	s.cfg = c
	s.lastNow, s.nextFree, s.storedNanos = now, next, stored
	return nil
}

// appendState appends header, lastNow, nextFree and storedNanos (27 bytes).
func (s *smooth) appendState(b []byte) []byte {
	b = appendStateHeader(b, s.cfg.Spec.Algorithm)
	return appendInt64s(b, s.lastNow, s.nextFree, s.storedNanos)
}

// restoreState decodes b and checks 0 <= storedNanos <= MaxStoredNanos.
func (s *smooth) restoreState(b []byte) error {
	var f [3]int64
	if err := decodeState(b, s.cfg.Spec.Algorithm, f[:]); err != nil {
		return err
	}
	if f[2] < 0 || f[2] > s.cfg.MaxStoredNanos {
		return fmt.Errorf("bucket: %s state stores %d ns: %w (allowed: 0 to %d)", s.cfg.Spec.Algorithm, f[2], ErrCorruptState, s.cfg.MaxStoredNanos)
	}
	s.lastNow, s.nextFree, s.storedNanos = f[0], f[1], f[2]
	return nil
}
