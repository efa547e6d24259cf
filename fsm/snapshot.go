package fsm

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Snapshot layout (format version 3; version 1, never released, had no
// lease book; version 2 had no lease entitlements). Every replica that
// applied the same log produces the same bytes:
//
//	magic          "PRMTFSM" (7 bytes) then format version byte 1
//	lastNowNanos   int64 big-endian
//	appliedIndex   uint64 big-endian
//	limit count    uvarint, then per limit, sorted by name (strictly ascending):
//	    name            uvarint length + bytes
//	    version         uvarint (raft index of its put)
//	    config          uvarint length + bucket.Config.AppendBinary bytes
//	    counters        uvarint grantedRequests, grantedPermits, refusedRequests
//	    pacer state     uvarint length + bucket.Pacer.AppendState bytes
//	dedup count    uvarint (<= MaxDedupEntries), then per request id, oldest
//	               first (the eviction order):
//	    id              uvarint length + bytes (1..MaxRequestIDLen)
//	    recorded at     uvarint, delta from the previous record's time (the
//	                    first: from 0), so times never decrease
//	    status          byte (Granted, Refused, UnknownLimit, Invalid), then
//	      Granted:      varint at-recordedAt, byte hasExpiry (0/1),
//	                    if 1: varint expiresAt-at
//	      Refused:      varint at-recordedAt
//	      Invalid:      detail, uvarint length + bytes
//	    or the byte dedupLeaseTag (16) for the outcome of a lease command:
//	      op byte (CmdLease, CmdRenew, CmdReturn), LeaseStatus byte, then
//	      Granted:      uvarint lease id, epoch, permits, share, credited,
//	                    varint expiresAt-recordedAt
//	      Refused:      uvarint lease id, epoch, varint at-recordedAt, detail
//	      Invalid, Fenced: detail
//	      Returned:     uvarint lease id, epoch, credited
//	lease book     see leasesnapshot.go
//	crc32          Castagnoli checksum of every preceding byte, big-endian
//
// Varints are in shortest form; signed deltas use wrapping arithmetic, so
// they round-trip any int64. Restore accepts only a snapshot that re-encodes
// to exactly its own bytes.

const (
	snapshotMagic   = "PRMTFSM"
	snapshotVersion = 3
	// snapshotHeaderLen is magic, version, lastNowNanos and appliedIndex.
	snapshotHeaderLen = len(snapshotMagic) + 1 + 8 + 8
	// MaxPacerStateBytes bounds one pacer's encoded state in a snapshot.
	MaxPacerStateBytes = 1 << 16
	// minLimitRecordLen and minDedupRecordLen are the smallest encodings of
	// a limit and a dedup record; they bound preallocation for claimed counts.
	minLimitRecordLen = 8
	minDedupRecordLen = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// insertLen inserts, at start, the uvarint length of b[start:], so that
// b[start:] becomes a length-prefixed byte string. It allocates only if b
// must grow.
func insertLen(b []byte, start int) []byte {
	n := len(b) - start
	pl := uvarintLen(uint64(n))
	for range pl {
		b = append(b, 0)
	}
	copy(b[start+pl:], b[start:start+n])
	binary.PutUvarint(b[start:], uint64(n))
	return b
}

// snapshotSizeHint estimates the size of the snapshot encoding, to size its
// buffer in one allocation.
func (s *state) snapshotSizeHint() int {
	n := snapshotHeaderLen + 16
	for _, l := range s.limits {
		n += len(l.name) + len(l.cfgBytes) + 64
	}
	recs := s.dedup.records()
	for i := range recs {
		n += len(recs[i].id) + len(recs[i].detail) + 24
		if recs[i].lease != nil {
			n += len(recs[i].lease.detail) + 40
		}
	}
	return n + s.leaseBookSizeHint()
}

// appendSnapshot appends the snapshot encoding of s to b.
func (s *state) appendSnapshot(b []byte) []byte {
	start := len(b)
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion)
	b = appendUint64(b, uint64(s.lastNowNanos))
	b = appendUint64(b, s.appliedIndex)

	b = binary.AppendUvarint(b, uint64(len(s.names)))
	for _, name := range s.names {
		l := s.limits[name]
		b = appendBytes(b, l.name)
		b = binary.AppendUvarint(b, l.version)
		b = appendBytes(b, l.cfgBytes)
		b = binary.AppendUvarint(b, l.grantedRequests)
		b = binary.AppendUvarint(b, l.grantedPermits)
		b = binary.AppendUvarint(b, l.refusedRequests)
		stateStart := len(b)
		b = l.pacer.AppendState(b)
		b = insertLen(b, stateStart)
	}

	recs := s.dedup.records()
	b = binary.AppendUvarint(b, uint64(len(recs)))
	var prev int64
	for i := range recs {
		rec := &recs[i]
		b = appendBytes(b, rec.id)
		b = binary.AppendUvarint(b, uint64(rec.recordedAtNanos-prev))
		prev = rec.recordedAtNanos
		if rec.lease != nil {
			b = appendLeaseOutcome(b, rec.lease, rec.recordedAtNanos)
			continue
		}
		b = append(b, byte(rec.status))
		switch rec.status {
		case Granted:
			b = binary.AppendVarint(b, rec.atNanos-rec.recordedAtNanos)
			if rec.expiresAtNanos == 0 {
				b = append(b, 0)
			} else {
				b = append(b, 1)
				b = binary.AppendVarint(b, rec.expiresAtNanos-rec.atNanos)
			}
		case Refused:
			b = binary.AppendVarint(b, rec.atNanos-rec.recordedAtNanos)
		case Invalid:
			b = appendBytes(b, rec.detail)
		}
	}
	b = s.appendLeaseBook(b)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// decodeSnapshot decodes and validates a snapshot. It never panics; every
// error wraps ErrDecode.
func decodeSnapshot(data []byte, dedupWindowNanos int64, maxDedupEntries int) (state, error) {
	r := reader{b: data, what: "snapshot"}
	if len(data) < snapshotHeaderLen+4 {
		r.fail("%d bytes is too short (a snapshot has at least %d)", len(data), snapshotHeaderLen+4)
		return state{}, r.err
	}
	if string(data[:len(snapshotMagic)]) != snapshotMagic {
		r.fail("bad magic %q (want %q): not a permitd FSM snapshot", data[:len(snapshotMagic)], snapshotMagic)
		return state{}, r.err
	}
	if v := data[len(snapshotMagic)]; v != snapshotVersion {
		r.fail("format version %d is not supported (supported: %d)", v, snapshotVersion)
		return state{}, r.err
	}
	body := data[:len(data)-4]
	if want, got := binary.BigEndian.Uint32(data[len(body):]), crc32.Checksum(body, castagnoli); want != got {
		r.fail("checksum mismatch (stored %08x, computed %08x): the snapshot is corrupt", want, got)
		return state{}, r.err
	}
	r.b = body
	r.off = len(snapshotMagic) + 1

	st := newState(dedupWindowNanos, maxDedupEntries)
	st.lastNowNanos = int64(r.uint64BE("last now"))
	st.appliedIndex = r.uint64BE("applied index")
	if st.lastNowNanos < 0 {
		r.fail("last now %d is negative (cluster time starts at 0)", st.lastNowNanos)
	}
	decodeLimits(&r, &st)
	decodeDedup(&r, &st)
	decodeLeaseBook(&r, &st)
	r.end()
	if r.err != nil {
		return state{}, r.err
	}
	if again := st.appendSnapshot(make([]byte, 0, len(data))); !bytes.Equal(again, data) {
		r.fail("not in canonical form (re-encoding the decoded state changes its bytes)")
		return state{}, r.err
	}
	return st, nil
}

func decodeLimits(r *reader, st *state) {
	n := r.uvarint("limit count")
	if r.err == nil && n > uint64(r.remaining()/minLimitRecordLen) {
		r.fail("claims %d limits but only %d bytes remain", n, r.remaining())
	}
	if r.err != nil {
		return
	}
	st.names = make([]string, 0, int(n))
	r.unit = "limit"
	for i := range int(n) {
		r.index = i
		nameBytes := r.bytes("name", MaxNameLen)
		version := r.uvarint("version")
		rawConfig := r.bytes("config", MaxConfigBytes)
		l := &limit{}
		l.grantedRequests = r.uvarint("granted requests")
		l.grantedPermits = r.uvarint("granted permits")
		l.refusedRequests = r.uvarint("refused requests")
		pacerState := r.bytes("pacer state", MaxPacerStateBytes)
		if r.err != nil {
			return
		}
		if err := validateName(nameBytes); err != nil {
			r.fail("%v", err)
			return
		}
		name := string(nameBytes)
		if i > 0 && name <= st.names[i-1] {
			r.fail("name %q does not sort after %q (limits must be sorted by name, without repeats)", name, st.names[i-1])
			return
		}
		cfg, pacer, err := checkConfig(name, rawConfig, 0)
		if err != nil {
			r.fail("%v", err)
			return
		}
		if err := pacer.RestoreState(pacerState); err != nil {
			r.fail("limit %q: pacer state: %v", name, err)
			return
		}
		l.name = name
		l.setConfig(cfg, rawConfig, version, pacer)
		st.limits[name] = l
		st.names = append(st.names, name)
	}
	r.unit = ""
}

func decodeDedup(r *reader, st *state) {
	n := r.uvarint("dedup count")
	if r.err == nil && n > uint64(st.dedup.maxEntries) {
		r.fail("%d request ids (allowed: at most %d)", n, st.dedup.maxEntries)
	}
	if r.err == nil && n > uint64(r.remaining()/minDedupRecordLen) {
		r.fail("claims %d request ids but only %d bytes remain", n, r.remaining())
	}
	if r.err != nil {
		return
	}
	st.dedup.queue = make([]dedupRecord, 0, int(n))
	r.unit = "dedup record"
	var at int64
	for i := range int(n) {
		r.index = i
		id := r.bytes("request id", MaxRequestIDLen)
		delta := r.uvarint("recorded at")
		rec := dedupRecord{}
		var atDelta, expiresDelta int64
		hasExpiry := false
		var lo *leaseOutcome
		rec.status = Status(r.byte1("status"))
		switch rec.status {
		case dedupLeaseTag:
			rec.status = 0
			lo = decodeLeaseOutcome(r)
		case Granted:
			atDelta = r.varint("at")
			switch flag := r.byte1("has expiry"); flag {
			case 0:
			case 1:
				hasExpiry = true
				expiresDelta = r.varint("expires at")
			default:
				r.fail("has-expiry byte %d (allowed: 0, 1)", flag)
			}
		case Refused:
			atDelta = r.varint("at")
		case UnknownLimit:
		case Invalid:
			rec.detail = string(r.bytes("detail", maxDetailBytes))
		default:
			r.fail("status %d (allowed: %d-%d, or %d for a lease command)", rec.status, Granted, Invalid, dedupLeaseTag)
		}
		if r.err != nil {
			return
		}
		if len(id) == 0 {
			r.fail("empty request id")
			return
		}
		if delta > uint64(math.MaxInt64-at) {
			r.fail("recorded-at delta %d overflows int64", delta)
			return
		}
		at += int64(delta)
		if at > st.lastNowNanos || st.lastNowNanos-at >= st.dedup.windowNanos {
			r.fail("recorded at %d, outside the retention window (%d, %d] of last now %d",
				at, st.lastNowNanos-st.dedup.windowNanos, st.lastNowNanos, st.lastNowNanos)
			return
		}
		rec.id = string(id)
		if st.dedup.lookup(rec.id) != nil {
			r.fail("request id %q appears twice", rec.id)
			return
		}
		rec.recordedAtNanos = at
		// Deltas use wrapping arithmetic, the inverse of the encoder's.
		switch rec.status {
		case Granted, Refused:
			rec.atNanos = at + atDelta
		}
		if hasExpiry {
			rec.expiresAtNanos = rec.atNanos + expiresDelta
		}
		if lo != nil {
			if lo.status == LeaseGranted || lo.status == LeaseRefused {
				lo.atNanos += at // stored relative to the record's time
			}
			rec.lease = lo
		}
		st.dedup.add(rec)
	}
	r.unit = ""
}
