package worker

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// leaseState is a worker's lease life cycle as a pure, deterministic
// value: no goroutine, no clock, no I/O, no lock. Its methods take the
// time (nowNanos, on the worker's monotonic clock) and the register's
// answers, and say what to do next; the Worker (lease.go) holds it under
// its mutex, sends the calls, feeds the answers back and runs the timers.
//
// # Model
//
// The state is the lease (leaseID, epoch; 0 when none), its current grant
// (cur), the call under way (inFlight), the calls sent without an answer
// (pendingLease, pendingRenew: retried as they were) and nextCallNanos,
// when the next call is due. next(now) returns one leaseAction:
//
//	in flight                        opNone    (wait for the answer)
//	now < nextCallNanos              opWait    until nextCallNanos
//	no lease                         opLease   LeaseRequest{demand, TTL, request ID}
//	a lease                          opRenew   LeaseReport{spent, stolen out, kept, stolen in, demand, TTL, request ID}
//
// and Stop asks for opReturn (returnCall(now)): the same report without a
// demand, after sending again, as it was, a lease or renewal still
// without an answer (opLease, opRenew). The request is built once: a call that got no answer is sent
// again with the same request ID and payload, so that a command applied
// once is answered from the register's dedup table. Sending a renew or a
// return CLOSES the grant it reports on: nothing more of it is given away,
// and nothing more spent but the renewal's kept permits (the in-flight
// allowance, grant.keepFor: what the share spends until the grant's
// usable-until, at most what is left), which callers spend until the
// answer (which makes them part of the new grant) or the usable-until.
// The demand of a report is the demand meter's measurement
// plus headroom (at least twice the share when callers were held back);
// the first lease, before anything is measured, claims the maximum.
//
// answer(now, action, grant, err) takes what came back:
//
//	granted                 install the grant; renew at sentAt + RenewEvery
//	refused (lease)         no lease; retry after RetryAfter, clamped to [RetryEvery, TTL]
//	fenced (renew)          forget the lease (its rest expired at the register); lease at once
//	fenced (lease)          a retried lease whose grant expired before the retry
//	                        arrived: that lease is over; lease at once, a new request
//	other answer (renew)    forget the lease; retry after RetryEvery
//	rejected (404, 400)     no lease; retry after RenewEvery (lease) or RetryEvery (renew)
//	ErrNotDelivered         reopen the grant (kept permits spent become spent), forget the
//	                        request; retry after RetryEvery —
//	                        unless an earlier send of the same request got no answer
//	                        (it may have been applied): then as "no answer"
//	no answer (ambiguous)   the grant stays closed, the request pending (and from now
//	                        on only ever sent again as it was); retry after RetryEvery
//
// # Safety rule
//
// No permit of a grant is used after the grant's expiry at the register.
// The register counts ExpiresIn from its decision, which comes after the
// request was sent, so the grant's usable-until, on the worker's clock, is
//
//	usableUntil = sentAt + min(ExpiresIn, TTL) - Margin
//
// counted from the SEND time of the request that got it (not its answer),
// Margin covering the clock's rate error (below Margin/TTL). A grant is
// spendable only while open and before usableUntil (grant.spendable); a
// replayed answer (Duplicate) counts from the retry's send time, and one
// already past its usable-until is renewed at once (and fenced). Cut off
// from the register, the worker spends what is left of an open grant until
// usableUntil. A caller that then finds no permit waits (a sidecar
// answers 429, Retry-After) as long as the register has left the worker's
// calls unanswered (failed, or still under way) for less than
// UnreachableAfter, counted from the send of the first call without an
// answer since the register last answered (silentSinceNanos, unreachable):
// an election of the register's usual length is not an outage, whatever
// the TTL. From then on it fails closed (failClosed): Acquire gets
// ErrNoPermits and ErrRegisterUnreachable once the steal grace after the
// last good answer is over, or a steal round found nothing. The rule
// decides what a refusal says, never what is spent: nothing is spendable
// but an open grant before its usable-until, its kept permits and stolen
// lots.
//
// # Worked example
//
// TTL 2 s, Margin 200 ms, RenewEvery 1 s, RetryEvery 250 ms,
// UnreachableAfter 500 ms (shorter than the default, to show it), shares
// of 100/s (times in seconds on the worker's clock; leasestate_test.go
// replays it):
//
//	t=0      next: Lease{demand max, id w.1}                       in flight
//	t=0.010  granted lease 7 epoch 1: 100 permits, ExpiresIn 2     usable until 0+2-0.2 = 1.8, renew at 0+1
//	         (60 spent, 10 given to a peer, 5 received)
//	t=1      next: Renew(7,1){spent 60, out 10, kept 30, in 5, id w.2}
//	         grant (7,1) closed but for the 30 kept (the share would spend 80 by 1.8)
//	t=1.010  4 of the kept permits spent
//	t=1.020  granted epoch 2: 100 permits, ExpiresIn 1.99          the 30 kept are its first, 4 spent: 96 left;
//	                                                               usable until 1+1.99-0.2 = 2.79, renew at 2
//	t=1.500  16 more spent
//	t=2      next: Renew(7,2){spent 20, kept 79, id w.3}           closed but for 79 (100/s until 2.79)
//	t=2.100  no answer (ambiguous)                                 the kept 79 still spendable; retry at 2.35;
//	                                                               the register silent since 2 (w.3's send)
//	t=2.200  9 of the kept spent
//	t=2.350  next: Renew(7,2){spent 20, kept 79, id w.3} again
//	t=2.400  ErrNotDelivered                                       the first w.3 may have been applied
//	         (epoch 2 settled): (7,2) stays closed, the kept 70 spendable; retry at 2.65
//	t=2.500  silent for UnreachableAfter: a caller finding no permit now fails closed
//	         (ErrRegisterUnreachable) once a steal round finds nothing, and at once
//	         from 1.020 + StealGrace (4) = 5.020; before 2.5 it would have waited
//	t=2.650  next: Renew(7,2){... id w.3} again
//	t=2.700  ErrNotDelivered                                       still closed; retry at 2.95
//	t=2.790  (7,2) past its usable-until: nothing spendable
//	t=2.950  next: Renew(7,2){... id w.3} again
//	t=3      fenced (the lease expired at the register)            lease again at once
//	t=3      next: Lease{measured demand, id w.4}
//
// Had the first send of w.3 failed with ErrNotDelivered (the register
// certainly never saw it), (7,2) would have reopened until 2.79 and the
// next renewal would carry a new request ID (leasestate_test.go).
//
// At Stop, returnCall(now) first sends again a lease or renewal without an
// answer (answer takes its answer as above): the register may have applied
// it, and a return naming the grant before it would be answered fenced
// while the lease it extended stays open until its TTL (a restarted worker
// of the same name is refused meanwhile). Then it closes the grant and
// reports on it; returnAnswer(now, a, grant, err) ends it, or says when to
// send it again, until the lease has expired at the register anyway
// (lastGood + TTL).
type leaseState struct {
	p leaseParams

	// The lease, as far as the worker knows: leaseID 0 means none.
	leaseID, epoch uint64
	// cur is the grant of the current epoch (nil before the first).
	cur *grant
	// share is the share of the last grant, in milli-permits per second.
	share int64
	// meter measures the demand the reports carry (callers feed it).
	meter demandMeter
	// everGranted: a lease was granted once (later leases report the
	// measured demand instead of the initial maximum).
	everGranted bool
	// inSinceReport counts permits received from peers since the last
	// report (renew or return) that carried StolenIn.
	inSinceReport int64
	// pendingLease, pendingRenew and pendingReturn are requests sent
	// without an answer: they are sent again as they were.
	pendingLease  *client.LeaseRequest
	pendingRenew  *renewCall
	pendingReturn *renewCall
	// maybeApplied: a send of the pending lease or renewal got no answer
	// without proof that it was not delivered, so the register may have
	// applied it (settling the grant it reports on): a later
	// ErrNotDelivered proves nothing about that send, and the request is
	// only ever sent again as it was.
	maybeApplied bool
	// inFlight is set while a call is under way, sent at callSentNanos.
	inFlight      bool
	callSentNanos int64
	// nextCallNanos is when the next call is due; nextRenewNanos when the
	// current grant is due for renewal.
	nextCallNanos, nextRenewNanos int64
	// lastGoodNanos is when the last granting answer arrived (-1: never).
	lastGoodNanos int64
	// silentSinceNanos is when the first lease or renewal the register
	// has not answered since its last answer was sent (-1: it answered
	// the last one, or none was sent): the register has been silent
	// since then (see unreachable).
	silentSinceNanos int64
	// regErr is the last call that got no answer, nil after an answer;
	// regRefusal the last answer that gave no lease, nil after a grant.
	regErr, regRefusal error
	lastRTTNanos       int64
	reqSeq             uint64

	counters leaseCounters
}

// leaseParams are the settings the lease state decides with.
type leaseParams struct {
	limit, holder, group                                           string
	weight                                                         int64
	ttlNanos, marginNanos, renewNanos, retryNanos, stealGraceNanos int64
	// unreachableAfterNanos is how long the register may stay silent
	// before the worker calls it unreachable (Config.UnreachableAfter).
	unreachableAfterNanos int64
	// idPrefix makes request IDs unique across holders and incarnations.
	idPrefix string
}

// leaseCounters are the lease's share of Stats.
type leaseCounters struct {
	leases, renewals, fenced, registerFails              uint64
	leasedPermits, creditedPermits, expiredUnusedPermits int64
	// demandMilli is the demand last reported.
	demandMilli int64
}

// renewCall is a renewal or a return: the grant it reports on and the
// report.
type renewCall struct {
	leaseID, epoch uint64
	rep            client.LeaseReport
}

// leaseOp is what a leaseAction asks the worker to do.
type leaseOp uint8

const (
	// opNone: nothing; a call is under way (or there is no lease to return).
	opNone leaseOp = iota
	// opWait: nothing until atNanos.
	opWait
	// opLease, opRenew, opReturn: send the call now (atNanos is its send
	// time, which answer needs back).
	opLease
	opRenew
	opReturn
)

// leaseAction is what to do next.
type leaseAction struct {
	op      leaseOp
	atNanos int64
	// lease is the request of opLease.
	lease client.LeaseRequest
	// leaseID, epoch and report are those of opRenew and opReturn.
	leaseID, epoch uint64
	report         client.LeaseReport
}

// leaseEvent is what an answer did to the state.
type leaseEvent uint8

const (
	// evIgnored: no call was under way; the answer changed nothing.
	evIgnored leaseEvent = iota
	// evGranted: a new grant is current (the pace follows its share).
	evGranted
	// evRefused: no lease; try again at nextCallNanos.
	evRefused
	// evFenced: the lease is gone; lease again at once.
	evFenced
	// evFailed: no answer; try again after RetryEvery.
	evFailed
)

// leaseOutcome is the effect of an answer: the event, the error it
// recorded (refusal or failure), and a line for the worker's log.
type leaseOutcome struct {
	event leaseEvent
	err   error
	warn  bool
	msg   string
	kv    []any
}

// errLeaseRefused marks a refusal that passes by itself (the holder still
// holds a lease, or the limit is full): Start does not fail on it.
var errLeaseRefused = errors.New("lease refused")

// rejected reports whether err is the register's (or the client's)
// definite refusal of a request: the limit does not exist or the request
// is invalid (see Register). Nothing was applied.
func rejected(err error) bool {
	return err != nil && !errors.Is(err, client.ErrNotDelivered) && (errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrInvalid))
}

// newLeaseState returns the state of a worker that holds no lease yet, its
// first call due at once.
func newLeaseState(p leaseParams) leaseState {
	return leaseState{p: p, lastGoodNanos: -1, silentSinceNanos: -1}
}

// newRequestID returns a fresh register request ID.
func (s *leaseState) newRequestID() string {
	s.reqSeq++
	return s.p.idPrefix + strconv.FormatUint(s.reqSeq, 10)
}

// next returns what to do at now: nothing while a call is under way, wait
// until the next call is due, or send it (send).
func (s *leaseState) next(nowNanos int64) leaseAction {
	switch {
	case s.inFlight:
		return leaseAction{op: opNone}
	case nowNanos < s.nextCallNanos:
		return leaseAction{op: opWait, atNanos: s.nextCallNanos}
	}
	return s.send(nowNanos)
}

// send returns the call to send at now, whether due or not: a lease when
// there is none, else a renewal (which closes the current grant). A
// request sent without an answer is sent again as it was.
func (s *leaseState) send(nowNanos int64) leaseAction {
	s.inFlight, s.callSentNanos = true, nowNanos
	if s.silentSinceNanos < 0 {
		s.silentSinceNanos = nowNanos
	}
	if s.leaseID == 0 {
		if s.pendingLease == nil {
			// Before anything is measured, claim the most: the first
			// grants split the rate by weight.
			demand := int64(client.MaxDemandMilliPerSec)
			if s.everGranted {
				demand = withHeadroom(s.meter.measure(nowNanos, s.p.retryNanos))
			}
			s.pendingLease = &client.LeaseRequest{Holder: s.p.holder, Group: s.p.group, Weight: s.p.weight,
				DemandMilliPerSec: demand, TTL: time.Duration(s.p.ttlNanos), RequestID: s.newRequestID()}
			s.maybeApplied = false
			s.counters.demandMilli = demand
		}
		return leaseAction{op: opLease, atNanos: nowNanos, lease: *s.pendingLease}
	}
	if s.pendingRenew == nil {
		var spent, out, kept int64
		if g := s.curGrant(); g != nil {
			kept = g.keepFor(nowNanos, s.share)
			g.closed, g.kept, g.keptSpent = true, kept, 0
			spent, out = g.spent, g.stolenOut
		}
		demand := s.meter.reportDemand(nowNanos, s.p.retryNanos, s.share)
		s.pendingRenew = &renewCall{leaseID: s.leaseID, epoch: s.epoch, rep: client.LeaseReport{Spent: spent, StolenOut: out, Kept: kept,
			StolenIn: s.inSinceReport, DemandMilliPerSec: demand, TTL: time.Duration(s.p.ttlNanos), RequestID: s.newRequestID()}}
		s.maybeApplied = false
		s.inSinceReport = 0
		s.counters.demandMilli = demand
	}
	q := s.pendingRenew
	return leaseAction{op: opRenew, atNanos: nowNanos, leaseID: q.leaseID, epoch: q.epoch, report: q.rep}
}

// curGrant returns the current grant if it belongs to the current lease
// and epoch.
func (s *leaseState) curGrant() *grant {
	if g := s.cur; g != nil && g.leaseID == s.leaseID && g.epoch == s.epoch {
		return g
	}
	return nil
}

// stolenIn records n permits received from a peer (reported as StolenIn
// by the next report).
func (s *leaseState) stolenIn(n int64) { s.inSinceReport += n }

// spendable returns the permits of the current grant that may be spent
// (or given away) at now: 0 once closed or past its usable-until.
func (s *leaseState) spendable(nowNanos int64) int64 { return s.cur.spendable(nowNanos) }

// cutOff reports that the last call got no answer.
func (s *leaseState) cutOff() bool { return s.regErr != nil }

// stealHorizon returns how far ahead a worker that runs short should
// count its need at now (ok false: it should not steal). Cut off from the
// register, or with a call under way for a renewal period or longer (the
// register may be cut off or electing a leader: the call waits up to
// TTL - Margin, well past the grant it reports on), it looks one renewal
// period ahead, within the steal grace after its last good answer; with a
// younger call under way, or no lease, it waits for the register;
// otherwise it looks to its next grant: the next renewal plus a round
// trip.
func (s *leaseState) stealHorizon(nowNanos int64) (horizonNanos int64, ok bool) {
	switch {
	case s.cutOff() || (s.inFlight && nowNanos >= s.callSentNanos+s.p.renewNanos):
		if s.lastGoodNanos < 0 || nowNanos >= s.lastGoodNanos+s.p.stealGraceNanos {
			return 0, false
		}
		return s.p.renewNanos, true
	case s.inFlight || s.leaseID == 0:
		return 0, false
	}
	return s.nextRenewNanos - nowNanos + max(s.lastRTTNanos, 0), true
}

// silentNanos returns how long, at now, the register has left the
// worker's calls unanswered: since the send of the first lease or renewal
// without an answer since its last one (0 when it answered the last).
func (s *leaseState) silentNanos(nowNanos int64) int64 {
	if s.silentSinceNanos < 0 {
		return 0
	}
	return max(nowNanos-s.silentSinceNanos, 0)
}

// unreachable reports whether, at now, the register has left the
// worker's calls unanswered for UnreachableAfter or longer: the worker
// calls it unreachable. Shorter silences (an election of the register's
// usual length, a call under way) are waited out.
func (s *leaseState) unreachable(nowNanos int64) bool {
	return s.silentSinceNanos >= 0 && nowNanos-s.silentSinceNanos >= s.p.unreachableAfterNanos
}

// failClosed returns the error a caller finding no permit at now fails
// with, or nil if it should wait: a refusal while there is no lease and
// the register answers; once the register has been silent for
// UnreachableAfter (unreachable), ErrNoPermits and ErrRegisterUnreachable
// when the steal grace after the last good answer is over, or (stealing
// false) no steal round that could help is still to come. A shorter
// silence is waited out: a retry, the call under way or a steal will
// bring permits.
func (s *leaseState) failClosed(nowNanos int64, stealing bool) error {
	if !s.unreachable(nowNanos) {
		if s.regErr == nil && s.regRefusal != nil && s.leaseID == 0 {
			return s.regRefusal
		}
		return nil
	}
	since := "never"
	graceOver := s.lastGoodNanos < 0
	if !graceOver {
		since = time.Duration(nowNanos-s.lastGoodNanos).String() + " ago"
		graceOver = nowNanos >= s.lastGoodNanos+s.p.stealGraceNanos
	}
	if !graceOver && stealing {
		return nil
	}
	last := "none yet, a call under way"
	if s.regErr != nil {
		last = s.regErr.Error()
	}
	return fmt.Errorf("worker: limit %q: %w: %w: no answer for %v (unreachable after %v); the last good renewal was %s (steal grace %v), peers had nothing to spare; last error: %s",
		s.p.limit, ErrNoPermits, ErrRegisterUnreachable, time.Duration(s.silentNanos(nowNanos)), time.Duration(s.p.unreachableAfterNanos),
		since, time.Duration(s.p.stealGraceNanos), last)
}
