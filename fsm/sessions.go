package fsm

import (
	"fmt"
	"slices"
	"time"
)

// Client sessions: exactly-once reserves whose memory is per client, not
// per request (the Raft dissertation's §6.3).
//
// A request ID is remembered for DedupWindowNanos, and the table of IDs
// holds at most MaxDedupEntries: at tens of thousands of reserves per
// second no table of IDs can remember ten minutes of them in bounded
// memory. A session instead remembers, per client, only the answers the
// client has not acknowledged yet:
//
//   - CmdOpenSession opens a session; its ID is the raft index of that
//     entry (unique, never reused).
//   - Every reserve of the session carries (ID, Seq, AckedBelow): the
//     client numbers its requests 1, 2, 3, ..., reuses the number when it
//     retries, and tells the register the lowest number whose answer it
//     has not received (AckedBelow). The register keeps the outcome of
//     every number from AckedBelow on, answers a retry from it
//     (Duplicate), and forgets the outcomes below AckedBelow.
//   - A session that receives no reserve for SessionIdleNanos of cluster
//     time expires. So does the least recently used one when the register
//     would otherwise hold more than MaxSessions sessions or
//     MaxSessionResults outcomes. A reserve of a session that is not open
//     is answered SessionExpired and decides nothing: the register cannot
//     tell whether an earlier copy was decided, but the client never
//     received such a decision, so it opens a new session and asks again
//     as a new request.
//
// A retry is therefore recognised for as long as its session lives — as
// long as its client sends a reserve at least every SessionIdleNanos — in
// memory proportional to the clients' unacknowledged requests (at most
// MaxSessionPending each), never to the request rate.
//
// Sessions, like everything replicated, change only with log entries and
// cluster time: every replica expires and evicts the same sessions at the
// same entry. The table is a list in order of last activity (cluster time
// never decreases in log order, so moving a session to the end keeps the
// order); expiry and eviction pop from its head.

// Bounds of the session table. They are part of the replicated behaviour:
// changing them needs a new EncodingVersion.
const (
	// SessionIdleNanos is how long a session lives without a reserve.
	SessionIdleNanos = int64(10 * time.Minute)
	// MaxSessions is the most sessions open at once.
	MaxSessions = 1 << 16
	// MaxSessionPending is the most outcomes one session keeps (requests
	// from AckedBelow on); a reserve beyond it is Invalid.
	MaxSessionPending = 1 << 14
	// MaxSessionResults is the most outcomes all sessions keep together.
	MaxSessionResults = 1 << 20
)

// SessionResult is the outcome of a CmdOpenSession: the new session's ID
// and how long it lives without a reserve.
type SessionResult struct {
	ID        uint64
	IdleNanos int64
}

// sessionTable holds the open sessions in order of last activity.
type sessionTable struct {
	byID           map[uint64]*session
	oldest, newest *session
	// results is the number of outcomes all sessions keep.
	results int
}

// session is one open client session.
type session struct {
	id              uint64
	lastActiveNanos int64
	// ackedBelow: the client has received every answer below it.
	ackedBelow uint64
	// pending are the outcomes of the requests from ackedBelow on that
	// were decided, by seq ascending.
	pending []sessionOutcome
	// older and newer link the table's activity list.
	older, newer *session
}

// sessionOutcome is the outcome of request seq of a session.
type sessionOutcome struct {
	seq uint64
	outcome
}

func newSessionTable() sessionTable { return sessionTable{byID: make(map[uint64]*session)} }

// len is the number of open sessions.
func (t *sessionTable) len() int { return len(t.byID) }

// open opens session id at nowNanos, evicting the least recently used
// session first if the table is full.
func (t *sessionTable) open(id uint64, nowNanos int64) *session {
	if len(t.byID) >= MaxSessions {
		t.remove(t.oldest)
	}
	s := &session{id: id, lastActiveNanos: nowNanos, ackedBelow: 1}
	t.byID[id] = s
	t.pushNewest(s)
	return s
}

// expire closes every session idle for SessionIdleNanos or more at
// nowNanos. Times are >= 0, so the subtraction cannot overflow.
func (t *sessionTable) expire(nowNanos int64) {
	for t.oldest != nil && nowNanos-t.oldest.lastActiveNanos >= SessionIdleNanos {
		t.remove(t.oldest)
	}
}

// remove closes s.
func (t *sessionTable) remove(s *session) {
	t.unlink(s)
	delete(t.byID, s.id)
	t.results -= len(s.pending)
}

func (t *sessionTable) unlink(s *session) {
	if s.older != nil {
		s.older.newer = s.newer
	} else {
		t.oldest = s.newer
	}
	if s.newer != nil {
		s.newer.older = s.older
	} else {
		t.newest = s.older
	}
	s.older, s.newer = nil, nil
}

func (t *sessionTable) pushNewest(s *session) {
	s.older = t.newest
	if t.newest != nil {
		t.newest.newer = s
	} else {
		t.oldest = s
	}
	t.newest = s
}

// touch records activity of s at nowNanos (>= every lastActiveNanos in
// the table: cluster time never decreases in log order).
func (t *sessionTable) touch(s *session, nowNanos int64) {
	s.lastActiveNanos = nowNanos
	if t.newest != s {
		t.unlink(s)
		t.pushNewest(s)
	}
}

// ack forgets the outcomes of s below ackedBelow (acknowledgements only
// move forward: an older one, arriving late, changes nothing).
func (t *sessionTable) ack(s *session, ackedBelow uint64) {
	if ackedBelow <= s.ackedBelow {
		return
	}
	s.ackedBelow = ackedBelow
	i, _ := slices.BinarySearchFunc(s.pending, ackedBelow, cmpSeq)
	clear(s.pending[:i])
	s.pending = s.pending[i:]
	t.results -= i
}

func cmpSeq(o sessionOutcome, seq uint64) int { return cmpUint64(o.seq, seq) }

// lookup returns the outcome of request seq of s, or nil.
func (s *session) lookup(seq uint64) *outcome {
	if i, ok := slices.BinarySearchFunc(s.pending, seq, cmpSeq); ok {
		return &s.pending[i].outcome
	}
	return nil
}

// record keeps the outcome of request seq of s (not yet recorded, >=
// ackedBelow), then evicts least recently used sessions other than s
// while the table keeps more than MaxSessionResults outcomes.
func (t *sessionTable) record(s *session, seq uint64, o outcome) {
	i, _ := slices.BinarySearchFunc(s.pending, seq, cmpSeq)
	s.pending = slices.Insert(s.pending, i, sessionOutcome{seq: seq, outcome: o})
	t.results++
	for t.results > MaxSessionResults && t.oldest != s {
		t.remove(t.oldest)
	}
}

// reserveInSession decides reserve r of a session at nowNanos: SessionExpired
// if the session is not open, Invalid if its seq was acknowledged or the
// session keeps too many outcomes, the recorded outcome for a retry, or a
// new decision, which is recorded.
func (s *state) reserveInSession(nowNanos int64, r *Reserve) ReserveResult {
	ref := r.Session
	sess := s.sessions.byID[ref.ID]
	if sess == nil {
		o := outcome{status: SessionExpired, detail: boundDetail(fmt.Sprintf(
			"session %d is not open (it expired after %v without a reserve, was evicted, or never existed): open a new session and send the request again as a new one",
			ref.ID, time.Duration(SessionIdleNanos)))}
		return o.resultAt(nowNanos, false)
	}
	s.sessions.touch(sess, nowNanos)
	s.sessions.ack(sess, ref.AckedBelow)
	if ref.Seq < sess.ackedBelow {
		o := outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
			"session %d: request %d was already acknowledged (the client said it received every answer below %d): a retry must not acknowledge its own request",
			ref.ID, ref.Seq, sess.ackedBelow))}
		return o.resultAt(nowNanos, false)
	}
	if o := sess.lookup(ref.Seq); o != nil {
		return o.resultAt(nowNanos, true)
	}
	if len(sess.pending) >= MaxSessionPending {
		o := outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
			"session %d keeps %d unacknowledged answers (allowed: at most %d): acknowledge answers (acked below) or open another session",
			ref.ID, len(sess.pending), MaxSessionPending))}
		return o.resultAt(nowNanos, false)
	}
	o := s.decide(nowNanos, r)
	s.sessions.record(sess, ref.Seq, o)
	return o.resultAt(nowNanos, false)
}

// SessionCount returns how many client sessions are open and how many
// outcomes they keep.
func (f *FSM) SessionCount() (sessions, outcomes int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.sessions.len(), f.st.sessions.results
}
