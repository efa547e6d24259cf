package node

import (
	"time"

	"github.com/permitd/permitd/fsm"
)

// answer.go: an answer's durations count from the moment it leaves.
//
// The register decides a reserve at a cluster time and expresses its
// answer relative to it: use the permit WaitNanos after the decision. The
// client counts the wait from when it receives the answer, so every
// nanosecond between the decision and the sending of the answer (the
// commit, an fsync stall, a batch ahead in the pipeline, a failover) would
// delay the use of the permit by as much, and shrink the gap to the next
// permit, decided without that delay. So the node that sends an answer
// first subtracts the time it held it:
//
//	wait' = max(0, wait - held)     expiresIn' = expiresIn - held
//	retryAfter' = max(1, retryAfter - held)
//
// (and the end of an in-flight hold, HoldExpiresInNanos, as the expiry).
//
// held is measured on the node's own monotonic clock, and must never be
// more than the real time that passed since the decision's cluster time
// was reached (else the permit would be used early):
//
//   - on the leader, for a reserve decided at its own arrival stamp, held
//     is the time since that stamp was read: the timeline reached the
//     stamp no later than that instant;
//   - for a reserve the register decided at a later cluster time than its
//     stamp (an entry applied before it had a later time, or its stamp came
//     from an earlier term), held is the time since its entry's apply
//     returned: the decision's cluster time was reached before then;
//   - a follower that forwarded the reserve subtracts the time since the
//     leader's answer was read off the connection (the leader subtracted
//     its own).
//
// An expiry (and an in-flight hold's end, which is one) is the other way
// round: it must never be counted from a moment later than the one its
// node made it for (else the client would use the permit, or hold the
// slot, after the register stopped counting it: on a strict limit, close
// to the next permit's slot). So the leader subtracts from the expiry of
// a reserve decided at a later cluster time than its stamp the time since
// the reserve arrived, not since the apply (shiftDecided): that time was
// reached after the arrival, but possibly long before the apply (the
// entry that carried it was stamped while the reserve waited for a commit
// slot, and committed first). And a follower subtracts from a forwarded
// answer's expiry the time since it sent the call less the time the
// leader held it (relayedResult): the leader's answer counts from a
// moment at least that long after the call was sent, however long the
// answer then took to come back. Counting from its arrival instead would
// lengthen the expiry by the leader-to-follower delay, which a client
// that counts from its sending plus the time the node held its request
// (held_ns, a reserve that waited in an in-flight cap's queue) would no
// longer absorb.
//
// What is left is the network's one-way delay from the sender to the
// client, which can only make a permit later, and its jitter. A grant
// whose (first) permit expired while held becomes an expired answer
// (ExpiresInNanos -1), which Reserve reports as a refusal, and, if it was
// a fresh decision, reports to the register (expiredgrants.go).

// shiftResult subtracts held from the durations of res and clears its
// NowNanos and OnArrival (meaningful only to the leader that decided it).
func shiftResult(res fsm.ReserveResult, held time.Duration) fsm.ReserveResult {
	res.NowNanos, res.OnArrival = 0, false
	h := max(int64(held), 0)
	switch res.Status {
	case fsm.Granted:
		res.WaitNanos = max(res.WaitNanos-h, 0)
		shortenExpiry(&res.ExpiresInNanos, h)
		shortenExpiry(&res.HoldExpiresInNanos, h)
	case fsm.Refused, fsm.Busy, fsm.KeysFull:
		res.RetryAfterNanos = max(res.RetryAfterNanos-h, 1)
	}
	return res
}

// relayedResult is the leader's answer d to a reserve this follower
// forwarded (sent: no later than the call's sending; received: when the
// answer was read), relative to now: its wait and retry shifted by the
// time since received, its expiry and its hold's end by the time since
// sent less d.held (the time the leader held the call before its
// durations count), or since received if that is more.
func relayedResult(d decidedReserve, sent, received time.Time) fsm.ReserveResult {
	now := time.Now()
	res := shiftResult(d.res, now.Sub(received))
	shortenExpiries(&res, now.Sub(sent)-d.held-now.Sub(received))
	return res
}

// shortenExpiries subtracts extra, if positive, from the expiry and the
// hold's end of a grant res already shifted (its wait less).
func shortenExpiries(res *fsm.ReserveResult, extra time.Duration) {
	if extra > 0 && res.Status == fsm.Granted {
		shortenExpiry(&res.ExpiresInNanos, int64(extra))
		shortenExpiry(&res.HoldExpiresInNanos, int64(extra))
	}
}

// shortenExpiry subtracts d >= 0 from an expiry *in (0: none, -1:
// expired, both kept), making it -1 if nothing is left.
func shortenExpiry(in *int64, d int64) {
	if *in > 0 {
		if *in -= d; *in <= 0 {
			*in = -1
		}
	}
}

// shiftDecided is shiftResult for a reserve decided on this leader that
// arrived at arrived and whose entry's apply returned at appliedAt. One
// decided at its own arrival stamp (res.OnArrival) is shifted by the time
// since that stamp was read. One decided at a later cluster time (see
// above) cannot tell when the timeline reached it, only that it was after
// the arrival and before the apply: its wait and retry are shifted by the
// time since the apply, its expiry and hold end by the time since the
// arrival, so that its window lies within the register's.
func shiftDecided(res fsm.ReserveResult, arrived arrival, appliedAt time.Time) fsm.ReserveResult {
	if res.OnArrival {
		return shiftResult(res, time.Since(arrived.at))
	}
	out := shiftResult(res, time.Since(appliedAt))
	shortenExpiries(&out, appliedAt.Sub(arrived.at))
	return out
}
