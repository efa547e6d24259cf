package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/permitd/permitd/bucket"
)

// snapshot.go: the snapshot's layout, its header and limits, and how the
// whole is encoded and checked (the other sections are in
// dedupsnapshot.go, sessionsnapshot.go, leasesnapshot.go and
// reservationsnapshot.go).
//
// Snapshot layout (format version 11; version 10 repeated each limit's
// config in its record, version 9 had no templates,
// version 8 had no creation index,
// shadow grant, expiry, refund and charge counters, version 7 no session
// owners, version 6 no refund marks, version 5 no shadow mode, pacer
// change counts or reservations; versions 1 to 4, never released, had no
// sessions, one table for every request ID, outcomes without spacing and
// replay expiry, and leases without a mint mark). Every replica that
// applied the same log produces the same bytes:
//
//	magic          "PRMTFSM" (7 bytes) then format version byte 11
//	lastNowNanos   int64 big-endian
//	appliedIndex   uint64 big-endian
//	templates      uvarint count (<= MaxTemplates), then per template,
//	               sorted by prefix (strictly ascending): prefix, byte
//	               active (0: deleted, kept for its live keys; 1), config
//	               (uvarint length + bytes), uvarint idle nanos, uvarint
//	               max keys (template.go)
//	configs        uvarint count, then per config uvarint length +
//	               bucket.Config.AppendBinary bytes: every config a limit
//	               runs, once, in the order the limits (by name) first run
//	               them (each distinct, each run by a limit)
//	limit count    uvarint, then per limit, sorted by name (strictly ascending):
//	    name            uvarint length + bytes
//	    version         uvarint (raft index of its put)
//	    config          uvarint index into configs (at most the number of
//	                    configs earlier limits run: a limit running a new
//	                    config runs the next one)
//	    counters        uvarint grantedRequests, grantedPermits, refusedRequests
//	    pacer state     uvarint length + bucket.Pacer.AppendState bytes
//	    pacer identity  uvarint born index, uvarint change count
//	    shadow          byte (0 or 1), uvarint would-refuse, would-wait
//	    more counters   uvarint created index (<= born index), shadow
//	                    grants (>= would-refuse + would-wait, <= granted
//	                    requests), expired requests (<= granted requests),
//	                    expired permits (<= granted permits), refunded
//	                    permits (<= granted permits), charged permits
//	    refund marks    uvarint marks-from change count (<= change count),
//	                    varint the latest served time (0 unless the pacer
//	                    is a bucket.Refunder, else >= 0),
//	                    uvarint count (<= maxRefundMarks; 0 unless the pacer
//	                    is a bucket.Refunder), then per mark uvarint change
//	                    count and uvarint slack, both strictly ascending,
//	                    change counts in (marks-from, change count], slacks
//	                    <= the config's MaxStoredNanos (settle.go, "Late refunds")
//	    templated       byte 0 (an explicit limit), or 1 then varint touch
//	                    time (0..lastNow) and varint due time (>= 0): a
//	                    key of the template its name's prefix names
//	reserve ids    uvarint count (<= MaxDedupEntries), then per request id,
//	               oldest first (the eviction order):
//	    id              uvarint length + bytes (1..MaxRequestIDLen)
//	    recorded at     uvarint, delta from the previous record's time (the
//	                    first: from 0), so times never decrease
//	    outcome         see below, times relative to recorded at
//	lease ids      uvarint count (<= MaxLeaseDedupEntries), then per id, as
//	               above but with a lease outcome: op byte (CmdLease,
//	               CmdRenew, CmdReturn), LeaseStatus byte, then
//	      Granted:      uvarint lease id, epoch, permits, share, credited,
//	                    varint expiresAt-recordedAt
//	      Refused:      uvarint lease id, epoch, varint at-recordedAt, detail
//	      Invalid, Fenced: detail
//	      Returned:     uvarint lease id, epoch, credited
//	sessions       uvarint count (<= MaxSessions), then per session, least
//	               recently active first:
//	    id              uvarint (unique, <= appliedIndex)
//	    owner           uvarint length + bytes (0..MaxOwnerLen)
//	    per owner       uvarint (0..MaxSessions; 0: no quota)
//	    last active     uvarint, delta from the previous session's (the
//	                    first: from 0), within SessionIdleNanos of lastNow
//	    acked below     uvarint (>= 1)
//	    outcome count   uvarint (<= MaxSessionPending), then per outcome,
//	                    by seq strictly ascending:
//	        seq             uvarint delta from the previous (the first:
//	                        from acked below)
//	        outcome         see below, times relative to last active
//	lease book     see leasesnapshot.go
//	reservations   see reservationsnapshot.go
//	crc32          Castagnoli checksum of every preceding byte, big-endian
//
// A reserve outcome is a status byte (Granted, Refused, UnknownLimit,
// Invalid; the others are never recorded), then
//
//	Granted:  varint at, uvarint spacing, byte flags (1: has an expiry,
//	          2: the expiry is for replays only, 4: has a reservation,
//	          8: the reservation holds in-flight permits, 16: with 8 and
//	          1, its holds' end is not its expiry),
//	          if it has an expiry: varint expiresAt-at; if it has a
//	          reservation: uvarint its id; with flag 16: varint
//	          holdEnd-expiresAt (> 0). With 8 and without 16 the holds'
//	          end is the expiry (a snapshot from before flag 16 decodes
//	          so: never later than the holds' real end)
//	Refused:  varint at; with status byte | 0x80: the blocking limit's
//	          name
//	UnknownLimit: nothing; with status byte | 0x80: detail
//	Invalid:  detail, uvarint length + bytes
//
// Varints are in shortest form; signed deltas use wrapping arithmetic, so
// they round-trip any int64. Restore accepts only a snapshot that re-encodes
// to exactly its own bytes.

const (
	snapshotMagic   = "PRMTFSM"
	snapshotVersion = 11
	// snapshotHeaderLen is magic, version, lastNowNanos and appliedIndex.
	snapshotHeaderLen = len(snapshotMagic) + 1 + 8 + 8
	// MaxPacerStateBytes bounds one pacer's encoded state in a snapshot.
	// (A concurrency limit's holds make the largest: 16 bytes per hold.)
	MaxPacerStateBytes = 1 << 25
	// minLimitRecordLen and minDedupRecordLen are the smallest encodings of
	// a limit and a dedup record; they bound preallocation for claimed
	// counts. (A limit's record is 20 fields of at least a byte each.)
	minLimitRecordLen = 20
	minDedupRecordLen = 4
	// snapshotChunk is how many bytes the encoder gathers before it
	// hands them on (encodeSnapshot).
	snapshotChunk = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errNotCanonical stops the re-encoding of a restored state at its first
// byte that differs from the snapshot's.
var errNotCanonical = errors.New("fsm: not in canonical form")

// snapshotSizeHint estimates the size of the snapshot encoding, to size its
// buffer in one allocation.
func (s *state) snapshotSizeHint() int {
	// A limit's record is its name and about 40 bytes (60 for a
	// templated key); a hint need not walk them.
	n := snapshotHeaderLen + 16 + 80*s.names.len()
	for _, t := range []*dedupTable{&s.dedup, &s.leaseDedup} {
		recs := t.records()
		for i := range recs {
			n += len(recs[i].id) + len(recs[i].detail) + 32
			if recs[i].lease != nil {
				n += len(recs[i].lease.detail) + 40
			}
		}
	}
	for sess := s.sessions.oldest(); sess != nil; sess = sess.newer() {
		n += 32 + len(sess.owner.name) + 32*len(sess.pending)
		for i := range sess.pending {
			n += len(sess.pending[i].detail)
		}
	}
	return n + s.leaseBookSizeHint() + s.reservationsSizeHint()
}

// appendSnapshot appends the snapshot encoding of s to b.
func (s *state) appendSnapshot(b []byte) []byte {
	_ = s.encodeSnapshot(func(p []byte) error {
		b = append(b, p...)
		return nil
	})
	return b
}

// encodeSnapshot encodes s, handing the encoding to emit in pieces of
// about snapshotChunk bytes (a limit's record is never split) so that
// its reader (a hash, Restore's check of the canonical form) need not
// hold it whole. It stops calling emit after emit fails, and returns
// that error.
func (s *state) encodeSnapshot(emit func([]byte) error) error {
	e := snapshotEncoder{b: make([]byte, 0, 2*snapshotChunk), emit: emit}
	e.b = append(e.b, snapshotMagic...)
	e.b = append(e.b, snapshotVersion)
	e.b = appendUint64(e.b, uint64(s.lastNowNanos))
	e.b = appendUint64(e.b, s.appliedIndex)
	e.b = s.appendTemplates(e.b)

	limits, confs, index := s.configOrder()
	e.b = binary.AppendUvarint(e.b, uint64(len(confs)))
	for _, c := range confs {
		e.b = appendBytes(e.b, c.raw)
		e.next()
	}
	e.b = binary.AppendUvarint(e.b, uint64(len(limits)))
	for _, l := range limits {
		e.b = s.appendLimit(e.b, l, index[l.conf])
		e.next()
	}

	e.b = appendDedup(e.b, &s.dedup)
	e.next()
	e.b = appendDedup(e.b, &s.leaseDedup)
	e.next()
	e.b = s.appendSessions(e.b)
	e.next()
	e.b = s.appendLeaseBook(e.b)
	e.b = s.appendReservations(e.b)
	e.flush()
	if e.err == nil {
		e.err = emit(binary.BigEndian.AppendUint32(e.b, e.crc))
	}
	return e.err
}

// configOrder returns the limits in name order, the configs they run in
// the order they first run them, and each config's place in that order.
func (s *state) configOrder() ([]*limit, []*limitConfig, map[*limitConfig]uint64) {
	limits := make([]*limit, 0, s.names.len())
	var confs []*limitConfig
	index := make(map[*limitConfig]uint64)
	s.names.each(func(l *limit) bool {
		limits = append(limits, l)
		if _, ok := index[l.conf]; !ok {
			index[l.conf] = uint64(len(confs))
			confs = append(confs, l.conf)
		}
		return true
	})
	return limits, confs, index
}

// snapshotEncoder gathers a snapshot's bytes in b and hands them to emit
// once there are snapshotChunk of them, keeping their checksum.
type snapshotEncoder struct {
	b    []byte
	crc  uint32
	emit func([]byte) error
	err  error
}

// next hands the gathered bytes on if there are enough of them.
func (e *snapshotEncoder) next() {
	if len(e.b) >= snapshotChunk {
		e.flush()
	}
}

// flush hands the gathered bytes on.
func (e *snapshotEncoder) flush() {
	e.crc = crc32.Update(e.crc, castagnoli, e.b)
	if e.err == nil {
		e.err = e.emit(e.b)
	}
	e.b = e.b[:0]
}

// appendLimit appends limit l's record, l running config number conf of
// the snapshot's configs.
func (s *state) appendLimit(b []byte, l *limit, conf uint64) []byte {
	b = appendBytes(b, l.name)
	b = binary.AppendUvarint(b, l.version)
	b = binary.AppendUvarint(b, conf)
	b = binary.AppendUvarint(b, l.grantedRequests)
	b = binary.AppendUvarint(b, l.grantedPermits)
	b = binary.AppendUvarint(b, l.refusedRequests)
	stateStart := len(b)
	b = l.pacer.AppendState(b)
	b = insertLen(b, stateStart)
	b = binary.AppendUvarint(b, l.bornIndex)
	b = binary.AppendUvarint(b, l.seq)
	t := l.tally()
	b = append(b, boolByte(l.shadow))
	b = binary.AppendUvarint(b, t.shadowRefused)
	b = binary.AppendUvarint(b, t.shadowWaited)
	for _, c := range [...]uint64{l.createdIndex, t.shadowGranted, t.expiredRequests, t.expiredPermits, t.refundedPermits, t.chargedPermits} {
		b = binary.AppendUvarint(b, c)
	}
	b = binary.AppendUvarint(b, l.marksFromSeq)
	b = binary.AppendVarint(b, l.lastServedNanos)
	b = binary.AppendUvarint(b, uint64(len(l.refundMarks)))
	for _, m := range l.refundMarks {
		b = binary.AppendUvarint(b, m.afterSeq)
		b = binary.AppendUvarint(b, uint64(m.slackNanos))
	}
	if !l.templated() {
		b = append(b, 0)
	} else {
		k := s.keyOf(l)
		b = append(b, 1)
		b = binary.AppendVarint(b, k.touchedAtNanos)
		b = binary.AppendVarint(b, k.dueAtNanos)
	}
	return b
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
	decodeTemplates(&r, &st)
	confs := decodeConfigs(&r, &st)
	decodeLimits(&r, &st, confs)
	decodeDedup(&r, &st, &st.dedup, false)
	decodeDedup(&r, &st, &st.leaseDedup, true)
	decodeSessions(&r, &st)
	decodeLeaseBook(&r, &st)
	decodeReservations(&r, &st)
	checkTemplatedKeys(&r, &st)
	r.end()
	if r.err != nil {
		return state{}, r.err
	}
	off := 0
	err := st.encodeSnapshot(func(p []byte) error {
		if len(p) > len(data)-off || !bytes.Equal(p, data[off:off+len(p)]) {
			return errNotCanonical
		}
		off += len(p)
		return nil
	})
	if err != nil || off != len(data) {
		r.fail("not in canonical form (re-encoding the decoded state changes its bytes)")
		return state{}, r.err
	}
	return st, nil
}

// snapshotConfig is a config of the snapshot's table as Restore reads
// it: shared by the limits that run it, and how many do.
type snapshotConfig struct {
	conf *limitConfig
	runs int
}

// decodeConfigs reads the snapshot's configs, each decoded and compiled
// once and acquired (once, by the table) in st's config table.
func decodeConfigs(r *reader, st *state) []snapshotConfig {
	n := r.uvarint("config count")
	if r.err == nil && n > uint64(r.remaining()) {
		r.fail("claims %d configs but only %d bytes remain", n, r.remaining())
	}
	if r.err != nil {
		return nil
	}
	// Grown as configs are read, not sized by the claim: a config is
	// bytes enough that a false count fails on truncation first.
	var confs []snapshotConfig
	listed := make(map[*limitConfig]bool)
	r.unit = "config"
	for i := range int(n) {
		r.index = i
		raw := r.bytes("config", MaxConfigBytes)
		if r.err != nil {
			return nil
		}
		c, ok := st.configs.lookup(raw)
		if ok && listed[c] {
			r.fail("repeats an earlier config (configs are listed once each)")
			return nil
		}
		compiled := bucket.Compiled{}
		if ok {
			compiled = c.compiled
		} else {
			var err error
			if compiled, err = bucket.DecodeCompiled(raw); err != nil {
				r.fail("%v", err)
				return nil
			}
		}
		c = st.configs.acquire(raw, compiled)
		confs = append(confs, snapshotConfig{conf: c})
		listed[c] = true
	}
	r.unit = ""
	return confs
}

func decodeLimits(r *reader, st *state, confs []snapshotConfig) {
	n := r.uvarint("limit count")
	if r.err == nil && n > uint64(r.remaining()/minLimitRecordLen) {
		r.fail("claims %d limits but only %d bytes remain", n, r.remaining())
	}
	if r.err != nil {
		return
	}
	st.limits = make(map[string]*limit, n) // no growth step while restoring
	r.unit = "limit"
	prev, seen := "", 0
	for i := range int(n) {
		r.index = i
		nameBytes := r.bytes("name", MaxNameLen)
		version := r.uvarint("version")
		confIndex := r.uvarint("config")
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
		if i > 0 && name <= prev {
			r.fail("name %q does not sort after %q (limits must be sorted by name, without repeats)", name, prev)
			return
		}
		prev = name
		if confIndex > uint64(seen) || confIndex >= uint64(len(confs)) {
			r.fail("runs config %d (allowed: one of the %d configs earlier limits run, or the next one of the %d)", confIndex, seen, len(confs))
			return
		}
		if confIndex == uint64(seen) {
			seen++
		}
		sc := &confs[confIndex]
		sc.runs++
		conf := sc.conf
		conf.refs++
		cfg, pacer := conf.cfg, conf.compiled.NewPacer(0)
		if err := pacer.RestoreState(pacerState); err != nil {
			r.fail("limit %q: pacer state: %v", name, err)
			return
		}
		l.bornIndex = r.uvarint("born index")
		l.seq = r.uvarint("change count")
		l.shadow = r.bool1("shadow")
		var t tallies
		t.shadowRefused = r.uvarint("shadow would-refuse")
		t.shadowWaited = r.uvarint("shadow would-wait")
		decodeMoreCounters(r, l, &t)
		if t != (tallies{}) {
			l.rare = &t
		}
		decodeRefundMarks(r, l, pacer, cfg)
		decodeTemplatedKey(r, st, l, name)
		if r.err != nil {
			return
		}
		l.name = name
		l.setConfig(st.configs, conf, version, pacer)
		st.limits[name] = l
		st.names.insert(l)
		if l.shadow {
			st.shadows.insert(l)
		}
		if !l.templated() {
			st.countExplicit(l, true)
		}
	}
	r.unit = ""
	if seen < len(confs) {
		r.fail("config %d is run by no limit (the configs are those the limits run)", seen)
		return
	}
	for _, c := range confs {
		st.configs.release(c.conf) // the table's own hold
	}
}

// decodeMoreCounters reads the counters that follow the shadow ones and
// checks them against the others (limit.go): only a limit's own grants are
// shadow grants, expired or refunded.
func decodeMoreCounters(r *reader, l *limit, t *tallies) {
	l.createdIndex = r.uvarint("created index")
	t.shadowGranted = r.uvarint("shadow grants")
	t.expiredRequests = r.uvarint("expired requests")
	t.expiredPermits = r.uvarint("expired permits")
	t.refundedPermits = r.uvarint("refunded permits")
	t.chargedPermits = r.uvarint("charged permits")
	switch {
	case r.err != nil:
	case l.createdIndex > l.bornIndex:
		r.fail("created index %d is after the pacer's born index %d", l.createdIndex, l.bornIndex)
	case t.shadowGranted > l.grantedRequests || t.shadowRefused > t.shadowGranted || t.shadowWaited > t.shadowGranted-t.shadowRefused:
		r.fail("shadow counters (%d granted, %d would refuse, %d would wait) do not fit in %d granted requests",
			t.shadowGranted, t.shadowRefused, t.shadowWaited, l.grantedRequests)
	case t.expiredRequests > l.grantedRequests || t.expiredPermits > l.grantedPermits:
		r.fail("%d expired requests of %d permits exceed the %d granted of %d permits",
			t.expiredRequests, t.expiredPermits, l.grantedRequests, l.grantedPermits)
	case t.refundedPermits > l.grantedPermits:
		r.fail("%d refunded permits exceed the %d granted", t.refundedPermits, l.grantedPermits)
	}
}

// decodeRefundMarks reads limit l's refund marks (settle.go, "Late
// refunds") and checks them against its change count and its pacer.
func decodeRefundMarks(r *reader, l *limit, pacer bucket.Pacer, cfg bucket.Config) {
	l.marksFromSeq = r.uvarint("refund marks' start")
	l.lastServedNanos = r.varint("latest served time")
	n := r.uvarint("refund marks")
	if r.err != nil {
		return
	}
	_, refunder := pacer.(bucket.Refunder)
	switch {
	case l.lastServedNanos < 0 || (l.lastServedNanos != 0 && !refunder):
		r.fail("latest served time %d (allowed: 0, or a time >= 0 for an algorithm that takes late refunds)", l.lastServedNanos)
		return
	case l.marksFromSeq > l.seq:
		r.fail("refund marks start at change count %d, after the pacer's %d", l.marksFromSeq, l.seq)
		return
	case n > maxRefundMarks || (n > 0 && !refunder):
		r.fail("%d refund marks (allowed: at most %d, and none unless the algorithm takes late refunds)", n, maxRefundMarks)
		return
	}
	prevSeq, prevSlack := l.marksFromSeq, int64(-1)
	for range n {
		m := refundMark{afterSeq: r.uvarint("refund mark's change count")}
		slack := r.uvarint("refund mark's slack")
		if r.err != nil {
			return
		}
		if m.afterSeq <= prevSeq || m.afterSeq > l.seq || slack > uint64(cfg.MaxStoredNanos) || int64(slack) <= prevSlack {
			r.fail("refund mark (change count %d, slack %d) out of order or range (change counts strictly ascending in (%d, %d], slacks strictly ascending up to %d)",
				m.afterSeq, slack, l.marksFromSeq, l.seq, cfg.MaxStoredNanos)
			return
		}
		m.slackNanos = int64(slack)
		prevSeq, prevSlack = m.afterSeq, m.slackNanos
		l.refundMarks = append(l.refundMarks, m)
	}
}
