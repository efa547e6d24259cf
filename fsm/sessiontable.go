package fsm

import (
	"fmt"
	"slices"
	"time"
)

// sessiontable.go: the table of open sessions (sessions.go).
//
// Sessions, like everything replicated, change only with log entries and
// cluster time: every replica expires the same sessions and refuses the
// same opens at the same entry. Each session is on up to four lists in
// order of last activity (cluster time never decreases in log order, so
// moving a session to the end keeps the order): all sessions, its owner's,
// and the same two restricted to sessions that keep outcomes. Expiry pops
// from the head of the first; each refusal's retry time is the head of
// one of them.

// The lists a session is on (indexes of session.links).
const (
	listAll          = iota // every session
	listOwner               // its owner's sessions
	listKeeping             // sessions that keep outcomes
	listOwnerKeeping        // its owner's sessions that keep outcomes
	numSessionLists
)

// sessionList is a list of sessions in order of last activity.
type sessionList struct {
	oldest, newest *session
}

// sessionLinks are a session's neighbours on one list.
type sessionLinks struct {
	older, newer *session
}

// push appends s (not on list k) at the newest end of l, list k.
func (l *sessionList) push(s *session, k int) {
	s.links[k] = sessionLinks{older: l.newest}
	if l.newest != nil {
		l.newest.links[k].newer = s
	} else {
		l.oldest = s
	}
	l.newest = s
}

// unlink removes s from l, list k.
func (l *sessionList) unlink(s *session, k int) {
	ln := s.links[k]
	if ln.older != nil {
		ln.older.links[k].newer = ln.newer
	} else {
		l.oldest = ln.newer
	}
	if ln.newer != nil {
		ln.newer.links[k].older = ln.older
	} else {
		l.newest = ln.older
	}
	s.links[k] = sessionLinks{}
}

// moveNewest moves s (on list k) to the newest end of l.
func (l *sessionList) moveNewest(s *session, k int) {
	if l.newest != s {
		l.unlink(s, k)
		l.push(s, k)
	}
}

// sessionOwner is what the table keeps per owner: its sessions, their
// outcomes, and its two lists.
type sessionOwner struct {
	name              string
	sessions, results int
	all, keeping      sessionList
}

// sessionTable holds the open sessions.
type sessionTable struct {
	// maxSessions and maxResults are MaxSessions and MaxSessionResults,
	// except in tests.
	maxSessions, maxResults int
	byID                    map[uint64]*session
	owners                  map[string]*sessionOwner
	all, keeping            sessionList
	// results is the number of outcomes all sessions keep.
	results int
}

// session is one open client session.
type session struct {
	id       uint64
	owner    *sessionOwner
	perOwner int
	// lastActiveNanos is the time of its opening or of its latest reserve.
	lastActiveNanos int64
	// ackedBelow: the client has received every answer below it.
	ackedBelow uint64
	// pending are the outcomes of the requests from ackedBelow on that
	// were decided, by seq ascending.
	pending []sessionOutcome
	links   [numSessionLists]sessionLinks
}

// sessionOutcome is the outcome of request seq of a session.
type sessionOutcome struct {
	seq uint64
	outcome
}

func newSessionTable(maxSessions, maxResults int) sessionTable {
	return sessionTable{maxSessions: maxSessions, maxResults: maxResults,
		byID: make(map[uint64]*session), owners: make(map[string]*sessionOwner)}
}

// len is the number of open sessions.
func (t *sessionTable) len() int { return len(t.byID) }

// oldest is the least recently active session (nil if none).
func (t *sessionTable) oldest() *session { return t.all.oldest }

// newer is the next session in order of activity after s (nil after the
// newest).
func (s *session) newer() *session { return s.links[listAll].newer }

// refuseOpen returns why open o at nowNanos must be refused, or ok: the
// owner's quota is full, or the table is. Expired sessions were closed
// first (Apply), so every session counted is live.
func (t *sessionTable) refuseOpen(nowNanos int64, o *OpenSession) (SessionResult, bool) {
	if own := t.owners[o.Owner]; o.PerOwner > 0 && own != nil && own.sessions >= o.PerOwner {
		// The owner's oldest expiring frees a slot of the table too.
		return openRefusal(nowNanos, own.all.oldest, fmt.Sprintf(
			"owner %q holds %d open sessions, its most (%d sessions per token): a session closes %v after its last reserve; reuse a session, or retry when one expires",
			o.Owner, own.sessions, o.PerOwner, time.Duration(SessionIdleNanos))), false
	}
	if len(t.byID) >= t.maxSessions {
		return openRefusal(nowNanos, t.all.oldest, fmt.Sprintf(
			"the register holds %d open sessions, its most, and closes none while it is used (a session closes %v after its last reserve): retry when one expires, or reserve with a request id",
			len(t.byID), time.Duration(SessionIdleNanos))), false
	}
	return SessionResult{}, true
}

// openRefusal is a refused open, to retry when oldest expires.
func openRefusal(nowNanos int64, oldest *session, detail string) SessionResult {
	return SessionResult{RetryAfterNanos: untilExpiry(nowNanos, oldest), Detail: boundDetail(detail)}
}

// untilExpiry is how long after nowNanos s expires if no reserve touches
// it (>= 1; s is live, so its expiry is after nowNanos).
func untilExpiry(nowNanos int64, s *session) int64 {
	return max(1, s.lastActiveNanos+SessionIdleNanos-nowNanos)
}

// open opens session id for o at nowNanos (refuseOpen said ok).
func (t *sessionTable) open(id uint64, nowNanos int64, o *OpenSession) *session {
	own := t.owners[o.Owner]
	if own == nil {
		own = &sessionOwner{name: o.Owner}
		t.owners[o.Owner] = own
	}
	s := &session{id: id, owner: own, perOwner: o.PerOwner, lastActiveNanos: nowNanos, ackedBelow: 1}
	t.insert(s)
	return s
}

// insert adds s, with its outcomes, at the newest end of its lists.
func (t *sessionTable) insert(s *session) {
	own := s.owner
	t.byID[s.id] = s
	t.all.push(s, listAll)
	own.all.push(s, listOwner)
	own.sessions++
	if n := len(s.pending); n > 0 {
		t.keeping.push(s, listKeeping)
		own.keeping.push(s, listOwnerKeeping)
		t.results += n
		own.results += n
	}
}

// expire closes every session idle for SessionIdleNanos or more at
// nowNanos. Times are >= 0, so the subtraction cannot overflow.
func (t *sessionTable) expire(nowNanos int64) {
	for s := t.all.oldest; s != nil && nowNanos-s.lastActiveNanos >= SessionIdleNanos; s = t.all.oldest {
		t.remove(s)
	}
}

// remove closes s.
func (t *sessionTable) remove(s *session) {
	own := s.owner
	t.all.unlink(s, listAll)
	own.all.unlink(s, listOwner)
	if len(s.pending) > 0 {
		t.keeping.unlink(s, listKeeping)
		own.keeping.unlink(s, listOwnerKeeping)
	}
	delete(t.byID, s.id)
	t.results -= len(s.pending)
	own.results -= len(s.pending)
	if own.sessions--; own.sessions == 0 {
		delete(t.owners, own.name)
	}
}

// touch records activity of s at nowNanos (>= every lastActiveNanos in
// the table: cluster time never decreases in log order).
func (t *sessionTable) touch(s *session, nowNanos int64) {
	s.lastActiveNanos = nowNanos
	t.all.moveNewest(s, listAll)
	s.owner.all.moveNewest(s, listOwner)
	if len(s.pending) > 0 {
		t.keeping.moveNewest(s, listKeeping)
		s.owner.keeping.moveNewest(s, listOwnerKeeping)
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
	if i == 0 {
		return
	}
	clear(s.pending[:i])
	s.pending = s.pending[i:]
	t.results -= i
	s.owner.results -= i
	if len(s.pending) == 0 {
		t.keeping.unlink(s, listKeeping)
		s.owner.keeping.unlink(s, listOwnerKeeping)
	}
}

func cmpSeq(o sessionOutcome, seq uint64) int { return cmpUint64(o.seq, seq) }

// lookup returns the outcome of request seq of s, or nil.
func (s *session) lookup(seq uint64) *outcome {
	if i, ok := slices.BinarySearchFunc(s.pending, seq, cmpSeq); ok {
		return &s.pending[i].outcome
	}
	return nil
}

// refuseRecord returns why a new outcome of s cannot be recorded at
// nowNanos (a Busy outcome and its detail), or ok. s was just touched,
// so it is not what expires first unless it is the only candidate.
func (t *sessionTable) refuseRecord(nowNanos int64, s *session) (outcome, string, bool) {
	if t.results >= t.maxResults {
		return outcome{status: Busy, atNanos: nowNanos + untilExpiry(nowNanos, t.keeping.oldest)}, fmt.Sprintf(
			"session %d: the register's sessions keep %d unacknowledged answers, their most, and forget none a client may still need: acknowledge answers (acked_below), retry later, or reserve with a request id",
			s.id, t.results), false
	}
	own := s.owner
	if quota := s.perOwner * (t.maxResults / t.maxSessions); s.perOwner > 0 && own.results >= quota {
		return outcome{status: Busy, atNanos: nowNanos + untilExpiry(nowNanos, own.keeping.oldest)}, fmt.Sprintf(
			"session %d: the sessions of owner %q keep %d unacknowledged answers, its most (%d for %d sessions per token): acknowledge answers (acked_below), or retry later",
			s.id, own.name, own.results, quota, s.perOwner), false
	}
	return outcome{}, "", true
}

// record keeps the outcome of request seq of s (not yet recorded, >=
// ackedBelow; refuseRecord said ok). s was just touched: it is the most
// recently active session, so it joins the keeping lists at their end.
func (t *sessionTable) record(s *session, seq uint64, o outcome) {
	i, _ := slices.BinarySearchFunc(s.pending, seq, cmpSeq)
	s.pending = slices.Insert(s.pending, i, sessionOutcome{seq: seq, outcome: o})
	t.results++
	s.owner.results++
	if len(s.pending) == 1 {
		t.keeping.push(s, listKeeping)
		s.owner.keeping.push(s, listOwnerKeeping)
	}
}
