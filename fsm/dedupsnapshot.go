package fsm

import (
	"encoding/binary"
	"math"
)

// dedupsnapshot.go: the two tables of request IDs in a snapshot (see
// snapshot.go for the layout), with the encodings of the outcomes they
// keep: a reserve's (also kept by sessions, sessionsnapshot.go) and a
// lease command's.

// appendDedup appends a table of request IDs (reserve outcomes or lease
// outcomes).
func appendDedup(b []byte, t *dedupTable) []byte {
	recs := t.records()
	b = binary.AppendUvarint(b, uint64(len(recs)))
	var prev int64
	for i := range recs {
		rec := &recs[i]
		b = appendBytes(b, rec.id)
		b = binary.AppendUvarint(b, uint64(rec.recordedAtNanos-prev))
		prev = rec.recordedAtNanos
		if rec.lease != nil {
			b = appendLeaseOutcome(b, rec.lease, rec.recordedAtNanos)
		} else {
			b = appendOutcome(b, &rec.outcome, rec.recordedAtNanos)
		}
	}
	return b
}

// decodeDedup decodes a table of request IDs into t: lease outcomes if
// lease is set, reserve outcomes otherwise. An ID must not be in either
// table already.
func decodeDedup(r *reader, st *state, t *dedupTable, lease bool) {
	what := "reserve request ids"
	if lease {
		what = "lease request ids"
	}
	n := r.uvarint(what)
	if r.err == nil && n > uint64(t.maxEntries) {
		r.fail("%d %s (allowed: at most %d)", n, what, t.maxEntries)
	}
	if r.err == nil && n > uint64(r.remaining()/minDedupRecordLen) {
		r.fail("claims %d %s but only %d bytes remain", n, what, r.remaining())
	}
	if r.err != nil {
		return
	}
	t.queue = make([]dedupRecord, 0, int(n))
	r.unit = what
	var at int64
	for i := range int(n) {
		r.index = i
		id := r.bytes("request id", MaxRequestIDLen)
		delta := r.uvarint("recorded at")
		if r.err != nil {
			return
		}
		if delta > uint64(math.MaxInt64-at) {
			r.fail("recorded-at delta %d overflows int64", delta)
			return
		}
		at += int64(delta)
		rec := dedupRecord{recordedAtNanos: at}
		if lease {
			rec.lease = decodeLeaseOutcome(r)
			if rec.lease != nil && (rec.lease.status == LeaseGranted || rec.lease.status == LeaseRefused) {
				rec.lease.atNanos += at // stored relative to the record's time
			}
		} else {
			rec.outcome = decodeOutcome(r, at)
		}
		if r.err != nil {
			return
		}
		if len(id) == 0 {
			r.fail("empty request id")
			return
		}
		if at > st.lastNowNanos || st.lastNowNanos-at >= t.windowNanos {
			r.fail("recorded at %d, outside the retention window (%d, %d] of last now %d",
				at, st.lastNowNanos-t.windowNanos, st.lastNowNanos, st.lastNowNanos)
			return
		}
		rec.id = string(id)
		if st.dedup.lookup(rec.id) != nil || st.leaseDedup.lookup(rec.id) != nil {
			r.fail("request id %q appears twice", rec.id)
			return
		}
		t.add(rec)
	}
	r.unit = ""
}

// Flags of a granted outcome in a snapshot.
const (
	outcomeHasExpiry      = 1
	outcomeReplayExpiry   = 2
	outcomeHasReservation = 4
	outcomeHolds          = 8
	outcomeHoldEnd        = 16
	// statusExtended is or-ed into the status byte of a Refused outcome
	// that names its blocking limit and of an UnknownLimit outcome with a
	// detail.
	statusExtended = 0x80
)

// appendOutcome appends a reserve outcome, its times relative to base.
func appendOutcome(b []byte, o *outcome, base int64) []byte {
	status := byte(o.status)
	if (o.status == Refused && o.blocking != "") || (o.status == UnknownLimit && o.detail != "") {
		status |= statusExtended
	}
	b = append(b, status)
	switch o.status {
	case Granted:
		b = binary.AppendVarint(b, o.atNanos-base)
		b = binary.AppendUvarint(b, uint64(o.spacingNanos))
		var flags byte
		if o.expiresAtNanos != 0 {
			flags |= outcomeHasExpiry
		}
		if o.replayExpiry {
			flags |= outcomeReplayExpiry
		}
		if o.reservation != 0 {
			flags |= outcomeHasReservation
		}
		if o.holds {
			flags |= outcomeHolds
		}
		if o.holds && o.holdEndNanos != o.expiresAtNanos {
			flags |= outcomeHoldEnd
		}
		b = append(b, flags)
		if o.expiresAtNanos != 0 {
			b = binary.AppendVarint(b, o.expiresAtNanos-o.atNanos)
		}
		if o.reservation != 0 {
			b = binary.AppendUvarint(b, o.reservation)
		}
		if flags&outcomeHoldEnd != 0 {
			b = binary.AppendVarint(b, o.holdEndNanos-o.expiresAtNanos)
		}
	case Refused:
		b = binary.AppendVarint(b, o.atNanos-base)
		if o.blocking != "" {
			b = appendBytes(b, o.blocking)
		}
	case UnknownLimit:
		if o.detail != "" {
			b = appendBytes(b, o.detail)
		}
	case Invalid:
		b = appendBytes(b, o.detail)
	}
	return b
}

// decodeOutcome decodes what appendOutcome appended, its times relative to
// base (deltas use wrapping arithmetic, the inverse of the encoder's).
func decodeOutcome(r *reader, base int64) outcome {
	status := r.byte1("status")
	extended := status&statusExtended != 0
	o := outcome{status: ReserveStatus(status &^ statusExtended)}
	if extended && o.status != Refused && o.status != UnknownLimit {
		r.fail("status byte %#x (the extended form is only for refusals and unknown limits)", status)
		return o
	}
	switch o.status {
	case Granted:
		o.atNanos = base + r.varint("at")
		o.spacingNanos = r.int64Snap("spacing")
		flags := r.byte1("flags")
		switch flags &^ (outcomeHasReservation | outcomeHolds | outcomeHoldEnd) {
		case 0:
		case outcomeHasExpiry, outcomeHasExpiry | outcomeReplayExpiry:
			o.replayExpiry = flags&outcomeReplayExpiry != 0
			o.expiresAtNanos = o.atNanos + r.varint("expires at")
			if r.err == nil && o.expiresAtNanos == 0 {
				r.fail("expiry at time 0 (0 means none)")
			}
		default:
			r.fail("outcome flags %d (allowed: 0, %d, %d, each with %d and %d or not; %d with %d and %d)", flags, outcomeHasExpiry, outcomeHasExpiry|outcomeReplayExpiry, outcomeHasReservation, outcomeHolds, outcomeHoldEnd, outcomeHolds, outcomeHasExpiry)
		}
		o.holds = flags&outcomeHolds != 0
		if r.err == nil && o.holds && flags&outcomeHasReservation == 0 {
			r.fail("outcome holds in-flight permits without a reservation")
		}
		if r.err == nil && flags&outcomeHoldEnd != 0 && (!o.holds || o.expiresAtNanos == 0) {
			r.fail("outcome flags %d: a holds' end (%d) without holds (%d) and an expiry (%d)", flags, outcomeHoldEnd, outcomeHolds, outcomeHasExpiry)
		}
		if flags&outcomeHasReservation != 0 {
			o.reservation = r.uvarint("reservation")
			if r.err == nil && o.reservation == 0 {
				r.fail("reservation id 0 (0 means none)")
			}
		}
		if o.holds {
			o.holdEndNanos = o.expiresAtNanos
		}
		if flags&outcomeHoldEnd != 0 {
			o.holdEndNanos = o.expiresAtNanos + r.varint("holds' end")
			if r.err == nil && o.holdEndNanos <= o.expiresAtNanos {
				r.fail("holds' end %d not after the expiry %d", o.holdEndNanos, o.expiresAtNanos)
			}
		}
	case Refused:
		o.atNanos = base + r.varint("at")
		if extended {
			o.blocking = string(r.bytes("blocking limit", MaxNameLen))
			if r.err == nil && o.blocking == "" {
				r.fail("empty blocking limit in the extended form")
			}
		}
	case UnknownLimit:
		if extended {
			o.detail = string(r.bytes("detail", maxDetailBytes))
			if r.err == nil && o.detail == "" {
				r.fail("empty detail in the extended form")
			}
		}
	case Invalid:
		o.detail = string(r.bytes("detail", maxDetailBytes))
	default:
		r.fail("status %d (allowed: %d-%d)", o.status, Granted, Invalid)
	}
	return o
}

// appendLeaseOutcome appends the dedup encoding of a lease outcome.
func appendLeaseOutcome(b []byte, o *leaseOutcome, recordedAtNanos int64) []byte {
	b = append(b, byte(o.op), byte(o.status))
	switch o.status {
	case LeaseGranted:
		b = binary.AppendUvarint(b, o.leaseID)
		b = binary.AppendUvarint(b, o.epoch)
		b = binary.AppendUvarint(b, uint64(o.permits))
		b = binary.AppendUvarint(b, uint64(o.share))
		b = binary.AppendUvarint(b, uint64(o.credited))
		b = binary.AppendVarint(b, o.atNanos-recordedAtNanos)
	case LeaseRefused:
		b = binary.AppendUvarint(b, o.leaseID)
		b = binary.AppendUvarint(b, o.epoch)
		b = binary.AppendVarint(b, o.atNanos-recordedAtNanos)
		b = appendBytes(b, o.detail)
	case LeaseInvalid, LeaseFenced:
		b = appendBytes(b, o.detail)
	case LeaseReturned:
		b = binary.AppendUvarint(b, o.leaseID)
		b = binary.AppendUvarint(b, o.epoch)
		b = binary.AppendUvarint(b, uint64(o.credited))
	}
	return b
}

// decodeLeaseOutcome decodes what appendLeaseOutcome appended. atNanos is
// left relative to the record's time.
func decodeLeaseOutcome(r *reader) *leaseOutcome {
	o := &leaseOutcome{op: CommandType(r.byte1("lease op")), status: LeaseStatus(r.byte1("lease status"))}
	if r.err != nil {
		return nil
	}
	allowed := false
	switch o.status {
	case LeaseGranted:
		allowed = o.op == CmdLease || o.op == CmdRenew
		o.leaseID = r.uvarint("lease id")
		o.epoch = r.uvarint("epoch")
		o.permits = r.int64Snap("permits")
		o.share = r.int64Snap("share")
		o.credited = r.int64Snap("credited")
		o.atNanos = r.varint("expires at")
	case LeaseRefused:
		allowed = o.op == CmdLease
		o.leaseID = r.uvarint("lease id")
		o.epoch = r.uvarint("epoch")
		o.atNanos = r.varint("retry at")
		o.detail = string(r.bytes("detail", maxDetailBytes))
	case LeaseUnknownLimit:
		allowed = o.op == CmdLease || o.op == CmdRenew || o.op == CmdReturn
	case LeaseInvalid, LeaseFenced:
		allowed = o.op == CmdLease || o.op == CmdRenew || o.op == CmdReturn
		if o.status == LeaseFenced && o.op == CmdLease {
			allowed = false
		}
		o.detail = string(r.bytes("detail", maxDetailBytes))
	case LeaseReturned:
		allowed = o.op == CmdReturn
		o.leaseID = r.uvarint("lease id")
		o.epoch = r.uvarint("epoch")
		o.credited = r.int64Snap("credited")
	}
	if r.err == nil && !allowed {
		r.fail("lease outcome %s of command type %d is not possible", o.status, o.op)
	}
	if r.err != nil {
		return nil
	}
	return o
}
