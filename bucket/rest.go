package bucket

// rest.go: a pacer at rest. A pacer left alone long enough reaches the
// state a pacer idle since forever would have: Strict with no slot after
// now, Bursty and WarmingUp with a full store, Hybrid (without a burst
// pool) with a full active pool, Concurrency holding nothing. Every such
// state decides every later call exactly as any other: the state at rest
// is one state, whatever the history before it. The replicated state
// machine (package fsm) creates a templated key at rest and forgets an
// idle one once it is at rest again, so that forgetting it changes no
// decision.
//
// A Hybrid pacer with a burst pool never rests: the waiting pool (time
// the pacer may still catch up) grows without bound while it is idle,
// and how much of it is left decides later grants under load.

// Rests reports whether pacers running c reach a state at rest when left
// alone: every config but a Hybrid one with a burst pool (BurstNanos >
// 0). c must come from Compile.
func Rests(c Config) bool {
	return c.Spec.Algorithm != Hybrid || c.BurstNanos == 0
}

// NewRestedPacer returns a pacer running c at rest at nowNanos: the
// state of a pacer idle since forever (a Strict pacer's first slot is
// now, a Bursty or WarmingUp store is full, a Hybrid active pool is full,
// a Concurrency pacer holds nothing). Unlike NewPacer's, a Bursty store
// starts full. c must rest (Rests).
func (c Compiled) NewRestedPacer(nowNanos int64) Pacer {
	p := newPacer(c.cfg, nowNanos)
	if b, ok := p.(*BurstyPacer); ok {
		b.storedNanos = c.cfg.MaxStoredNanos
	}
	return p
}

// RestAtNanos returns, changing nothing, the earliest time at or after
// nowNanos at which p, if no call changes it before, is at rest (decides
// every call from then on exactly as NewRestedPacer would, created then),
// and false if it never is (a Hybrid pacer with a burst pool, or a pacer
// of another package). It is nowNanos when p is at rest now.
func RestAtNanos(p Pacer, nowNanos int64) (int64, bool) {
	switch p := p.(type) {
	case *StrictPacer:
		now, next := p.clock(nowNanos)
		return max(now, next), true
	case *BurstyPacer:
		return p.restAt(nowNanos), true
	case *WarmingUpPacer:
		return p.restAt(nowNanos), true
	case *HybridPacer:
		if !Rests(*p.cfg) {
			return 0, false
		}
		now := max(nowNanos, p.lastNow)
		return max(now, satAdd(p.fillNanos, p.cfg.ActiveNanos-p.pools.ActiveNanos)), true
	case *ConcurrencyPacer:
		now := max(nowNanos, p.lastNow)
		if k := len(p.holds); k > 0 {
			return max(now, p.holds[k-1].expiresAtNanos), true
		}
		return now, true
	}
	return 0, false
}

// restAt is RestAtNanos of a Bursty or WarmingUp pacer: the first time
// at or after now (and after nextFree: no permit reserved ahead) at which
// the store, accruing from nextFree, is full.
func (s *smooth) restAt(nowNanos int64) int64 {
	now := max(nowNanos, s.lastNow)
	missing := s.cfg.MaxStoredNanos - s.storedNanos
	if missing <= 0 {
		return max(now, s.nextFree)
	}
	// The least idle time e whose accrual fills the store: accrual is
	// monotone and reaches the maximum at e = missing (Bursty) or at the
	// warm-up period (WarmingUp).
	lo, hi := int64(0), missing
	if s.cfg.Spec.Algorithm == WarmingUp {
		hi = max(int64(s.cfg.Spec.Warmup), 1)
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if s.accrual(mid) >= missing {
			hi = mid
		} else {
			lo = mid
		}
	}
	return max(now, satAdd(s.nextFree, hi))
}
