package fsm

import (
	"unicode/utf8"
)

// maxDetailBytes bounds ReserveResult.Detail (and the details kept in the
// dedup table and snapshots).
const maxDetailBytes = 1024

// outcome is the decision on one reserve in absolute cluster time. It is
// what the dedup table stores; ReserveResult is an outcome seen from one
// entry's now.
type outcome struct {
	status Status
	// atNanos is, when Granted, the time from which the permits may be used
	// and, when Refused, the earliest time the request could be granted.
	atNanos int64
	// expiresAtNanos (Granted) is when unused permits stop being usable;
	// 0 = no expiry.
	expiresAtNanos int64
	// detail explains Invalid.
	detail string
}

// resultAt expresses the outcome relative to nowNanos (the cluster time of
// the entry being applied, >= the time of the decision):
//
//   - Granted: WaitNanos = max(0, at-now); ExpiresInNanos = expiresAt-now when
//     there is an expiry that has not passed, -1 when it has passed (only
//     possible for a Duplicate replayed late), 0 when there is no expiry;
//   - Refused: RetryAfterNanos = max(1, at-now), so a refusal never invites
//     an immediate retry;
//   - UnknownLimit, Invalid: Detail.
//
// Comparisons come before subtractions, so nothing overflows.
func (o *outcome) resultAt(nowNanos int64) ReserveResult {
	res := ReserveResult{Status: o.status}
	switch o.status {
	case Granted:
		if o.atNanos > nowNanos {
			res.WaitNanos = o.atNanos - nowNanos
		}
		if o.expiresAtNanos != 0 {
			if o.expiresAtNanos > nowNanos {
				res.ExpiresInNanos = o.expiresAtNanos - nowNanos
			} else {
				res.ExpiresInNanos = -1
			}
		}
	case Refused:
		res.RetryAfterNanos = 1
		if o.atNanos > nowNanos {
			res.RetryAfterNanos = o.atNanos - nowNanos
		}
	default:
		res.Detail = o.detail
	}
	return res
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
