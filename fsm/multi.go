package fsm

import (
	"fmt"
	"math"
	"slices"

	"github.com/permitd/permitd/bucket"
)

// multi.go: deciding a reserve in the reservation form: one or more
// limits, all granted together at one cluster time or none (see doc.go,
// "Reservations").
//
// Every enforced limit i first answers when it could serve its part
// (bucket.Pacer.Query); the grant's time is the latest of those, t*. If
// t* is more than the reserve's max wait away the reserve is refused,
// naming the limit that set t* (Blocking), and nothing changes anywhere.
// Otherwise every enforced limit commits its part served at exactly t*
// (bucket.Scheduler.ReserveAt). A limit may still refuse at t* (a strict
// limit whose MaxReserved does not reach that far ahead); then the parts
// already committed are restored to their state before, byte for byte,
// and the reserve is refused naming that limit. Shadow limits are
// decided, each on its own, only once the grant is certain.

// reservationsBusy is the answer to a reserve in the reservation form when
// the table of reservations is full: come back when the oldest is final.
func (s *state) reservationsBusy() outcome {
	return outcome{status: Busy, atNanos: s.reservations.oldestFinalNanos()}
}

// decideTracked decides a reserve in the reservation form at nowNanos:
// granted (its reservation recorded), refused, or, when an in-flight cap
// it names blocks it and it may wait, queued (waiters.go).
func (s *state) decideTracked(nowNanos int64, r *Reserve) outcome {
	parts := r.Parts()
	var created []string
	for _, p := range parts {
		if _, ok := s.limits[p.Limit]; !ok {
			created = append(created, p.Limit)
		}
	}
	if o, ok := s.createParts(parts, nowNanos); !ok {
		return o // (all or none: it created nothing)
	}
	o := s.decideParts(nowNanos, r, parts)
	if !decidedOn(o) {
		// Invalid or Busy: the reserve changes no limit, touches no key
		// and leaves none of the keys it created.
		for _, name := range slices.Backward(created) {
			s.uncreateKey(s.limits[name])
		}
		return o
	}
	for _, p := range parts {
		s.touch(s.limits[p.Limit], nowNanos)
	}
	return o
}

// decideParts decides a reserve in the reservation form whose parts all
// name limits that exist (decideTracked).
func (s *state) decideParts(nowNanos int64, r *Reserve, parts []Part) outcome {
	limits := make([]*limit, len(parts))
	for i, p := range parts {
		l, o, ok := s.trackedPart(p, len(parts))
		if !ok {
			return o
		}
		limits[i] = l
	}
	at, blocking, o, ok := queryRates(nowNanos, limits, parts)
	if !ok {
		return o
	}
	// The caps: each fits its part now, with nobody waiting ahead, or it
	// blocks the reserve until a release or a lapse (capAt: the earliest
	// time one of its own holds lapses enough, a hint for a refusal).
	capBlocking, capAt, o, ok := s.capsBlock(nowNanos, 0, limits, parts)
	if !ok {
		return o
	}
	switch {
	case at-nowNanos > r.MaxWaitNanos:
		if capBlocking >= 0 && capAt > at {
			at, blocking = capAt, capBlocking
		}
		limits[blocking].refusedRequests++
		return outcome{status: Refused, atNanos: at, blocking: limits[blocking].name}
	case capBlocking >= 0 && r.MaxWaitNanos == 0:
		limits[capBlocking].refusedRequests++
		return outcome{status: Refused, atNanos: max(at, capAt), blocking: limits[capBlocking].name}
	case capBlocking >= 0:
		if o, full := s.waitersFull(nowNanos, r); full {
			return o // not recorded (reserve): a retry is decided afresh
		}
		return s.enqueue(nowNanos, r)
	}
	rv := &reservation{owner: r.Owner, decidedAtNanos: nowNanos}
	for _, p := range parts {
		rv.parts = append(rv.parts, reservedPart{limit: p.Limit, permits: p.Permits})
	}
	return s.commitTracked(nowNanos, at, r.MaxWaitNanos, r.SettleWithinNanos, rv, limits)
}

// queryRates returns t* over the enforced limits that are not in-flight
// caps: the latest of nowNanos and their Query(now, n_i), and the index
// of the limit that set it (-1 if none did); or the outcome that makes
// the reserve Invalid.
func queryRates(nowNanos int64, limits []*limit, parts []Part) (int64, int, outcome, bool) {
	at, blocking := nowNanos, -1
	for i, p := range parts {
		l := limits[i]
		if l.shadow || isCap(l) {
			continue
		}
		q, err := l.pacer.Query(nowNanos, p.Permits)
		if err != nil {
			return 0, 0, outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
				"limit %q cannot decide %d permits: %v", l.name, p.Permits, err))}, false
		}
		if q > at {
			at, blocking = q, i
		}
	}
	return at, blocking, outcome{}, true
}

// commitTracked grants reservation rv (its owner and parts' limits and
// permits set; limits[i] is part i's limit), decided at nowNanos and
// served at at, every cap fitting its part at nowNanos with nobody
// waiting ahead and at at or after every rate limit's Query: every
// enforced limit commits its part served at at (rate limits first,
// in-flight caps last), shadow limits are decided on their own with
// maxWaitNanos, and rv is filled in (and, if new, recorded). If a limit
// refuses at at after all, the parts already committed are undone and the
// reserve is refused naming it.
func (s *state) commitTracked(nowNanos, at, maxWaitNanos, settleWithinNanos int64, rv *reservation, limits []*limit) outcome {
	// An in-flight cap may refuse a time its Query allowed (the end of
	// the timeline, the total of its holds): ask first, so that no hold is
	// ever committed and then undone.
	for i, p := range rv.parts {
		if h, ok := limits[i].pacer.(bucket.Releaser); ok && !limits[i].shadow && !h.Admits(nowNanos, p.permits, at) {
			limits[i].refusedRequests++
			return outcome{status: Refused, atNanos: at, blocking: limits[i].name}
		}
	}
	rv.decidedAtNanos, rv.servedAtNanos = nowNanos, at
	for i := range rv.parts {
		rv.parts[i].bornIndex, rv.parts[i].shadow = limits[i].bornIndex, limits[i].shadow
	}
	var expiresAt, spacing int64
	committed := make([]int, 0, len(rv.parts))
	slacks := make([]int64, len(rv.parts))
	// Rate limits first, in-flight holds last: a hold admitted above never
	// refuses, so a refusal never has a hold to undo.
	for pass := range 2 {
		for i := range rv.parts {
			l, rp := limits[i], &rv.parts[i]
			_, isHold := l.pacer.(bucket.Releaser)
			if l.shadow || isHold != (pass == 1) {
				continue
			}
			if !isHold {
				rp.pre = l.pacer.AppendState(nil)
			}
			slacks[i] = l.grantSlack(nowNanos, at)
			d, err := l.pacer.(bucket.Scheduler).ReserveAt(nowNanos, rp.permits, at)
			if err != nil || !d.Granted {
				undoCommitted(limits, rv.parts, committed)
				if err != nil {
					return outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
						"limit %q cannot serve %d permits at cluster time %d: %v", l.name, rp.permits, at, err))}
				}
				l.refusedRequests++
				return outcome{status: Refused, atNanos: max(at, d.AtNanos), blocking: l.name,
					detail: l.refusalDetail(nowNanos, rp.permits, maxWaitNanos, d.AtNanos)}
			}
			committed = append(committed, i)
			if isHold {
				rp.holdExpiresAtNanos = d.ExpiresAtNanos
			}
			if d.ExpiresAtNanos != 0 && (expiresAt == 0 || d.ExpiresAtNanos < expiresAt) {
				expiresAt = d.ExpiresAtNanos
			}
			if len(rv.parts) == 1 {
				spacing = d.SpacingNanos
			}
		}
	}
	for i := range rv.parts {
		l, rp := limits[i], &rv.parts[i]
		if l.shadow {
			slack := l.grantSlack(nowNanos, nowNanos)
			d, err := l.pacer.Reserve(nowNanos, rp.permits, maxWaitNanos)
			if err != nil {
				d = bucket.Decision{}
			}
			l.countShadow(nowNanos, d, rp.permits, slack)
			if _, isHold := l.pacer.(bucket.Releaser); isHold && d.Granted {
				// The shadow hold is released like an enforced one, so that
				// the counters see what enforcement would.
				rp.holdExpiresAtNanos = d.ExpiresAtNanos
			}
			continue
		}
		l.changedByGrant(slacks[i], at)
		rp.seqAfter = l.seq
		l.grantedRequests++
		l.grantedPermits += uint64(rp.permits)
	}
	rv.finalAtNanos = finalAt(at, settleWithinNanos, rv.parts)
	if rv.id == 0 {
		s.reservations.add(rv)
	}
	o := outcome{status: Granted, atNanos: at, expiresAtNanos: expiresAt, spacingNanos: spacing, reservation: rv.id}
	for i := range rv.parts {
		if end := rv.parts[i].holdExpiresAtNanos; end != 0 && !rv.parts[i].shadow {
			if !o.holds || end < o.holdEndNanos {
				o.holdEndNanos = end
			}
			o.holds = true
		}
	}
	if expiresAt == 0 {
		// As for a single reserve: a replay is usable for one interval
		// (the shortest replay period of its limits', shadow ones
		// included) after the grant's time.
		if p := minReplayPeriod(limits); p > 0 {
			o.expiresAtNanos, o.replayExpiry = replayExpiry(at, p), true
		}
	}
	return o
}

// trackedPart checks one part of a reserve in the reservation form
// against its limit: it exists, is not leased, and can grant that many
// permits in this reserve. It returns the limit, or the outcome that
// refuses the reserve.
func (s *state) trackedPart(p Part, parts int) (*limit, outcome, bool) {
	l, ok := s.limits[p.Limit]
	switch {
	case !ok:
		return nil, outcome{status: UnknownLimit, detail: boundDetail(fmt.Sprintf("limit %q does not exist", p.Limit))}, false
	case l.pool != nil:
		return nil, outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
			"limit %q is leased: its permits are handed out to workers by lease and cannot be part of a reservation (reserve through a worker, or make the limit linearized again)", l.name))}, false
	case p.Permits > l.conf.maxPermits:
		return nil, outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
			"limit %q grants at most %d permits per request under its current configuration (%s); %d requested",
			l.name, l.conf.maxPermits, l.configName(), p.Permits))}, false
	case parts > 1 && p.Permits > 1 && !l.shadow && l.conf.cfg.Spec.Algorithm == bucket.Strict:
		return nil, outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
			"limit %q is strict: its permits are served one interval apart, so in a reserve of several limits it takes 1 permit (%d requested); reserve more on it alone",
			l.name, p.Permits))}, false
	}
	return l, outcome{}, true
}

// undoCommitted restores the pacers of the parts already committed (their
// indices) by a reserve that is then refused.
func undoCommitted(limits []*limit, parts []reservedPart, committed []int) {
	for _, i := range committed {
		l, p := limits[i], &parts[i]
		if p.pre != nil {
			if err := l.pacer.RestoreState(p.pre); err != nil {
				panic(fmt.Errorf("fsm: restoring the state limit %q had a moment ago failed: %w", l.name, err))
			}
			continue
		}
		// An in-flight hold just granted (only if a later hold refused,
		// which its Query rules out): release it whole.
		l.pacer.(bucket.Releaser).Release(p.holdExpiresAtNanos-1, p.holdExpiresAtNanos, p.permits)
	}
}

// finalAt is when a reservation served at atNanos stops being settleable
// and releasable: its settle window after atNanos, or its latest hold's
// expiry if later.
func finalAt(atNanos, settleWithinNanos int64, parts []reservedPart) int64 {
	if settleWithinNanos == 0 {
		settleWithinNanos = DefaultSettleWindowNanos
	}
	end := atNanos + settleWithinNanos
	if atNanos > math.MaxInt64-settleWithinNanos {
		end = math.MaxInt64
	}
	for _, p := range parts {
		end = max(end, p.holdExpiresAtNanos)
	}
	return end
}

// minReplayPeriod is the shortest positive replay period (see
// replayPeriod) among limits (0 if none has one).
func minReplayPeriod(limits []*limit) int64 {
	var m int64
	for _, l := range limits {
		if p := l.replayPeriod(); p > 0 && (m == 0 || p < m) {
			m = p
		}
	}
	return m
}
