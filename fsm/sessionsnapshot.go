package fsm

import "encoding/binary"

// sessionsnapshot.go: the sessions section of the snapshot (see snapshot.go
// for its layout).

// minSessionRecordLen and minSessionOutcomeLen bound preallocation for
// claimed counts: a session is at least its id, owner length, quota, last
// active, acked below and outcome count; an outcome at least a seq delta
// and a status.
const (
	minSessionRecordLen  = 6
	minSessionOutcomeLen = 2
)

// appendSessions appends the open sessions, least recently active first.
func (s *state) appendSessions(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(s.sessions.len()))
	var prevActive int64
	for sess := s.sessions.oldest(); sess != nil; sess = sess.newer() {
		b = binary.AppendUvarint(b, sess.id)
		b = appendBytes(b, sess.owner.name)
		b = binary.AppendUvarint(b, uint64(sess.perOwner))
		b = binary.AppendUvarint(b, uint64(sess.lastActiveNanos-prevActive))
		prevActive = sess.lastActiveNanos
		b = binary.AppendUvarint(b, sess.ackedBelow)
		b = binary.AppendUvarint(b, uint64(len(sess.pending)))
		prevSeq := sess.ackedBelow
		for i := range sess.pending {
			p := &sess.pending[i]
			b = binary.AppendUvarint(b, p.seq-prevSeq)
			prevSeq = p.seq
			b = appendOutcome(b, &p.outcome, sess.lastActiveNanos)
		}
	}
	return b
}

// decodeSessions decodes the sessions section into st, checking every
// bound: unique IDs up to the applied index, owners of at most MaxOwnerLen
// bytes and quotas of at most MaxSessions, activity in non-decreasing
// order and inside the idle window, outcomes by ascending seq from acked
// below, and the table's totals. The owners' counts and lists are
// derived.
func decodeSessions(r *reader, st *state) {
	n := r.uvarint("session count")
	if r.err == nil && n > MaxSessions {
		r.fail("%d sessions (allowed: at most %d)", n, MaxSessions)
	}
	if r.err == nil && n > uint64(r.remaining()/minSessionRecordLen) {
		r.fail("claims %d sessions but only %d bytes remain", n, r.remaining())
	}
	if r.err != nil {
		return
	}
	t := &st.sessions
	r.unit = "session"
	var active int64
	for i := range int(n) {
		r.index = i
		sess := &session{id: r.uvarint("id")}
		owner := r.bytes("owner", MaxOwnerLen)
		sess.perOwner = int(r.uvarintMax("sessions per owner", MaxSessions))
		delta := r.uvarint("last active")
		sess.ackedBelow = r.uvarint("acked below")
		count := r.uvarintMax("outcome count", MaxSessionPending)
		if r.err != nil {
			return
		}
		if delta > uint64(st.lastNowNanos-active) {
			r.fail("last active delta %d passes last now %d", delta, st.lastNowNanos)
			return
		}
		active += int64(delta)
		sess.lastActiveNanos = active
		switch {
		case sess.id == 0 || sess.id > st.appliedIndex || t.byID[sess.id] != nil:
			r.fail("session id %d (allowed: unique, 1 to the applied index %d)", sess.id, st.appliedIndex)
		case st.lastNowNanos-active >= SessionIdleNanos:
			r.fail("session %d last active at %d, idle past %d ns at last now %d", sess.id, active, SessionIdleNanos, st.lastNowNanos)
		case sess.ackedBelow < 1:
			r.fail("session %d acked below 0 (allowed: >= 1)", sess.id)
		case count > uint64(r.remaining()/minSessionOutcomeLen):
			r.fail("session %d claims %d outcomes but only %d bytes remain", sess.id, count, r.remaining())
		}
		if r.err != nil {
			return
		}
		sess.pending = make([]sessionOutcome, 0, int(count))
		seq := sess.ackedBelow
		for j := range int(count) {
			d := r.uvarint("seq")
			if r.err == nil && (d > ^uint64(0)-seq || (j > 0 && d == 0)) {
				r.fail("session %d: outcome %d: seq delta %d (seqs must ascend strictly from acked below %d)", sess.id, j, d, sess.ackedBelow)
			}
			seq += d
			o := decodeOutcome(r, active)
			if r.err != nil {
				return
			}
			sess.pending = append(sess.pending, sessionOutcome{seq: seq, outcome: o})
		}
		own := t.owners[string(owner)]
		if own == nil {
			own = &sessionOwner{name: string(owner)}
			t.owners[own.name] = own
		}
		sess.owner = own
		t.insert(sess)
	}
	if r.err == nil && t.results > MaxSessionResults {
		r.fail("sessions keep %d outcomes (allowed: at most %d)", t.results, MaxSessionResults)
	}
	r.unit = ""
}
