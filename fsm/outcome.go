package fsm

import (
	"unicode/utf8"
)

// maxDetailBytes bounds ReserveResult.Detail (and the details kept in the
// dedup table and snapshots).
const maxDetailBytes = 1024

// outcome is the decision on one reserve in absolute cluster time. It is
// what the dedup table and the session table store; ReserveResult is an
// outcome seen from one entry's now.
type outcome struct {
	status Status
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
	case Refused, Busy, Queued:
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
