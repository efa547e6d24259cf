package fsm

import (
	"math"
	"slices"

	"github.com/permitd/permitd/bucket"
)

// refund.go: late refunds on a bucket.Refunder pacer (Bursty), see doc.go
// "Settlements".
//
// A settlement's unused permits go back exactly when nothing touched the
// limit since the grant (settle.go). On a Refunder they may also go back
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
	cost := k * l.cfg.IntervalNanos // <= budget
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
