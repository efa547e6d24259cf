package fsm

import (
	"container/heap"
	"encoding/binary"
	"math"
	"slices"
)

// reservationsnapshot.go: the reservations section of a snapshot:
//
//	last reservation id  uvarint
//	count                uvarint (<= MaxReservations), then per
//	                     reservation, by id strictly ascending:
//	    id              uvarint (1..last id)
//	    owner           uvarint length + bytes (0..MaxOwnerLen)
//	    decided at      varint
//	    served at       uvarint, delta from decided at
//	    final at        uvarint, delta from served at
//	    flags           byte: 1 settled, 2 released, 4 waiting in an
//	                    in-flight cap's queue (waiters.go; then decided
//	                    at is its arrival, served at == decided at, final
//	                    at its deadline, after last now, neither settled
//	                    nor released)
//	    if waiting:     the reserve's request id (bytes, may be empty),
//	                    uvarint its settle window (0..MaxSettleWindowNanos);
//	                    with flag 8 (only with 4: retried), uvarint the
//	                    time of its latest retry, delta from its arrival
//	                    (at most the last applied time)
//	    if settled:     settle request id (bytes), uvarint count, then per
//	                    part: limit name, uvarint reserved, actual,
//	                    refunded, charged
//	    part count      uvarint (1..MaxReserveParts), then per part:
//	        limit           name
//	        permits         uvarint (>= 1)
//	        born index      uvarint
//	        change count    uvarint (after the grant)
//	        pre state       uvarint length + bytes (may be empty)
//	        hold expiry     varint (0: none)
//	        released        uvarint
//	        shadow          byte (0 or 1)
//	                    (a waiting reservation's parts: only limit and
//	                    permits, every other field 0 or empty)
//
// A snapshot without waiting reservations has the bytes of format
// version 7 before waiting existed; one with them is refused by a decoder
// that predates them (flag 4), one with a retried waiting reservation by
// a decoder that predates retries (flag 8).

// Flags of a reservation in a snapshot.
const (
	reservationSettled  = 1
	reservationReleased = 2
	reservationWaiting  = 4
	reservationRetried  = 8
	// minReservationLen bounds preallocation for a claimed count.
	minReservationLen = 12
)

// appendReservations appends the reservations section.
func (s *state) appendReservations(b []byte) []byte {
	t := &s.reservations
	b = binary.AppendUvarint(b, t.lastID)
	ids := make([]uint64, 0, len(t.byID))
	for id := range t.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		rv := t.byID[id]
		b = binary.AppendUvarint(b, rv.id)
		b = appendBytes(b, rv.owner)
		b = binary.AppendVarint(b, rv.decidedAtNanos)
		b = binary.AppendUvarint(b, uint64(rv.servedAtNanos-rv.decidedAtNanos))
		b = binary.AppendUvarint(b, uint64(rv.finalAtNanos-rv.servedAtNanos))
		var flags byte
		if rv.settled {
			flags |= reservationSettled
		}
		if rv.released {
			flags |= reservationReleased
		}
		if rv.wait != nil {
			flags |= reservationWaiting
			if rv.wait.retriedAtNanos != 0 {
				flags |= reservationRetried
			}
		}
		b = append(b, flags)
		if rv.wait != nil {
			b = appendBytes(b, rv.wait.requestID)
			b = binary.AppendUvarint(b, uint64(rv.wait.settleWithinNanos))
			if rv.wait.retriedAtNanos != 0 {
				b = binary.AppendUvarint(b, uint64(rv.wait.retriedAtNanos-rv.decidedAtNanos))
			}
		}
		if rv.settled {
			b = appendBytes(b, rv.settleID)
			b = binary.AppendUvarint(b, uint64(len(rv.settleParts)))
			for _, p := range rv.settleParts {
				b = appendBytes(b, p.Limit)
				for _, v := range [...]int64{p.Reserved, p.Actual, p.Refunded, p.Charged} {
					b = binary.AppendUvarint(b, uint64(v))
				}
			}
		}
		b = binary.AppendUvarint(b, uint64(len(rv.parts)))
		for i := range rv.parts {
			p := &rv.parts[i]
			b = appendBytes(b, p.limit)
			b = binary.AppendUvarint(b, uint64(p.permits))
			b = binary.AppendUvarint(b, p.bornIndex)
			b = binary.AppendUvarint(b, p.seqAfter)
			b = appendBytes(b, p.pre)
			b = binary.AppendVarint(b, p.holdExpiresAtNanos)
			b = binary.AppendUvarint(b, uint64(p.releasedPermits))
			b = append(b, boolByte(p.shadow))
		}
	}
	return b
}

// reservationsSizeHint estimates the section's size.
func (s *state) reservationsSizeHint() int {
	n := 16
	for _, rv := range s.reservations.byID {
		n += 40 + len(rv.owner) + len(rv.settleID)
		for i := range rv.parts {
			n += 48 + len(rv.parts[i].limit) + len(rv.parts[i].pre)
		}
		for i := range rv.settleParts {
			n += 48 + len(rv.settleParts[i].Limit)
		}
	}
	return n
}

// decodeReservations decodes the reservations section into st. Whatever
// it does not check explicitly, the re-encoding check of decodeSnapshot
// does (times and deltas round-trip only if in range).
func decodeReservations(r *reader, st *state) {
	t := &st.reservations
	t.lastID = r.uvarint("last reservation id")
	n := r.uvarintMax("reservation count", MaxReservations)
	if r.err == nil && n > uint64(r.remaining()/minReservationLen) {
		r.fail("claims %d reservations but only %d bytes remain", n, r.remaining())
	}
	if r.err != nil {
		return
	}
	var prev uint64
	for i := range int(n) {
		r.unit, r.index = "reservation", i
		rv := decodeReservation(r, st, prev)
		if r.err != nil {
			return
		}
		prev = rv.id
		if rv.wait != nil {
			st.waits.add(rv) // by id ascending: arrival order
		}
		t.byID[rv.id] = rv
		t.heap.rs = append(t.heap.rs, rv)
		t.pin(rv, 1)
	}
	r.unit = ""
	for i, rv := range t.heap.rs {
		rv.heapIndex = i
	}
	heap.Init(&t.heap)
}

// decodeReservation decodes one reservation, whose id must come after
// prev: its times and flags, then what its flags say it holds (a waiting
// reserve's fields, a settlement), then its parts.
func decodeReservation(r *reader, st *state, prev uint64) *reservation {
	rv := &reservation{id: r.uvarint("id")}
	if r.err == nil && (rv.id <= prev || rv.id > st.reservations.lastID) {
		r.fail("id %d (allowed: after %d, at most the last id %d)", rv.id, prev, st.reservations.lastID)
	}
	rv.owner = string(r.bytes("owner", MaxOwnerLen))
	rv.decidedAtNanos = r.varint("decided at")
	served, final := r.int64Snap("served after"), r.int64Snap("final after")
	if r.err == nil && (rv.decidedAtNanos < 0 || served > math.MaxInt64-rv.decidedAtNanos || final > math.MaxInt64-rv.decidedAtNanos-served) {
		r.fail("times decided %d, +%d served, +%d final run past the timeline (allowed: 0 <= decided <= served <= final)", rv.decidedAtNanos, served, final)
	}
	rv.servedAtNanos = rv.decidedAtNanos + served
	rv.finalAtNanos = rv.servedAtNanos + final
	flags := r.byte1("flags")
	if r.err == nil && flags > reservationSettled|reservationReleased && flags != reservationWaiting && flags != reservationWaiting|reservationRetried {
		r.fail("flags %d (allowed: 0-%d, or %d alone or with %d)", flags, reservationSettled|reservationReleased, reservationWaiting, reservationRetried)
	}
	rv.settled, rv.released = flags&reservationSettled != 0, flags&reservationReleased != 0
	if flags&reservationWaiting != 0 {
		decodeWaiting(r, st, rv, flags&reservationRetried != 0)
	}
	if rv.settled {
		decodeSettlement(r, rv)
	}
	decodeReservedParts(r, st, rv)
	if r.err == nil && rv.wait != nil {
		checkWaitingParts(r, st, rv)
	}
	return rv
}

// decodeWaiting decodes the fields of a reservation that waits in an
// in-flight cap's queue (flag 4; with its latest retry, flag 8) and checks
// them against its times and the dedup tables.
func decodeWaiting(r *reader, st *state, rv *reservation, retried bool) {
	rv.wait = &waiting{requestID: string(r.bytes("waiting request id", MaxRequestIDLen))}
	rv.wait.settleWithinNanos = r.int64Snap("waiting settle window")
	if retried {
		after := r.int64Snap("retried after arrival")
		if r.err == nil && after > st.lastNowNanos-rv.decidedAtNanos {
			r.fail("waiting, retried %d after its arrival at %d, after the last applied time %d", after, rv.decidedAtNanos, st.lastNowNanos)
		}
		rv.wait.retriedAtNanos = rv.decidedAtNanos + after
		if r.err == nil && rv.wait.retriedAtNanos == 0 {
			r.fail("waiting, retried at time 0 (0 means never)")
		}
	}
	if r.err == nil && (rv.servedAtNanos != rv.decidedAtNanos || rv.wait.settleWithinNanos > MaxSettleWindowNanos) {
		r.fail("waiting, served %d after its arrival, settle window %d (allowed: served at arrival, window 0..%d)",
			rv.servedAtNanos-rv.decidedAtNanos, rv.wait.settleWithinNanos, MaxSettleWindowNanos)
	}
	if r.err == nil && rv.finalAtNanos <= st.lastNowNanos {
		// Every applied entry decided the deadlines due by its time.
		r.fail("waiting until %d, not after the last applied time %d", rv.finalAtNanos, st.lastNowNanos)
	}
	if id := rv.wait.requestID; r.err == nil && id != "" && (st.dedup.lookup(id) != nil || st.leaseDedup.lookup(id) != nil) {
		r.fail("waiting with request id %q, which the dedup tables already hold", id)
	}
}

// decodeSettlement decodes a settled reservation's settlement: its request
// ID and the result replayed to a retry.
func decodeSettlement(r *reader, rv *reservation) {
	rv.settleID = string(r.bytes("settle request id", MaxRequestIDLen))
	k := r.uvarintMax("settled part count", MaxReserveParts)
	for range int(k) {
		if r.err != nil {
			return
		}
		p := SettledPart{Limit: string(r.bytes("settled limit", MaxNameLen))}
		p.Reserved, p.Actual = r.int64Snap("reserved"), r.int64Snap("actual")
		p.Refunded, p.Charged = r.int64Snap("refunded"), r.int64Snap("charged")
		rv.settleParts = append(rv.settleParts, p)
	}
}

// decodeReservedParts decodes a reservation's parts, 1 to MaxReserveParts,
// and checks each: permits, releases, only a limit and permits while it
// waits, and no grant from the future of its limit's pacer.
func decodeReservedParts(r *reader, st *state, rv *reservation) {
	k := r.uvarintMax("part count", MaxReserveParts)
	if r.err == nil && k == 0 {
		r.fail("no parts (allowed: 1-%d)", MaxReserveParts)
	}
	for range int(k) {
		if r.err != nil {
			return
		}
		name := r.bytes("limit", MaxNameLen)
		if r.err == nil {
			if err := validateName(name); err != nil {
				r.fail("%v", err) // wrapping ErrDecode, as every Restore error
				return
			}
		}
		p := reservedPart{limit: string(name), permits: r.int64Snap("permits"), bornIndex: r.uvarint("born index"),
			seqAfter: r.uvarint("change count")}
		if pre := r.bytes("pre state", MaxPacerStateBytes); len(pre) > 0 {
			p.pre = append([]byte(nil), pre...)
		}
		p.holdExpiresAtNanos = r.varint("hold expiry")
		p.releasedPermits = r.int64Snap("released")
		p.shadow = r.bool1("shadow")
		if r.err == nil && (p.permits < 1 || p.releasedPermits > p.permits) {
			r.fail("part on %q holds %d permits with %d released (allowed: >= 1, released <= held)", p.limit, p.permits, p.releasedPermits)
		}
		if r.err == nil && rv.wait != nil && (p.bornIndex != 0 || p.seqAfter != 0 || p.pre != nil || p.holdExpiresAtNanos != 0 || p.releasedPermits != 0 || p.shadow) {
			r.fail("waiting part on %q carries a grant's fields (allowed: only its limit and permits)", p.limit)
		}
		if l, ok := st.limits[p.limit]; r.err == nil && ok && l.bornIndex == p.bornIndex && p.seqAfter > l.seq {
			// A grant from the future of its pacer: a late refund
			// would find no mark after it, and no budget.
			r.fail("part on %q was granted at change count %d, after its pacer's %d", p.limit, p.seqAfter, l.seq)
		}
		rv.parts = append(rv.parts, p)
	}
}

// checkWaitingParts checks that a waiting reservation names each limit
// once and that no other waiting reservation has its request ID.
func checkWaitingParts(r *reader, st *state, rv *reservation) {
	for i, p := range rv.parts {
		if r.err == nil && slices.ContainsFunc(rv.parts[:i], func(q reservedPart) bool { return q.limit == p.limit }) {
			r.fail("waiting, names limit %q twice", p.limit)
		}
	}
	if _, dup := st.waits.byRequestID[rv.wait.requestID]; r.err == nil && rv.wait.requestID != "" && dup {
		r.fail("waiting with request id %q, as another waiting reservation", rv.wait.requestID)
	}
}
