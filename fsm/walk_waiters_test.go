package fsm

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/permitd/permitd/bucket"
)

// walk_waiters_test.go: the reachable-state walk's checks of the reserves
// that wait in in-flight caps' queues (waiters.go). After every step:
//
//   - every decision the entry made (TakeWaiterDecisions, identical on
//     the copy restored from the previous snapshot: the queue is in the
//     snapshot) is on a reserve the walk saw queued, is final (granted,
//     refused, unknown limit or invalid) and relative to a time of the
//     entry (its own, or a batched command's arrival);
//   - a waiter granted is served within its max wait (at or before its
//     deadline) and decided between its arrival and the entry;
//   - no waiter takes what an earlier one needs: when a waiter is
//     granted, the permits held on each cap it names (an enforced cap of
//     the same size before and after the step, not put) and those the
//     earlier waiters still waiting ask of it fit in the cap;
//   - no waiter is left waiting at or past its deadline, and the register
//     waits on exactly the reservations the walk saw queued and not yet
//     decided;
//   - no queue holds more waiters than its bounds (waitqueue.go; a
//     sixth of the walks run with bounds of 2 per limit and 1 per owner):
//     per limit, and per owner of each limit's queue, counted from the
//     walk's record; and a reserve answered Busy for a full queue
//     (checkWaitersFull) names a queue that was full by that record;
//   - no slot is left idle while a reserve waits for it: every waiting
//     reserve is blocked by an enforced cap it names, in which its
//     permits do not fit beside the permits held and those the earlier
//     waiters on it ask for (counted from the walk's own record of the
//     waiters, not the register's queues).

// limitChangingKinds are the steps that change a limit (and so may
// decide waiters by the change itself).
var limitChangingKinds = []string{"put-new", "put-rate", "put-algorithm", "put-shadow", "delete", "policy-on", "policy-capacity", "policy-off"}

// walkWaiter is a reserve the walk saw queued (id: its reservation, once
// decided).
type walkWaiter struct {
	id                          uint64
	arrivedNanos, deadlineNanos int64
	limits                      []string
	parts                       []Part
	requestID, owner            string
	// retriedAt is the time of the latest replay of its request ID the
	// walk saw answered Queued (0: none).
	retriedAt int64
}

// queued records reserve q, answered Queued (rr).
func (w *walker) queued(q Reserve, rr ReserveResult) {
	if w.waiters == nil {
		w.waiters = map[uint64]walkWaiter{}
	}
	ww := walkWaiter{arrivedNanos: rr.NowNanos, deadlineNanos: rr.NowNanos + rr.RetryAfterNanos, requestID: q.RequestID, owner: q.Owner}
	if q.MaxWaitNanos == 0 || rr.ReservationID == 0 {
		w.t.Errorf("seed %d: a reserve with max wait %d was queued: %+v", w.seed, q.MaxWaitNanos, rr)
	}
	ww.parts = q.Parts()
	for _, p := range ww.parts {
		ww.limits = append(ww.limits, p.Limit)
	}
	w.waiters[rr.ReservationID] = ww
	// A waiting reservation can be released (withdrawn) like any other.
	w.reservations = append(w.reservations, walkReservation{id: rr.ReservationID, owner: q.Owner, parts: q.Parts()})
}

// checkWaiters checks the step's waiter decisions (made by the entry at
// index; capsBefore: the enforced caps before it, limitsBefore the limits
// as the audit saw them), tallies them as answers for the audit, and
// labels them.
func (w *walker) checkWaiters(kind string, index uint64, decided []WaiterDecision, capsBefore map[string]int64, limitsBefore map[string]walkLimitState) []string {
	s := &w.f.st
	now := s.lastNowNanos
	capsAfter := w.caps()
	limitsAfter := w.auditLimits()
	var labels []string
	var granted []walkWaiter
	for _, d := range decided {
		ww, ok := w.waiters[d.Reservation]
		if !ok {
			w.t.Errorf("seed %d: %s: a decision on reservation %d, which the walk never saw queued: %+v", w.seed, kind, d.Reservation, d)
			continue
		}
		delete(w.waiters, d.Reservation)
		before := limitsBefore
		if d.DecidedAtNanos == now && slices.Contains(limitChangingKinds, kind) {
			before = limitsAfter // decided by the command, after it changed the limit
		}
		w.auditWaiter(index, ww, d, before)
		if d.Result.NowNanos > now || d.Result.NowNanos < w.ledger.lastNowBefore {
			w.t.Errorf("seed %d: %s: a waiter's decision relative to %d, outside the entry's times (%d, %d]", w.seed, kind, d.Result.NowNanos, w.ledger.lastNowBefore, now)
		}
		switch d.Result.Status {
		case Granted:
			labels = append(labels, "waiter-granted")
			if kind == "release" || kind == "settle" {
				labels = append(labels, "handed-over") // a release gave its slot
			}
			ww.id = d.Reservation
			granted = append(granted, ww)
			rv, live := s.reservations.byID[d.Reservation]
			if !live {
				break // final already (a tiny TTL and settle window)
			}
			if rv.servedAtNanos > ww.deadlineNanos || rv.decidedAtNanos < ww.arrivedNanos || rv.decidedAtNanos > now {
				w.t.Errorf("seed %d: %s: waiter %d (arrived %d, deadline %d) granted at %d, served at %d (entry at %d)",
					w.seed, kind, d.Reservation, ww.arrivedNanos, ww.deadlineNanos, rv.decidedAtNanos, rv.servedAtNanos, now)
			}
		case Refused:
			labels = append(labels, "waiter-refused")
			if d.Result.Blocking == "" {
				w.t.Errorf("seed %d: %s: waiter %d refused naming no limit: %+v", w.seed, kind, d.Reservation, d.Result)
			}
		case UnknownLimit, Invalid:
		default:
			w.t.Errorf("seed %d: %s: waiter %d decided %+v, which is no final answer", w.seed, kind, d.Reservation, d.Result)
		}
	}
	// Once every decision of the step is taken out of the walk's record:
	// the waiters left still wait.
	if !slices.Contains(limitChangingKinds, kind) {
		for _, g := range granted {
			for _, p := range g.parts {
				if m := capsAfter[p.Limit]; m > 0 && capsBefore[p.Limit] == m {
					if held, asked := w.capInFlight(p.Limit, now), w.waitingAhead(p.Limit, g.id); held+asked > m {
						w.t.Errorf("seed %d: %s: waiter %d granted on cap %q of %d, which now holds %d permits while the earlier waiters still ask for %d",
							w.seed, kind, g.id, p.Limit, m, held, asked)
					}
				}
			}
		}
	}
	w.checkQueueBounds(kind)
	if got, want := s.waits.len(), len(w.waiters); got != want {
		w.t.Errorf("seed %d: %s: the register holds %d waiters, the walk saw %d queued and not decided", w.seed, kind, got, want)
	}
	for id, ww := range w.waiters {
		rv, ok := s.reservations.byID[id]
		if !ok || rv.wait == nil {
			w.t.Errorf("seed %d: %s: waiter %d is no longer waiting, and no decision said so", w.seed, kind, id)
			continue
		}
		if ww.deadlineNanos <= now {
			w.t.Errorf("seed %d: %s: waiter %d still waits at %d, its deadline %d passed", w.seed, kind, id, now, ww.deadlineNanos)
		}
		if !w.blocked(rv, now) {
			w.t.Errorf("seed %d: %s: waiter %d still waits at %d, though it fits in every cap it names beside the permits held and those the earlier waiters ask for", w.seed, kind, id, now)
		}
	}
	return labels
}

// algorithm draws the algorithm of a put: uniformly, or on a cap-heavy
// walk an in-flight cap half the time.
func (w *walker) algorithm() bucket.Algorithm {
	if w.capHeavy && w.rng.IntN(2) == 0 {
		return bucket.Concurrency
	}
	return bucket.Algorithm(1 + w.rng.IntN(walkAlgorithms))
}

// trackedMaxWait draws a tracked reserve's max wait: as any reserve's, or
// on a cap-heavy walk mostly long enough to wait for a release or a lapse.
func (w *walker) trackedMaxWait() int64 {
	if w.capHeavy && w.rng.IntN(4) > 0 {
		return w.rng.Int64N(int64(30 * time.Second))
	}
	return w.maxWait()
}

// trackedParts draws how many of n limits a tracked reserve names: one to
// n, or on a cap-heavy walk mostly one.
func (w *walker) trackedParts(n int) int {
	if w.capHeavy && w.rng.IntN(3) > 0 {
		return 1
	}
	return 1 + w.rng.IntN(n)
}

// trackedRequestID draws a tracked reserve's request ID: now and then the
// ID of a recent tracked grant that holds in-flight permits (a retry
// after a lost answer, while its holds run), as any, or
// on a cap-heavy walk now and then the ID of a reserve still waiting (a
// retry that must join the same wait).
func (w *walker) trackedRequestID() string {
	if n := len(w.grantedIDs); n > 0 && w.rng.IntN(5) == 0 {
		// A retry of a grant whose answer was lost: mostly a recent one,
		// whose holds still run.
		return w.grantedIDs[n-1-w.rng.IntN(min(n, 3))]
	}
	if w.capHeavy && w.rng.IntN(3) == 0 {
		ids := make([]uint64, 0, len(w.waiters))
		for id, ww := range w.waiters {
			if ww.requestID != "" {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			slices.Sort(ids)
			return w.waiters[ids[w.rng.IntN(len(ids))]].requestID
		}
	}
	return w.requestID()
}

// trackedPermits draws a tracked reserve's permits on its first limit: 1
// to 3, or on a cap-heavy walk mostly 1 (what the smallest caps take).
func (w *walker) trackedPermits() int64 {
	if w.capHeavy && w.rng.IntN(3) > 0 {
		return 1
	}
	return 1 + w.rng.Int64N(3)
}

// withdrawByID draws, a third of the time (always while a reserve the
// walk retried still waits), a withdrawal by request ID (of a reserve
// still waiting, mostly a retried one, or any used ID; now and then
// forced, or with a grace), in place of a release.
func (w *walker) withdrawByID() (string, []byte, bool) {
	r := w.rng
	if r.IntN(3) > 0 && !slices.ContainsFunc(slices.Collect(maps.Values(w.waiters)), func(ww walkWaiter) bool { return ww.retriedAt != 0 }) {
		return "", nil, false
	}
	c := Withdraw{RequestID: "", Owner: walkOwners[r.IntN(len(walkOwners))], Force: r.IntN(4) == 0}
	if !c.Force && r.IntN(2) == 0 {
		c.GraceNanos = 1 + r.Int64N(MaxWithdrawGraceNanos) // spares a reserve retried within it
	}
	ids, retried := make([]uint64, 0, len(w.waiters)), []uint64{}
	for id, ww := range w.waiters {
		if ww.requestID != "" {
			ids = append(ids, id)
			if ww.retriedAt != 0 {
				retried = append(retried, id)
			}
		}
	}
	slices.Sort(ids)
	slices.Sort(retried)
	if len(retried) > 0 && r.IntN(4) > 0 {
		ids = retried // mostly the owner's withdrawal of a retried reserve
	}
	switch {
	case len(ids) > 0 && r.IntN(3) > 0:
		ww := w.waiters[ids[r.IntN(len(ids))]]
		c.RequestID = ww.requestID
		if r.IntN(4) > 0 {
			c.Owner = ww.owner
		}
	case len(w.ids) > 0:
		c.RequestID = w.ids[r.IntN(len(w.ids))]
	default:
		return "", nil, false
	}
	b, err := AppendWithdraw(nil, w.stamp(), c)
	if err != nil {
		w.t.Fatalf("seed %d: withdraw: encoding failed: %v", w.seed, err)
	}
	return "withdraw-id", b, true
}

// retried notes a replay of a waiting reserve's request ID, answered
// Queued (rr).
func (w *walker) retried(rr ReserveResult) {
	if ww, ok := w.waiters[rr.ReservationID]; ok {
		ww.retriedAt = rr.NowNanos
		w.waiters[rr.ReservationID] = ww
		w.justRetried = ww.requestID
	}
}

// withdrawRetried draws, half the time, the withdrawal with a grace (of a
// second to a minute, its owner's) of the reserve the previous step
// retried, if it still waits: what the node whose client went away sends
// after the client retried elsewhere.
func (w *walker) withdrawRetried() (string, []byte, bool) {
	if w.rng.IntN(2) == 0 {
		return "", nil, false
	}
	for _, ww := range w.waiters {
		if ww.requestID != w.justRetried {
			continue
		}
		c := Withdraw{RequestID: ww.requestID, Owner: ww.owner, GraceNanos: int64(time.Second) + w.rng.Int64N(MaxWithdrawGraceNanos-int64(time.Second))}
		b, err := AppendWithdraw(nil, w.stamp(), c)
		if err != nil {
			w.t.Fatalf("seed %d: withdraw: encoding failed: %v", w.seed, err)
		}
		return "withdraw-id", b, true
	}
	return "", nil, false
}

// checkWithdrawGrace checks a withdrawal by request ID c with a grace,
// answered v at now: a reserve the walk saw waiting under that ID is
// kept (SettleConflict) exactly when the walk saw it retried within the
// grace, and withdrawn otherwise. It labels a kept one.
func (w *walker) checkWithdrawGrace(c Withdraw, v ReleaseResult, now int64) string {
	if c.GraceNanos == 0 || v.Status == SettleForbidden {
		return ""
	}
	for id, ww := range w.waiters {
		if ww.requestID != c.RequestID {
			continue
		}
		if rv, ok := w.f.st.reservations.byID[id]; v.Status == SettleUnknown && (!ok || rv.wait == nil) {
			return "" // decided by an event of the entry, before the withdrawal
		}
		kept := ww.retriedAt != 0 && ww.retriedAt >= now-c.GraceNanos
		if (v.Status == SettleConflict) != kept || (!kept && v.Status != Settled) {
			w.t.Errorf("seed %d: a withdrawal of %q with a grace of %dns at %d (the walk saw it retried at %d) answered %+v",
				w.seed, c.RequestID, c.GraceNanos, now, ww.retriedAt, v)
		}
		if kept {
			return "withdraw-kept"
		}
		return ""
	}
	if v.Status == SettleConflict {
		w.t.Errorf("seed %d: a withdrawal of %q, which the walk saw waiting under no reserve, answered %+v", w.seed, c.RequestID, v)
	}
	return ""
}

// auditWaiter tallies the decision d on waiter ww, made by the entry at
// index, as the answer to its reserve (walkaudit_test.go's auditReserve
// for a fresh answer), with its promise for replays in absolute times: a
// grant decided at an event before the entry's time is relative to the
// entry, so its time and expiry come from the decision itself.
func (w *walker) auditWaiter(index uint64, ww walkWaiter, d WaiterDecision, before map[string]walkLimitState) {
	a := &w.audit
	key := ""
	if ww.requestID != "" {
		key = "id " + ww.requestID
	}
	rr := d.Result
	switch rr.Status {
	case Granted:
		shadow, ok := w.tallyGrant(index, ww.parts, before, d)
		if !ok {
			return
		}
		end := holdEnd(d.ServedAtNanos, ww.parts, before)
		w.checkHoldEnd("a waiter's grant", rr, end)
		if key == "" {
			return
		}
		p := walkPromise{status: Granted, atNanos: d.ServedAtNanos, reservationID: rr.ReservationID,
			shadow: shadow, parts: ww.parts, before: before, holdEndNanos: end}
		switch {
		case rr.ExpiresInNanos > 0:
			p.expiresNanos = rr.NowNanos + rr.ExpiresInNanos
		case rr.ExpiresInNanos < 0:
			p.expiresNanos = rr.NowNanos // lapsed by the entry that decided it
		default:
			var period int64
			for _, part := range ww.parts {
				if q := before[part.Limit].period; q > 0 && (period == 0 || q < period) {
					period = q
				}
			}
			p.expiresNanos = p.atNanos + period
		}
		a.promises[key] = p
	case Refused:
		if c := a.counters[rr.Blocking]; c != nil {
			c.refused++
		} else {
			w.t.Errorf("seed %d: a waiter was refused by limit %q, which the walk does not know: %+v", w.seed, rr.Blocking, d)
		}
		if key != "" {
			a.promises[key] = walkPromise{status: Refused}
		}
	default:
		if key != "" {
			a.promises[key] = walkPromise{status: rr.Status}
		}
	}
}

// blocked reports whether waiting reservation rv is blocked at now by an
// enforced cap it names: its part does not fit beside the permits the cap
// holds and those the earlier waiters on it ask for (waitingAhead), or
// the cap cannot decide it.
func (w *walker) blocked(rv *reservation, now int64) bool {
	s := &w.f.st
	for _, p := range rv.parts {
		l, ok := s.limits[p.limit]
		if !ok || !isCap(l) {
			continue
		}
		if _, err := l.pacer.Query(now, p.permits); err != nil {
			return true
		}
		if w.capInFlight(p.limit, now)+w.waitingAhead(p.limit, rv.id)+p.permits > l.conf.cfg.Spec.MaxInFlight {
			return true
		}
	}
	return false
}

// checkArrivalBlocked checks a fresh tracked reserve, alone in its entry
// (so that the state after it is the state it was decided in), that was
// queued, or refused with no max wait naming an enforced cap: an enforced
// cap it names blocks it by the walk's own count (its part does not fit
// beside the permits held and those all the earlier waiters ask for). No
// reserve waits, or is refused, while every cap it names has room for it.
// (A refusal for a reason of representation, a cap that cannot admit the
// hold at all, is not checked.)
func (w *walker) checkArrivalBlocked(q Reserve, rr ReserveResult) {
	if rr.Duplicate {
		return
	}
	s := &w.f.st
	now := rr.NowNanos
	id := rr.ReservationID // queued: its own; refused: 0, after every waiter
	switch {
	case rr.Status == Queued:
	case rr.Status == Refused && q.MaxWaitNanos == 0:
		l, ok := s.limits[rr.Blocking]
		if !ok || !isCap(l) {
			return
		}
		for _, p := range q.Parts() {
			if c, ok := s.limits[p.Limit]; ok && isCap(c) && !c.pacer.(bucket.Releaser).Admits(now, p.Permits, now) && c.pacer.(*bucket.ConcurrencyPacer).InFlight(now)+p.Permits <= c.conf.cfg.Spec.MaxInFlight {
				return
			}
		}
		id = math.MaxUint64
	default:
		return
	}
	for _, p := range q.Parts() {
		l, ok := s.limits[p.Limit]
		if !ok || !isCap(l) {
			continue
		}
		if _, err := l.pacer.Query(now, p.Permits); err != nil ||
			w.capInFlight(p.Limit, now)+w.waitingAhead(p.Limit, id)+p.Permits > l.conf.cfg.Spec.MaxInFlight {
			return
		}
	}
	w.t.Errorf("seed %d: a tracked reserve (max wait %d) was answered %+v at %d, though every cap it names has room for it beside the permits held and those the waiters ask for",
		w.seed, q.MaxWaitNanos, rr, now)
}

// capInFlight returns the permits in-flight cap name holds at now.
func (w *walker) capInFlight(name string, now int64) int64 {
	if c, ok := w.f.st.limits[name].pacer.(*bucket.ConcurrencyPacer); ok {
		return c.InFlight(now)
	}
	return 0
}

// waitingAhead returns the permits of limit name that the waiters the walk
// saw queued before reservation id, and not yet decided, ask for.
func (w *walker) waitingAhead(name string, id uint64) int64 {
	var sum int64
	for other, ww := range w.waiters {
		if other >= id {
			continue
		}
		for _, p := range ww.parts {
			if p.Limit == name {
				sum += p.Permits
			}
		}
	}
	return sum
}

// holdingReservation returns, on a cap-heavy walk two times in three, a
// live reservation that holds enforced in-flight permits now (the lowest
// such ID on a cap with waiters, if any), so that releases free slots
// that reserves wait for.
func (w *walker) holdingReservation() (walkReservation, bool) {
	if !w.capHeavy || w.rng.IntN(3) == 0 {
		return walkReservation{}, false
	}
	s := &w.f.st
	now := s.lastNowNanos
	var best uint64
	bestWaited := false
	for id, rv := range s.reservations.byID {
		if rv.wait != nil || rv.released {
			continue
		}
		for _, p := range rv.parts {
			if p.holdExpiresAtNanos <= now || p.shadow || p.permits == p.releasedPermits {
				continue
			}
			waited := s.waits.byLimit[p.limit] != nil
			if best == 0 || (waited && !bestWaited) || (waited == bestWaited && id < best) {
				best, bestWaited = id, waited
			}
		}
	}
	if best == 0 {
		return walkReservation{}, false
	}
	rv := s.reservations.byID[best]
	return walkReservation{id: best, owner: rv.owner, parts: waiterParts(rv)}, true
}

// waitingReservation returns, one time in three, a reservation still
// waiting in a cap's queue (the lowest ID), whose release withdraws it.
func (w *walker) waitingReservation() (walkReservation, bool) {
	if len(w.waiters) == 0 || w.rng.IntN(3) > 0 {
		return walkReservation{}, false
	}
	id := slices.Min(slices.Collect(maps.Keys(w.waiters)))
	ww := w.waiters[id]
	rv := w.f.st.reservations.byID[id]
	return walkReservation{id: id, owner: rv.owner, parts: ww.parts}, true
}

// walkMaxWaiters and walkMaxOwnerWaiters bound the queues of the walks
// with smallQueues.
const (
	walkMaxWaiters      = 2
	walkMaxOwnerWaiters = 1
)

// smallQueues reports whether the walk of seed bounds its queues by
// walkMaxWaiters and walkMaxOwnerWaiters (half the cap-heavy walks).
func smallQueues(seed uint64) bool { return seed%6 == 4 }

// queueCounts counts the waiters the walk saw queued and not decided, per
// limit and per limit and owner (not the empty one).
func (w *walker) queueCounts() (map[string]int, map[[2]string]int) {
	perLimit, perOwner := map[string]int{}, map[[2]string]int{}
	for _, ww := range w.waiters {
		for _, name := range ww.limits {
			perLimit[name]++
			if ww.owner != "" {
				perOwner[[2]string{name, ww.owner}]++
			}
		}
	}
	return perLimit, perOwner
}

// checkQueueBounds checks that no queue holds more waiters than the
// register's bounds, per limit and per owner.
func (w *walker) checkQueueBounds(kind string) {
	perLimit, perOwner := w.queueCounts()
	for name, n := range perLimit {
		if n > w.f.maxWaiters {
			w.t.Errorf("seed %d: %s: %d reserves wait on limit %q, above its bound of %d", w.seed, kind, n, name, w.f.maxWaiters)
		}
	}
	for k, n := range perOwner {
		if n > w.f.maxOwnerWaiters {
			w.t.Errorf("seed %d: %s: %d reserves of %q wait on limit %q, above the bound of %d", w.seed, kind, n, k[1], k[0], w.f.maxOwnerWaiters)
		}
	}
}

// checkWaitersFull checks a tracked reserve q answered Busy for a full
// queue (rr): a limit it names had, by the walk's record of the waiters
// before it (every earlier reserve of its entry included), as many
// waiters as its bound, or its owner as many on it as its share; nothing
// was reserved (checkRefusedChangesNothing) and its request ID is not
// recorded. It labels it.
func (w *walker) checkWaitersFull(q Reserve, rr ReserveResult) string {
	perLimit, perOwner := w.queueCounts()
	full := false
	for _, p := range q.Parts() {
		full = full || perLimit[p.Limit] >= w.f.maxWaiters || (q.Owner != "" && perOwner[[2]string{p.Limit, q.Owner}] >= w.f.maxOwnerWaiters)
	}
	if !full || rr.RetryAfterNanos < 1 || rr.ReservationID != 0 {
		w.t.Errorf("seed %d: a tracked reserve of %q was answered Busy, naming a full queue, though no queue it joins was full (%v, %v): %+v",
			w.seed, q.Owner, perLimit, perOwner, rr)
	}
	return "waiters-full"
}

// checkBusyNotRecorded checks that the request ID of reserve i of rs,
// answered Busy for a full queue, was not recorded (unless a later
// reserve of the entry carries it too).
func (w *walker) checkBusyNotRecorded(rs []Reserve, i int) {
	id := rs[i].RequestID
	if id == "" || slices.ContainsFunc(rs[i+1:], func(r Reserve) bool { return r.RequestID == id }) {
		return
	}
	if w.f.st.dedup.lookup(id) != nil {
		w.t.Errorf("seed %d: a tracked reserve answered Busy for a full queue recorded its request id %q", w.seed, id)
	}
}
