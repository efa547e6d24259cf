package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// The reachable-state walk's client sessions at full tables: opens with
// and without an owner and a per-owner quota, on FSMs whose session table
// is small enough to fill (every fourth seed, from the second), and after
// every step the invariants that no live session was closed and that the
// table's lists and counts agree (checkSessionTable); and reserves of
// sessions sent by other owners than the sessions' (checkSessionUses).

// walkMaxSessions and walkMaxSessionResults bound the session table of
// the walk's small-table seeds.
const (
	walkMaxSessions       = 3
	walkMaxSessionResults = 4
)

func init() {
	walkKinds = append(walkKinds, "open-owned", "open-refused", "open-quota-refused", "session-busy", "session-foreign")
}

// smallSessions reports whether the walk of seed runs an FSM with a small
// session table.
func smallSessions(seed uint64) bool { return seed%4 == 1 }

// walkSessionOwners are the owners the walk's opens name ("": none).
var walkSessionOwners = []string{"", "", "o1", "o2"}

// openSession draws an open: without an owner, or for an owner with a
// quota of one or two sessions, or none.
func (w *walker) openSession() (string, []byte) {
	r := w.rng
	o := OpenSession{Owner: walkSessionOwners[r.IntN(len(walkSessionOwners))]}
	kind := "open-session"
	if o.Owner != "" {
		kind = "open-owned"
		o.PerOwner = r.IntN(3)
	}
	b, err := AppendOpenSessionAs(nil, w.stamp(), o)
	if err != nil {
		w.t.Fatalf("seed %d: %s: encoding failed: %v", w.seed, kind, err)
	}
	return kind, b
}

// observeOpen notes an opened session and names a refusal.
func (w *walker) observeOpen(data []byte, v SessionResult) string {
	e, _ := Decode(data)
	if v.ID != 0 {
		w.sessions = append(w.sessions, walkSession{id: v.ID, nextSeq: 1, acked: 1, owner: e.OpenSession.Owner})
		return ""
	}
	if e.OpenSession.PerOwner > 0 && bytes.Contains([]byte(v.Detail), []byte("per token")) {
		return "open-quota-refused"
	}
	return "open-refused"
}

// walkSessionUse is a reserve of a session in the entry being built: its
// place in the batch, its session, and whether its sender is not the
// session's owner (foreign) or it is the owner's first send of its number
// (fresh).
type walkSessionUse struct {
	i              int
	id             uint64
	foreign, fresh bool
}

// foreignRef is a reserve of ws, at place i of the batch, sent by another
// owner than ws's (another token, or none): of any number, the owner's
// next ones included (an answer planted there would answer the owner's
// request), acknowledging anything up to it (which would drop the
// owner's answers). The walk's idea of ws does not move.
func (w *walker) foreignRef(i int, ws *walkSession) (SessionRef, string) {
	r := w.rng
	owner := ws.owner
	for owner == ws.owner {
		owner = walkForeignOwners[r.IntN(len(walkForeignOwners))]
	}
	seq := 1 + r.Uint64N(ws.nextSeq+2)
	w.uses = append(w.uses, walkSessionUse{i: i, id: ws.id, foreign: true})
	return SessionRef{ID: ws.id, Seq: seq, AckedBelow: 1 + r.Uint64N(seq)}, owner
}

// walkForeignOwners are the owners foreignRef sends as: the walk's
// owners and one that never opens a session.
var walkForeignOwners = []string{"", "o1", "o2", "mallory"}

// walkSessionState is what a session keeps that a reserve could change.
type walkSessionState struct {
	lastActiveNanos int64
	ackedBelow      uint64
	pending         []sessionOutcome
}

// sessionsUsed returns, before the entry is applied, the state of every
// open session that only reserves of other owners use in it.
func (w *walker) sessionsUsed() map[uint64]walkSessionState {
	var out map[uint64]walkSessionState
	for _, u := range w.uses {
		if !u.foreign || slices.ContainsFunc(w.uses, func(o walkSessionUse) bool { return o.id == u.id && !o.foreign }) {
			continue
		}
		if s := w.f.st.sessions.byID[u.id]; s != nil {
			if out == nil {
				out = map[uint64]walkSessionState{}
			}
			out[u.id] = walkSessionState{lastActiveNanos: s.lastActiveNanos, ackedBelow: s.ackedBelow, pending: slices.Clone(s.pending)}
		}
	}
	return out
}

// checkSessionUses checks the answers to the entry's reserves of
// sessions: one sent by another owner than the session's is answered as
// a session not open (SessionExpired, never a replay) and leaves the
// session (before: as sessionsUsed saw it) as it was, unless it expired;
// the owner's first send of a number is never a replay (no other client
// planted an answer under it). It names the step when another owner's
// reserve was refused.
func (w *walker) checkSessionUses(kind string, got any, before map[uint64]walkSessionState) string {
	if len(w.uses) == 0 {
		return ""
	}
	rr, _ := got.([]ReserveResult)
	label := ""
	for _, u := range w.uses {
		if u.i >= len(rr) {
			w.t.Errorf("seed %d: %s: no answer to the reserve of session %d at %d", w.seed, kind, u.id, u.i)
			continue
		}
		res := rr[u.i]
		switch {
		case u.foreign && (res.Status != SessionExpired || res.Duplicate):
			w.t.Errorf("seed %d: %s: another owner's reserve of session %d was answered %+v, want SessionExpired", w.seed, kind, u.id, res)
		case u.foreign:
			label = "session-foreign"
		case u.fresh && res.Duplicate:
			w.t.Errorf("seed %d: %s: the owner's first request under its number in session %d was answered as a replay %+v: another client planted it", w.seed, kind, u.id, res)
		}
	}
	for id, b := range before {
		s := w.f.st.sessions.byID[id]
		if s == nil {
			continue // expired: checkNoLiveSessionClosed checks it was due
		}
		if s.lastActiveNanos != b.lastActiveNanos || s.ackedBelow != b.ackedBelow || !reflect.DeepEqual(s.pending, b.pending) {
			w.t.Errorf("seed %d: %s: reserves of other owners changed session %d: last active %d, acked below %d, %d answers; before %d, %d, %d",
				w.seed, kind, id, s.lastActiveNanos, s.ackedBelow, len(s.pending), b.lastActiveNanos, b.ackedBelow, len(b.pending))
		}
	}
	return label
}

// liveSessions returns the last activity of every open session.
func (w *walker) liveSessions() map[uint64]int64 {
	if w.f.st.sessions.len() == 0 {
		return nil
	}
	live := make(map[uint64]int64, w.f.st.sessions.len())
	for id, s := range w.f.st.sessions.byID {
		live[id] = s.lastActiveNanos
	}
	return live
}

// checkNoLiveSessionClosed checks that every session open before the step
// (live, its last activity) is still open unless it had been idle for
// SessionIdleNanos at the step's cluster time: no client's activity closes
// another client's live session.
func (w *walker) checkNoLiveSessionClosed(kind string, live map[uint64]int64) {
	now := w.f.st.lastNowNanos
	for id, last := range live {
		if now-last < SessionIdleNanos && w.f.st.sessions.byID[id] == nil {
			w.t.Errorf("seed %d: %s: session %d, last active at %d, was closed at %d, %dns before it expires",
				w.seed, kind, id, last, now, last+SessionIdleNanos-now)
		}
	}
}

// sessionLimitStates returns, for an entry carrying one reserve of a
// session, every limit's pacer state and counters (nil otherwise).
func (w *walker) sessionLimitStates(data []byte) map[string]string {
	if CommandType(data[0]) != CmdReserveBatch {
		return nil
	}
	e, err := Decode(data)
	if err != nil || e.Type != CmdReserveBatch || len(e.Reserves) != 1 || e.Reserves[0].Session.ID == 0 {
		return nil
	}
	return w.limitStates()
}

// checkUndecidedChangesNothing checks that a reserve of a session that
// was not decided (a replay, or refused before deciding: Busy, Invalid,
// SessionExpired) left every limit as it was.
func (w *walker) checkUndecidedChangesNothing(kind string, got any, before map[string]string) {
	if before == nil {
		return
	}
	rr := got.([]ReserveResult)[0]
	if !rr.Duplicate && rr.Status != Busy && rr.Status != Invalid && rr.Status != SessionExpired {
		return
	}
	after := w.limitStates()
	for name, b := range before {
		if a, ok := after[name]; ok && a != b {
			w.t.Errorf("seed %d: %s: a session reserve answered %+v changed limit %q", w.seed, kind, rr, name)
		}
	}
}

// limitStates returns every limit's pacer state and counters.
func (w *walker) limitStates() map[string]string {
	states := make(map[string]string, len(w.f.st.limits))
	for name, l := range w.f.st.limits {
		states[name] = fmt.Sprintf("%x %d %d %d", l.pacer.AppendState(nil), l.grantedRequests, l.grantedPermits, l.refusedRequests)
	}
	return states
}

// checkSessionTable checks the session table's invariants: every list in
// order of activity and holding exactly its sessions (all; per owner; those
// keeping outcomes, of all and per owner), the counts and totals, the
// bounds, and that no session is idle past SessionIdleNanos.
func checkSessionTable(t testing.TB, f *FSM) {
	t.Helper()
	st := &f.st.sessions
	if st.len() == 0 && st.oldest() == nil && st.results == 0 && len(st.owners) == 0 && st.keeping == (sessionList{}) {
		return
	}
	now := f.st.lastNowNanos
	type ownerCount struct{ sessions, results, keeping int }
	counts := map[*sessionOwner]*ownerCount{}
	n, results, keeping := 0, 0, 0
	var prev int64
	for s := st.oldest(); s != nil; s = s.newer() {
		n++
		if s.lastActiveNanos < prev || now-s.lastActiveNanos >= SessionIdleNanos || st.byID[s.id] != s {
			t.Fatalf("session %d: last active %d after %d, at %d, in the table: %v", s.id, s.lastActiveNanos, prev, now, st.byID[s.id] == s)
		}
		prev = s.lastActiveNanos
		if len(s.pending) > MaxSessionPending || st.owners[s.owner.name] != s.owner {
			t.Fatalf("session %d keeps %d outcomes, owner %q registered: %v", s.id, len(s.pending), s.owner.name, st.owners[s.owner.name] == s.owner)
		}
		c := counts[s.owner]
		if c == nil {
			c = &ownerCount{}
			counts[s.owner] = c
		}
		c.sessions++
		c.results += len(s.pending)
		results += len(s.pending)
		if len(s.pending) > 0 {
			c.keeping++
			keeping++
		}
	}
	if n != len(st.byID) || n > st.maxSessions || results != st.results || results > st.maxResults || len(counts) != len(st.owners) {
		t.Fatalf("%d sessions listed, %d in the table (at most %d); %d outcomes, %d counted (at most %d); %d owners, %d registered",
			n, len(st.byID), st.maxSessions, results, st.results, st.maxResults, len(counts), len(st.owners))
	}
	checkList(t, "keeping", &st.keeping, listKeeping, keeping, func(s *session) bool { return len(s.pending) > 0 })
	for own, c := range counts {
		if own.sessions != c.sessions || own.results != c.results {
			t.Fatalf("owner %q counts %d sessions and %d outcomes, has %d and %d", own.name, own.sessions, own.results, c.sessions, c.results)
		}
		checkList(t, "owner "+own.name, &own.all, listOwner, c.sessions, func(s *session) bool { return s.owner == own })
		checkList(t, "owner keeping "+own.name, &own.keeping, listOwnerKeeping, c.keeping, func(s *session) bool { return s.owner == own && len(s.pending) > 0 })
	}
}

// checkList checks that list l (list k) holds want sessions, each
// satisfying belongs, in order of activity, linked both ways.
func checkList(t testing.TB, what string, l *sessionList, k, want int, belongs func(*session) bool) {
	t.Helper()
	n := 0
	var older *session
	for s := l.oldest; s != nil; s = s.links[k].newer {
		n++
		if !belongs(s) || s.links[k].older != older || (older != nil && older.lastActiveNanos > s.lastActiveNanos) || n > want {
			t.Fatalf("list %s: session %d does not belong, is out of order or badly linked (entry %d of %d)", what, s.id, n, want)
		}
		older = s
	}
	if n != want || l.newest != older {
		t.Fatalf("list %s holds %d sessions, want %d (newest linked: %v)", what, n, want, l.newest == older)
	}
}
