package fsm

import (
	"fmt"
	"math"
	"slices"

	"github.com/permitd/permitd/bucket"
)

// settle.go: settling a reservation's real cost, releasing its in-flight
// permits, and the late refunds a settlement may make (see doc.go,
// "Settlements").
//
// A settlement names, for some of the reservation's limits, how many
// permits were actually used. Per limit:
//
//   - fewer than reserved, on a rate limit: if nothing else has touched
//     the limit's pacer since the grant (no other grant, charge, refund or
//     reconfiguration: its creation index and change count still match),
//     the pacer is restored to its state before the grant and the grant
//     made again for the actual permits at the same times, so the limit is
//     exactly as if the reserve had asked for what it used, and its bound
//     holds over the uses. Otherwise a Bursty limit gives back what the
//     slack of the grants since allows ("Late refunds" below), and the
//     rest is lost: returning it could let a later grant use time another
//     grant was already served in.
//   - fewer than reserved, on an in-flight cap: the difference is released
//     at once (if the hold has not expired).
//   - more than reserved, on a rate limit: the overrun is charged
//     (bucket.Scheduler.Charge), a debt that delays later grants by what
//     the extra permits cost. An in-flight cap cannot be charged (Invalid).
//
// A settlement applies once: a retry with the same request ID gets the
// first one's result (Duplicate); any other settlement of a settled
// reservation is a Conflict. Nothing changes unless the whole settlement
// is valid.

// Settle settles reservation Reservation: Actual lists the permits used
// per limit (a limit of the reservation that is not listed used what it
// reserved). RequestID (may be empty) makes a retry recognisable; Owner
// must match the reservation's owner when it has one.
type Settle struct {
	Reservation uint64
	RequestID   string
	Owner       string
	Actual      []Part
}

// Release releases the in-flight permits a reservation still holds
// (Concurrency limits); its rate parts are untouched. Releasing twice
// releases nothing the second time (Duplicate), and an expired hold
// releases nothing.
type Release struct {
	Reservation uint64
	Owner       string
}

// SettleStatus is the outcome of a settlement or a release.
type SettleStatus uint8

// Settlement and release outcomes.
const (
	// Settled: applied (or, with Duplicate, applied before).
	Settled SettleStatus = 1
	// SettleUnknown: no live reservation has that ID (never granted, or
	// final: its settle window and holds are over).
	SettleUnknown SettleStatus = 2
	// SettleForbidden: the reservation belongs to another owner.
	SettleForbidden SettleStatus = 3
	// SettleConflict: the reservation was already settled by another
	// request.
	SettleConflict SettleStatus = 4
	// SettleInvalid: the settlement does not fit the reservation (a limit
	// it does not hold, an overrun on an in-flight cap).
	SettleInvalid SettleStatus = 5
)

// SettledPart is what a settlement did to one limit of the reservation.
type SettledPart struct {
	Limit string
	// Reserved and Actual are the permits reserved and used; Refunded
	// went back to the limit, Charged was added to it as debt.
	Reserved, Actual, Refunded, Charged int64
}

// SettleResult is the outcome of a Settle.
type SettleResult struct {
	Status    SettleStatus
	Duplicate bool
	Parts     []SettledPart
	Detail    string
}

// ReleaseResult is the outcome of a Release.
type ReleaseResult struct {
	Status    SettleStatus
	Duplicate bool
	// Released counts the permits freed now.
	Released int64
	Detail   string
}

// lookupReservation finds a live reservation that owner may act on, or
// the status and detail that refuse.
func (s *state) lookupReservation(id uint64, owner string) (*reservation, SettleStatus, string) {
	rv, ok := s.reservations.byID[id]
	if !ok {
		return nil, SettleUnknown, fmt.Sprintf(
			"reservation %d is unknown or final (a reservation can be settled and released until its settle window and its holds end)", id)
	}
	if rv.owner != "" && rv.owner != owner {
		return nil, SettleForbidden, boundDetail(fmt.Sprintf("reservation %d belongs to %q, not to %q", id, rv.owner, owner))
	}
	return rv, Settled, ""
}

// settle applies a Settle at nowNanos.
func (s *state) settle(nowNanos int64, c *Settle) SettleResult {
	rv, st, detail := s.lookupReservation(c.Reservation, c.Owner)
	if rv == nil {
		return SettleResult{Status: st, Detail: detail}
	}
	if rv.wait != nil {
		return SettleResult{Status: SettleConflict, Detail: boundDetail(fmt.Sprintf(
			"reservation %d is waiting for its grant: there is nothing to settle yet (release it to withdraw it)", rv.id))}
	}
	if rv.settled {
		if c.RequestID != "" && c.RequestID == rv.settleID {
			return SettleResult{Status: Settled, Duplicate: true, Parts: rv.settleParts}
		}
		return SettleResult{Status: SettleConflict, Detail: boundDetail(fmt.Sprintf(
			"reservation %d is already settled (by request id %q); a reservation is settled once", rv.id, rv.settleID))}
	}
	actual := make([]int64, len(rv.parts))
	for i := range rv.parts {
		actual[i] = rv.parts[i].permits
	}
	for _, a := range c.Actual {
		i := rv.partIndex(a.Limit)
		if i < 0 {
			return SettleResult{Status: SettleInvalid, Detail: boundDetail(fmt.Sprintf(
				"reservation %d holds no permits of limit %q (it holds %s)", rv.id, a.Limit, rv.limitNames()))}
		}
		p := &rv.parts[i]
		if a.Permits > p.permits && p.holdExpiresAtNanos != 0 {
			return SettleResult{Status: SettleInvalid, Detail: boundDetail(fmt.Sprintf(
				"limit %q is an in-flight cap: a reservation holds %d of it and cannot settle %d (allowed: 0 to %d; an in-flight permit cannot be charged afterwards)",
				a.Limit, p.permits, a.Permits, p.permits))}
		}
		actual[i] = a.Permits
	}
	out := make([]SettledPart, len(rv.parts))
	for i := range rv.parts {
		out[i] = s.settlePart(nowNanos, rv, &rv.parts[i], actual[i])
	}
	rv.settled, rv.settleID, rv.settleParts = true, c.RequestID, out
	// Permits a settlement freed go to the reserves waiting for them.
	s.pumpWaiters(limitNames(rv), nowNanos, nowNanos)
	return SettleResult{Status: Settled, Parts: out}
}

// settlePart settles one part of rv: actual permits used of p.permits.
func (s *state) settlePart(nowNanos int64, rv *reservation, p *reservedPart, actual int64) SettledPart {
	out := SettledPart{Limit: p.limit, Reserved: p.permits, Actual: actual}
	if p.holdExpiresAtNanos != 0 {
		// Whatever the limit is now (reservation.go, "Holds"); shadow holds too: the
		// counters see what enforcement would.
		out.Refunded = s.freeHold(nowNanos, p, p.permits-p.releasedPermits-actual)
		return out
	}
	l, ok := s.limits[p.limit]
	if !ok || l.bornIndex != p.bornIndex || actual == p.permits {
		return out // the limit is gone or was replaced, or nothing to do
	}
	_, isHold := l.pacer.(bucket.Releaser)
	switch {
	case p.shadow:
		// A shadow grant took nothing enforced: nothing to refund or charge.
	case actual < p.permits:
		if l.seq != p.seqAfter || p.pre == nil {
			// Something touched the pacer since: a Refunder takes back what
			// the slack of the grants since allows ("Late refunds" below),
			// the rest is lost.
			if k := l.lateRefund(nowNanos, p.seqAfter, p.permits-actual); k > 0 {
				l.tallying().refundedPermits += uint64(k)
				out.Refunded = k
			}
			return out
		}
		post := l.pacer.AppendState(nil)
		if err := l.pacer.RestoreState(p.pre); err != nil {
			// Only a restored snapshot can hold a state the pacer does not
			// take; every replica does the same: no refund.
			mustRestore(l, post)
			return out
		}
		if actual > 0 {
			d, err := l.pacer.(bucket.Scheduler).ReserveAt(rv.decidedAtNanos, actual, rv.servedAtNanos)
			if err != nil || !d.Granted {
				// Cannot happen (fewer permits at the same times); keep
				// the grant as it was rather than guess.
				mustRestore(l, post)
				return out
			}
		}
		l.seq++
		l.tallying().refundedPermits += uint64(p.permits - actual)
		out.Refunded = p.permits - actual
	case isHold:
		// An overrun on an in-flight cap was refused before; a restored
		// snapshot that says otherwise changes nothing.
	default:
		slack := l.grantSlack(nowNanos, nowNanos) // a charge is spent at nextFree as of now
		servedAt, err := l.pacer.Query(nowNanos, 1)
		if err != nil {
			servedAt = nowNanos // cannot happen for a rate limit: Query of one permit
		}
		if err := l.pacer.(bucket.Scheduler).Charge(nowNanos, actual-p.permits); err != nil {
			return out // the debt would overflow the timeline: not charged
		}
		l.changedByGrant(slack, servedAt)
		l.tallying().chargedPermits += uint64(actual - p.permits)
		out.Charged = actual - p.permits
	}
	return out
}

// release applies a Release at nowNanos.
func (s *state) release(nowNanos int64, c *Release) ReleaseResult {
	rv, st, detail := s.lookupReservation(c.Reservation, c.Owner)
	if rv == nil {
		return ReleaseResult{Status: st, Detail: detail}
	}
	if rv.released {
		return ReleaseResult{Status: Settled, Duplicate: true}
	}
	if rv.wait != nil {
		s.withdraw(rv, nowNanos)
		return ReleaseResult{Status: Settled, Detail: fmt.Sprintf(
			"reservation %d was waiting for its grant and is withdrawn (its reserve is answered as refused)", rv.id)}
	}
	var total int64
	for i := range rv.parts {
		p := &rv.parts[i]
		if p.holdExpiresAtNanos == 0 {
			continue
		}
		// Whatever the limit is now (reservation.go, "Holds").
		if n := s.freeHold(nowNanos, p, p.permits-p.releasedPermits); n > 0 && !p.shadow {
			total += n // a shadow hold frees no enforced permit
		}
	}
	rv.released = true
	// The permits freed go to the reserves waiting for them (waiters.go).
	s.pumpWaiters(limitNames(rv), nowNanos, nowNanos)
	return ReleaseResult{Status: Settled, Released: total}
}

// partIndex returns the index of the part on limit name, or -1.
func (rv *reservation) partIndex(name string) int {
	for i := range rv.parts {
		if rv.parts[i].limit == name {
			return i
		}
	}
	return -1
}

// limitNames lists the reservation's limits for an error message.
func (rv *reservation) limitNames() string {
	s := ""
	for i := range rv.parts {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q", rv.parts[i].limit)
	}
	return s
}

// mustRestore puts back a state the pacer itself encoded a moment ago.
func mustRestore(l *limit, state []byte) {
	if err := l.pacer.RestoreState(state); err != nil {
		panic(fmt.Errorf("fsm: restoring the state limit %q encoded a moment ago failed: %w", l.name, err))
	}
}

// Late refunds on a bucket.Refunder pacer (Bursty), see doc.go
// "Settlements".
//
// A settlement's unused permits go back exactly when nothing touched the
// limit since the grant (settlePart). On a Refunder they may also go back
// after other grants, within a budget: the smallest slack
// (GrantSlackNanos) of the grants and charges made since, each lowered by
// the refunds already made of grants before it. Lowering the pacer's debt
// P by at most that much is the same as the refunded grant having asked
// for fewer permits: every later grant still finds a - MaxStored <= P at
// its time a, so the bound's argument holds over the history in which it
// did (bucket/doc.go, "Late refunds").
//
// The refund never moves the pacer's next free time before the latest
// grant's or charge's served time (lastServedNanos), so grants stay served
// in the order they are made, which the bound's argument also needs.
//
// A limit keeps the slacks as marks: (the change count after a grant or
// charge, its slack). Only the smallest slack after a given change count
// is ever asked for, so the marks form a stack whose slacks increase with
// the change count: a new mark removes the marks above it with a slack at
// least its own. At most maxRefundMarks are kept; beyond that the two
// oldest merge into one at the second's change count with the first's
// (smaller) slack, which can only lower a budget. A reconfiguration or a
// lease policy change clears the marks (resetRefundMarks): the slacks
// were measured in the old configuration, so grants made before it get
// no late refund.

// maxRefundMarks bounds a limit's refund marks.
const maxRefundMarks = 32

// refundMark is the slack of a grant or charge: afterSeq is the limit's
// change count after it.
type refundMark struct {
	afterSeq   uint64
	slackNanos int64
}

// grantSlack returns the slack of a grant or charge about to be served at
// atNanos, decided at nowNanos (0 if the pacer takes no late refunds).
func (l *limit) grantSlack(nowNanos, atNanos int64) int64 {
	if r, ok := l.pacer.(bucket.Refunder); ok {
		return r.GrantSlackNanos(nowNanos, atNanos)
	}
	return 0
}

// changedByGrant counts a grant or a charge served at servedAtNanos whose
// slack was slackNanos: a change of the pacer, and on a Refunder a refund
// mark and the latest served time.
func (l *limit) changedByGrant(slackNanos, servedAtNanos int64) {
	l.seq++
	if _, ok := l.pacer.(bucket.Refunder); !ok {
		return
	}
	l.lastServedNanos = max(l.lastServedNanos, servedAtNanos)
	m := l.refundMarks
	for len(m) > 0 && m[len(m)-1].slackNanos >= slackNanos {
		m = m[:len(m)-1]
	}
	m = append(m, refundMark{afterSeq: l.seq, slackNanos: slackNanos})
	if len(m) > maxRefundMarks {
		m[1].slackNanos = m[0].slackNanos
		m = slices.Delete(m, 0, 1)
	}
	l.refundMarks = m
}

// resetRefundMarks forgets the marks at a change of the pacer that is not
// a grant (a reconfiguration, a lease policy): grants before it get no
// late refund.
func (l *limit) resetRefundMarks() {
	l.refundMarks = nil
	l.marksFromSeq = l.seq
}

// lateRefund gives back up to n permits of a grant that left the limit at
// change count afterSeq, within the budget of the marks after it, without
// moving the next free time before the latest grant's served time, and
// returns how many went back.
func (l *limit) lateRefund(nowNanos int64, afterSeq uint64, n int64) int64 {
	r, ok := l.pacer.(bucket.Refunder)
	if !ok || afterSeq < l.marksFromSeq {
		return 0
	}
	budget := int64(math.MaxInt64)
	first := len(l.refundMarks)
	for i, m := range l.refundMarks {
		if m.afterSeq > afterSeq {
			budget, first = m.slackNanos, i
			break
		}
	}
	k := r.Refund(nowNanos, n, budget, l.lastServedNanos)
	if k == 0 {
		return 0
	}
	l.seq++
	cost := k * l.conf.cfg.IntervalNanos // <= budget
	m := l.refundMarks
	for i := first; i < len(m); i++ {
		m[i].slackNanos -= cost
	}
	// The marks before first may now have slacks above the first lowered
	// one: those can no longer be a smallest slack.
	for first > 0 && first < len(m) && m[first-1].slackNanos >= m[first].slackNanos {
		m = slices.Delete(m, first-1, first)
		first--
	}
	l.refundMarks = m
	return k
}
