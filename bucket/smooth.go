package bucket

import (
	"fmt"
	"math"
)

// smooth is BurstyPacer and WarmingUpPacer, after Guava's
// SmoothRateLimiter: the pacer remembers the time of the next request
// (nextFree) rather than of the last one, and stores idle time as permits
// that are served before fresh ones. The two differ only in what idle time
// adds to the store and what stored permits cost (accrual, storedCost);
// both pacers embed smooth and take its methods, the Pacer and Scheduler
// of both.
//
// Stored permits are kept in fixed point as stored time: storedNanos =
// storedPermits * IntervalNanos. One stored permit is exactly IntervalNanos
// of stored time, so a whole number of permits is always exact, Bursty
// accrues exactly one stored nanosecond per idle nanosecond, and the only
// rounding anywhere is the floor of the warm-up accrual and of the warm-up
// integral (warmup.go), both monotone and deterministic.
type smooth struct {
	cfg         *Config
	lastNow     int64
	nextFree    int64
	storedNanos int64
}

// newSmooth returns the state of a fresh pacer whose timeline starts at
// originNanos: nothing reserved, and the store as initialStoredNanos says.
func newSmooth(c *Config, originNanos int64) smooth {
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
		return warmupAccrual(s.cfg, elapsed)
	}
	return elapsed
}

// storedCost is the wait charged for taking take of the stored time stored.
func (s *smooth) storedCost(stored, take int64) int64 {
	if s.cfg.Spec.Algorithm == WarmingUp {
		return warmupCost(s.cfg, stored, take)
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

// Config returns the configuration the pacer runs with.
func (s *smooth) Config() Config { return *s.cfg }

// StoredNanos returns the stored time as of the last state change (stored
// permits times IntervalNanos). A fresh Bursty pacer's store is empty, a
// fresh WarmingUp pacer's full (it starts cold).
func (s *smooth) StoredNanos() int64 { return s.storedNanos }

// Reserve grants n permits at nextFree if nextFree - maxWaitNanos <= now
// (Guava's canAcquire followed by reserveEarliestAvailable); it changes
// nothing when it refuses.
func (s *smooth) Reserve(nowNanos, n, maxWaitNanos int64) (Decision, error) {
	if err := checkPermits(s.cfg, n); err != nil {
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
	s.lastNow, s.nextFree, s.storedNanos = now, newNext, newStored
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

// ReserveAt grants n permits served at atNanos, decided at now, if atNanos
// is at or after nextFree as of now (Query(now, n)); otherwise it refuses
// with AtNanos = Query(now, n) and changes nothing. The state becomes what
// Reserve(atNanos, n, 0) would leave (the idle time up to atNanos is
// stored, then the permits are spent), except that the clock stays at now.
// It also refuses, with AtNanos = atNanos, if the debt would pass the end
// of the int64 timeline.
//
// The store accrues the idle time up to atNanos in one step from the
// stored nextFree, as the request arriving at atNanos would compute it
// (two steps, to now and then to atNanos, could floor the warm-up accrual
// twice).
func (s *smooth) ReserveAt(nowNanos, n, atNanos int64) (Decision, error) {
	if err := checkPermits(s.cfg, n); err != nil {
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
	s.lastNow, s.nextFree, s.storedNanos = now, newNext, newStored
	return Decision{Granted: true, AtNanos: next}, nil
}

// Charge takes n >= 1 permits at now without a grant: they are spent at
// nextFree as of now as a grant would spend them, stored permits first,
// and the rest pushes nextFree forward by what it costs. It fails with
// ErrOverflow, changing nothing, if nextFree would pass the end of the
// int64 timeline.
func (s *smooth) Charge(nowNanos, n int64) error {
	if err := checkChargePermits(s.cfg, n); err != nil {
		return err
	}
	now, next, stored := s.synced(nowNanos)
	need := satMul(n, s.cfg.IntervalNanos)
	newNext, newStored := s.spend(next, stored, need)
	if need == math.MaxInt64 || newNext == math.MaxInt64 {
		return errChargeOverflow(s.cfg, now, n)
	}
	s.lastNow, s.nextFree, s.storedNanos = now, newNext, newStored
	return nil
}

// Query returns nextFree as of now (at least now): the request is served
// then.
func (s *smooth) Query(nowNanos, n int64) (int64, error) {
	if err := checkPermits(s.cfg, n); err != nil {
		return 0, err
	}
	_, next, _ := s.synced(nowNanos)
	return next, nil
}

// Reconfigure switches to c at now, keeping nextFree and scaling the stored
// time by the ratio of the new to the old MaxStoredNanos (Guava's setRate:
// resync at now under the old config, keep the debt already incurred). An
// old infinite Bursty rate leaves the new maximum stored (Guava); an old
// maximum of zero leaves Bursty empty and WarmingUp cold.
func (s *smooth) Reconfigure(nowNanos int64, c Config) error {
	return reconfigure(s, nowNanos, c)
}

// reconfigure is Reconfigure of a checked config.
func (s *smooth) reconfigure(nowNanos int64, c *Config) error {
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

// AppendState appends version, algorithm, flags, lastNow, nextFree and
// storedNanos (27 bytes).
func (s *smooth) AppendState(b []byte) []byte {
	b = appendStateHeader(b, s.cfg.Spec.Algorithm)
	return appendInt64s(b, s.lastNow, s.nextFree, s.storedNanos)
}

// RestoreState replaces the state by the one encoded in b, checking
// 0 <= storedNanos <= MaxStoredNanos.
func (s *smooth) RestoreState(b []byte) error {
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
