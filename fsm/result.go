package fsm

import "unicode/utf8"

// result.go: what Apply answers to the limit commands (reserve, put,
// delete), relative to the entry's cluster time, and the outcome of a
// reserve in absolute cluster time that it is computed from (what the
// dedup and session tables keep). The lease commands' results are in
// lease.go, the settlements' in settle.go.

// ReserveStatus is the outcome of one reserve.
type ReserveStatus uint8

// Reserve outcomes.
const (
	// Granted: the permits may be used WaitNanos after the decision.
	Granted ReserveStatus = 1
	// Refused: nothing reserved; RetryAfterNanos says when to try again.
	Refused ReserveStatus = 2
	// UnknownLimit: no limit of that name exists.
	UnknownLimit ReserveStatus = 3
	// Invalid: the request can never be granted under the limit's current
	// configuration (e.g. more permits than MaxPermits); Detail says why.
	Invalid ReserveStatus = 4
	// SessionExpired: the reserve's session is not open (it expired after
	// SessionIdleNanos without a request, or never existed) or not the
	// reserve's owner's (the same answer: see sessions.go):
	// nothing was reserved and the register cannot tell whether an
	// earlier copy of this request was decided. The client never received
	// such a decision, so it opens a new session and asks again, as a new
	// request.
	SessionExpired ReserveStatus = 5
	// Busy: the reserve carries a request ID the register has not seen,
	// and its table of request IDs is full (it refuses new IDs rather than
	// forget IDs younger than DedupWindowNanos); RetryAfterNanos says when
	// the oldest ID is forgotten. Nothing was reserved. Clients that need
	// more idempotent reserves per second use sessions. A reserve of a
	// session is answered Busy when its outcome cannot be recorded (the
	// sessions, or its owner's, keep as many outcomes as they may; see
	// sessions.go), with Detail; it too decided nothing.
	Busy ReserveStatus = 6
	// Queued: the reserve (reservation form) waits in the queue of an
	// in-flight cap it names (waiters.go): ReservationID names it,
	// RetryAfterNanos is how long it may still wait (its deadline). It is
	// not an answer to give a client: a later entry decides it
	// (FSM.TakeWaiterDecisions), and the node waits for that decision. A
	// replay of its request ID while it waits is Queued again, Duplicate.
	Queued ReserveStatus = 7
	// KeysFull: the reserve names a templated key that does not exist,
	// and creating it would pass its template's MaxKeys or
	// MaxTemplatedKeys (template.go): nothing was created, reserved or
	// recorded; Detail names the cap, RetryAfterNanos is when the first
	// templated key may be dropped (a hint: not a promise of room).
	KeysFull ReserveStatus = 8
)

// ReserveResult is the outcome of one reserve, relative to the entry's
// cluster time.
type ReserveResult struct {
	Status ReserveStatus
	// WaitNanos (Granted) is how long after the decision the permits may be
	// used (>= 0); RetryAfterNanos (Refused) is when the same request could
	// succeed (>= 1, so a refusal never invites an immediate retry).
	WaitNanos       int64
	RetryAfterNanos int64
	// ExpiresInNanos (Granted) is how long after the decision the first
	// permit stops being usable; 0 = no expiry. A fresh enforced strict
	// grant has its limit's expiry, an in-flight hold its TTL; a fresh
	// grant of another algorithm, or made in shadow mode, has none. A
	// Duplicate always has one: a replayed grant is usable only until the
	// fresh answer's expiry, or, if it had none, one interval (an
	// in-flight cap's hold TTL) after its time, so a late retry never uses
	// a permit arbitrarily late.
	// -1 = already expired: only a Duplicate replayed after that; those
	// permits must not be used.
	ExpiresInNanos int64
	// SpacingNanos (Granted) is the spacing between the permits of one
	// grant: permit j (0-based) of a grant of n may be used from WaitNanos
	// + j*SpacingNanos and expires at ExpiresInNanos + j*SpacingNanos. A
	// strict grant's permits are its interval apart; the other algorithms
	// serve the n permits of a grant together (0).
	SpacingNanos int64
	// NowNanos is the cluster time the reserve was decided at (for a
	// Duplicate: the retry's), to which the durations above are relative;
	// OnArrival reports that this is the reserve's own arrival stamp
	// (ArrivedNanos, trusted in the entry's term, not clamped to a later
	// timeline). Neither travels in an answer: the leader uses them to
	// express the answer relative to the moment it is sent.
	NowNanos  int64
	OnArrival bool
	// Duplicate reports that RequestID was seen before and this is the
	// stored result of the first reserve: nothing was reserved now. Its
	// times are those of the first decision re-expressed relative to this
	// entry's cluster time (WaitNanos shrinks towards 0, ExpiresInNanos
	// towards -1), so a client that acts on the replayed answer never uses
	// a permit earlier, or later, than the first answer allowed.
	Duplicate bool
	// Detail explains Invalid and SessionExpired (and, for a reserve in
	// the reservation form, names the unknown limit of UnknownLimit; for a
	// reserve of a session, why it is Busy). For a Refused that is not a
	// Duplicate, it says why when the max wait was not the reason
	// (RefusedNoReserveAhead, RefusedReservedAheadFull); empty when the
	// permits were further than the max wait.
	Detail string
	// ReservationID (Granted, reservation form) names the reservation the
	// grant left, to settle or release it; 0 otherwise.
	ReservationID uint64
	// Blocking (Refused, reservation form) is the limit that decided the
	// retry time: the one that could serve its part last.
	Blocking string
	// Holds (Granted, reservation form) reports that the reservation holds
	// in-flight permits (an enforced concurrency limit): only then does a
	// release free anything.
	Holds bool
	// HoldExpiresInNanos (Granted, Holds) is how long after the decision
	// the earliest of the reservation's in-flight holds lapses in the
	// register (its time t* plus its cap's TTL), unless released before;
	// 0 when it holds none. Unlike ExpiresInNanos (the earliest expiry of
	// all its parts, a strict limit's included), it says how long the
	// caller may keep a slot of the cap. Like it, a Duplicate's is
	// re-expressed relative to the retry (-1: lapsed already), and a
	// waiter's may be shorter than the TTL: its hold runs from the
	// instant its slot came free, which may be before the entry that
	// decided it.
	HoldExpiresInNanos int64
}

// PutResult is the outcome of a PutLimit.
type PutResult struct {
	// Version is the raft index at which this configuration was applied
	// (when Detail is set: the version of the configuration that was kept).
	Version uint64
	// Created is true if the limit did not exist.
	Created bool
	// Detail, when not empty, says why the new configuration could not be
	// applied: the existing pacer refused to be reconfigured at the entry's
	// cluster time (for example an arithmetic overflow). The limit then keeps
	// its previous configuration, state and Version. Empty on success.
	Detail string
}

// DeleteResult is the outcome of a DeleteLimit.
type DeleteResult struct {
	// Existed is true if the limit existed (and was removed, unless
	// Detail says why not).
	Existed bool
	// Detail, when not empty, says why the limit was kept: it is leased
	// and leases still hold permits, and the delete was not forced.
	Detail string
}

// maxDetailBytes bounds ReserveResult.Detail (and the details kept in the
// dedup table and snapshots).
const maxDetailBytes = 1024

// outcome is the decision on one reserve in absolute cluster time. It is
// what the dedup table and the session table store; ReserveResult is an
// outcome seen from one entry's now.
type outcome struct {
	status ReserveStatus
	// atNanos is, when Granted, the time from which the first permit may be
	// used and, when Refused or Busy, the earliest time the request could
	// be granted (or the table could take a new ID).
	atNanos int64
	// expiresAtNanos (Granted) is when the first permit stops being
	// usable; 0 = never (an infinite bursty rate). replayExpiry reports
	// that a fresh answer carries no expiry (every algorithm but strict
	// and in-flight caps, and every grant made in shadow mode): only a
	// replay of the outcome does, so that a late retry cannot use a
	// permit arbitrarily late.
	expiresAtNanos int64
	replayExpiry   bool
	// spacingNanos (Granted) is the spacing of the grant's permits (see
	// ReserveResult.SpacingNanos).
	spacingNanos int64
	// detail explains Invalid (and UnknownLimit, in the reservation
	// form), and a fresh Refused of a strict limit that may not reserve
	// that far ahead (refusalDetail). A refusal's detail is not kept in
	// snapshots, and a replayed refusal carries none.
	detail string
	// reservation (Granted, reservation form) is the reservation's ID;
	// blocking (Refused, reservation form) the limit that set atNanos.
	reservation uint64
	blocking    string
	// holds (Granted, reservation form): the reservation holds in-flight
	// permits, which a release frees; holdEndNanos is when the earliest
	// of those holds lapses (its served time plus its cap's TTL): at or
	// after expiresAtNanos, the earliest expiry of all its parts.
	holds        bool
	holdEndNanos int64
}

// resultAt expresses the outcome relative to nowNanos (the cluster time of
// the entry being applied, >= the time of the decision), for the reserve
// that was decided (replay false) or for a retry of it (replay true):
//
//   - Granted: WaitNanos = max(0, at-now); ExpiresInNanos = expiresAt-now
//     when the answer has an expiry that has not passed, -1 when it has
//     passed (only possible for a replay), 0 when it has no expiry;
//     HoldExpiresInNanos likewise from holdEnd, when it holds in-flight
//     permits; SpacingNanos as decided;
//   - Refused, Busy: RetryAfterNanos = max(1, at-now), so a refusal never
//     invites an immediate retry; a fresh refusal's Detail says why when
//     it is not the max wait;
//   - UnknownLimit, Invalid, SessionExpired: Detail.
//
// Comparisons come before subtractions, so nothing overflows.
func (o *outcome) resultAt(nowNanos int64, replay bool) ReserveResult {
	res := ReserveResult{Status: o.status, NowNanos: nowNanos, Duplicate: replay,
		ReservationID: o.reservation, Blocking: o.blocking, Holds: o.holds}
	switch o.status {
	case Granted:
		if o.atNanos > nowNanos {
			res.WaitNanos = o.atNanos - nowNanos
		}
		res.SpacingNanos = o.spacingNanos
		if o.expiresAtNanos != 0 && (replay || !o.replayExpiry) {
			res.ExpiresInNanos = expiresIn(o.expiresAtNanos, nowNanos)
		}
		if o.holds {
			res.HoldExpiresInNanos = expiresIn(o.holdEndNanos, nowNanos)
		}
	case Refused, Busy, Queued, KeysFull:
		res.RetryAfterNanos = 1
		if o.atNanos > nowNanos {
			res.RetryAfterNanos = o.atNanos - nowNanos
		}
		if !replay {
			res.Detail = o.detail
		}
	default:
		res.Detail = o.detail
	}
	return res
}

// expiresIn is atNanos-nowNanos if atNanos is after nowNanos, else -1
// (passed).
func expiresIn(atNanos, nowNanos int64) int64 {
	if atNanos > nowNanos {
		return atNanos - nowNanos
	}
	return -1
}

// boundDetail cuts s to at most maxDetailBytes on a UTF-8 boundary.
func boundDetail(s string) string {
	if len(s) <= maxDetailBytes {
		return s
	}
	const ellipsis = "..."
	cut := maxDetailBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
