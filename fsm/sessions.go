package fsm

import (
	"fmt"
	"time"
)

// sessions.go: client sessions, exactly-once reserves whose memory is per
// client, not per request (the Raft dissertation's §6.3): the model, the
// bounds, and how Apply opens a session and decides a reserve in one. The
// table that keeps them is in sessiontable.go, its snapshot section in
// sessionsnapshot.go.
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
//     time expires, and only then is it closed: a session is live while
//     it is used, whatever other clients do. A reserve of a session that
//     is not open is answered SessionExpired and decides nothing: the
//     register cannot tell whether an earlier copy was decided, but the
//     client never received such a decision, so it opens a new session
//     and asks again as a new request.
//   - A session belongs to its owner (OpenSession.Owner, the API token's
//     name; empty without tokens), and only reserves carrying that owner
//     (Reserve.Owner) may use it. Session IDs are raft indexes, easy to
//     guess: a reserve of another owner's session is answered exactly as
//     if the session were not open (SessionExpired), and reads, records,
//     acknowledges and touches nothing, so no client can read another's
//     answers, plant an answer under a number the owner will use next,
//     drop the owner's answers by acknowledging them, or keep its session
//     alive.
//
// A retry is therefore recognised for as long as its session lives — as
// long as its client sends a reserve at least every SessionIdleNanos — in
// memory proportional to the clients' unacknowledged requests, never to
// the request rate.
//
// # Bounds, and who pays for them
//
// The table holds at most MaxSessions sessions and MaxSessionResults
// outcomes, one session at most MaxSessionPending. A bound is never kept
// by closing a live session (that would make another client's retry be
// decided twice): what does not fit is refused, and the refusal decides
// nothing and records nothing.
//
//   - An open when the table is full is refused (SessionResult.ID 0) with
//     RetryAfterNanos: until the least recently used session expires, the
//     earliest a slot can free.
//   - An open whose owner (OpenSession.Owner, the API token's name) holds
//     OpenSession.PerOwner sessions is refused the same way, until the
//     owner's least recently used session expires. One token thus holds
//     at most PerOwner/MaxSessions of the table, and cannot fill it for
//     everyone.
//   - A reserve whose outcome cannot be recorded is answered without
//     being decided: Invalid when its own session keeps MaxSessionPending
//     outcomes (acknowledging them makes room); Busy when all sessions
//     keep MaxSessionResults, or the sessions of its owner keep PerOwner ×
//     SessionResultsPerSession (their owner's share of the outcomes), with
//     RetryAfterNanos until the least recently used session that keeps
//     outcomes (of all, or of the owner) expires. The session is still
//     touched (its client is alive) and its acknowledgement applied
//     (which may be what makes room), so its earlier outcomes stay.

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
	// SessionResultsPerSession is MaxSessionResults / MaxSessions: an
	// owner allowed PerOwner sessions keeps at most PerOwner times this
	// many outcomes, the same share of both tables.
	SessionResultsPerSession = MaxSessionResults / MaxSessions
)

// OpenSession opens a client session. Owner (at most MaxOwnerLen bytes,
// may be empty) is who opens it: the API token's name when tokens are
// on. PerOwner, when not 0 (at most MaxSessions), is the owner's quota:
// the open is refused while Owner already holds PerOwner open sessions,
// and a reserve of the session is refused (Busy) while Owner's sessions
// keep PerOwner × SessionResultsPerSession outcomes. The node that
// accepts the open puts both in the command, so every replica decides
// the same.
type OpenSession struct {
	Owner    string
	PerOwner int
}

// SessionResult is the outcome of a CmdOpenSession: the new session's ID
// and how long it lives without a reserve, or a refusal (ID 0).
type SessionResult struct {
	// ID is the new session's ID (the entry's index); 0 when the open was
	// refused and nothing was opened.
	ID        uint64
	IdleNanos int64
	// RetryAfterNanos (refused, >= 1) is when a slot frees at the
	// earliest: when the least recently used session (of the owner, for
	// a quota) expires, if no reserve keeps it alive meanwhile.
	RetryAfterNanos int64
	// Detail (refused) says which bound refused the open.
	Detail string
}

// openSession applies a CmdOpenSession at index and nowNanos.
func (s *state) openSession(index uint64, nowNanos int64, o *OpenSession) SessionResult {
	if res, ok := s.sessions.refuseOpen(nowNanos, o); !ok {
		return res
	}
	s.sessions.open(index, nowNanos, o)
	return SessionResult{ID: index, IdleNanos: SessionIdleNanos}
}

// reserveInSession decides reserve r of a session at nowNanos:
// SessionExpired if the session is not open or another owner's, Invalid
// if its seq was acknowledged or the session keeps too many outcomes, Busy
// if the table or the owner's share keeps too many, the recorded outcome
// for a retry, or a new decision, which is recorded. Only a new decision
// changes anything but the session's activity and acknowledgement; a
// reserve of another owner's session changes nothing at all.
func (s *state) reserveInSession(nowNanos int64, r *Reserve) ReserveResult {
	ref := r.Session
	sess := s.sessions.byID[ref.ID]
	if sess == nil || sess.owner.name != r.Owner {
		// The same answer for both, so that a client learns nothing of
		// other clients' sessions (their IDs are raft indexes, easy to
		// guess): not whether one is open, nor any of its answers.
		o := outcome{status: SessionExpired, detail: boundDetail(fmt.Sprintf(
			"session %d is not open for this client (it expired after %v without a reserve, never existed, or was opened with another API token): open a new session and send the request again as a new one",
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
	if o, detail, ok := s.sessions.refuseRecord(nowNanos, sess); !ok {
		res := o.resultAt(nowNanos, false)
		res.Detail = boundDetail(detail)
		return res
	}
	o := s.decide(nowNanos, r)
	if o.status != KeysFull {
		// (KeysFull decides nothing: a retry is decided afresh.)
		s.sessions.record(sess, ref.Seq, o)
	}
	return o.resultAt(nowNanos, false)
}

// SessionCount returns how many client sessions are open and how many
// outcomes they keep.
func (f *FSM) SessionCount() (sessions, outcomes int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.sessions.len(), f.st.sessions.results
}
