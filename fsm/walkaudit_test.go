package fsm

import (
	"fmt"

	"github.com/permitd/permitd/bucket"
)

// The reachable-state walk's audit of what the answers promised. After
// every step it checks two things against the answers the walk received,
// never against the FSM's own bookkeeping:
//
//   - Counters agree with the answers: every limit's counters (LimitInfo)
//     equal the walk's tally of the answers to reserves on it since it was
//     created — grants and their permits, refusals, grants made in shadow
//     mode, refunds and charges of settlements, and grants the walk
//     reported as expired before their answer left (CmdExpiredGrants,
//     counted only on the limit that decided them: reports of a limit
//     deleted and created again since, or naming no earlier decision, are
//     ignored).
//   - A replayed grant always expires as promised: a replay of a keyed
//     grant (request ID or session) waits until the first answer's time
//     and expires at the first answer's expiry, or, when the first answer
//     had none (every algorithm but strict, and every grant made in shadow
//     mode), one replay period after its time: the interval, or an
//     in-flight cap's hold TTL, the shortest of the reserve's limits as
//     they were when it was decided. Later replays are answered expired
//     (-1), whatever happened to the limits meanwhile (shadow mode turned
//     off or on, another algorithm, a delete and re-create).
//   - A grant says when its in-flight hold ends: a tracked grant holds
//     (Holds) exactly when an enforced cap among its limits took a part,
//     and its HoldExpiresInNanos, fresh, from a cap's queue or replayed,
//     is the earliest of those caps' holds' end, its time plus the cap's
//     TTL as they were when it was decided, relative to the answer's
//     entry (-1 once passed), whatever the other limits' expiries.

// walkAuditKinds are the step labels the audit adds; the walk must reach
// each of them.
var walkAuditKinds = []string{
	"expired-grants", "expired-counted",
	"replay-shadow", "replay-flipped", "replay-expired", "replay-multi", "replay-in-session",
	"replay-strict", "replay-bursty", "replay-warmup", "replay-hybrid", "replay-concurrency",
	"replay-hold-end",
}

func init() { walkKinds = append(walkKinds, walkAuditKinds...) }

// walkAudit is the audit's memory of one walk.
type walkAudit struct {
	// counters are the tallies of the limits that exist, by name.
	counters map[string]*walkCounters
	// promises are the first decisions of keyed reserves, by key.
	promises map[string]walkPromise
	// grants are recent fresh grants, which the walk may report as
	// expired (once each).
	grants []walkGrant
}

// walkCounters is the tally of the answers on one limit since the put
// that created it (at index created).
type walkCounters struct {
	created                                                   uint64
	granted, grantedPermits, refused, expired, expiredPermits uint64
	refunded, charged, shadowGranted                          uint64
}

// walkLimitState is what the audit needs of a limit as it was before an
// entry: its incarnation (the index that created it), mode, algorithm and
// replay period.
type walkLimitState struct {
	created uint64
	shadow  bool
	alg     bucket.Algorithm
	period  int64
}

// walkPromise is the first decision of a keyed reserve.
type walkPromise struct {
	status        ReserveStatus
	atNanos       int64
	expiresNanos  int64 // absolute; 0 if the decision was not a grant
	holdEndNanos  int64 // absolute; 0 if it holds no in-flight permits
	reservationID uint64
	shadow        bool
	parts         []Part
	before        map[string]walkLimitState
}

// walkGrant is a fresh grant the walk may report as expired.
type walkGrant struct {
	index    uint64
	parts    []Part
	created  []uint64 // per part, the incarnation that decided it
	reported bool
}

func newWalkAudit() walkAudit {
	return walkAudit{counters: map[string]*walkCounters{}, promises: map[string]walkPromise{}}
}

// auditLimits returns the state of every walk limit that exists.
func (w *walker) auditLimits() map[string]walkLimitState {
	states := map[string]walkLimitState{}
	for _, name := range walkAllNames() {
		if l, ok := w.f.st.limits[name]; ok {
			states[name] = limitState(l)
		}
	}
	return states
}

// expiredGrants draws a report of expired grants: up to three recent
// grants not reported yet, now and then one that names no earlier
// decision (the entry's own index, or one before the limit was created).
func (w *walker) expiredGrants() (string, []byte) {
	r := w.rng
	var gs []ExpiredGrant
	for range 1 + r.IntN(3) {
		if len(w.audit.grants) == 0 {
			break
		}
		g := &w.audit.grants[r.IntN(len(w.audit.grants))]
		if g.reported {
			continue
		}
		g.reported = true
		gs = append(gs, ExpiredGrant{DecidedIndex: g.index, Parts: g.parts})
	}
	if len(gs) == 0 || r.IntN(6) == 0 {
		name := walkNames[r.IntN(len(walkNames))]
		bogus := ExpiredGrant{DecidedIndex: w.index + 1 + r.Uint64N(3), Parts: []Part{{Limit: name, Permits: 1}}}
		if st, ok := w.auditLimits()[name]; ok && st.created > 1 && r.IntN(2) == 0 {
			// Before the put that created it (the put's own entry decided
			// no grant).
			bogus.DecidedIndex = 1 + r.Uint64N(st.created-1)
		}
		gs = append(gs, bogus)
	}
	b, err := AppendExpiredGrants(nil, w.stamp(), gs)
	if err != nil {
		w.t.Fatalf("seed %d: expired-grants: encoding failed: %v", w.seed, err)
	}
	return "expired-grants", b
}

// auditStep updates the tallies with the answer got to entry data (applied at
// index; before are the limits as they were) and checks counters and
// replays. It returns the labels of what it saw.
func (w *walker) auditStep(index uint64, data []byte, got any, before map[string]walkLimitState) []string {
	e, err := Decode(data)
	if err != nil {
		w.t.Fatalf("seed %d: decoding the walk's own entry: %v", w.seed, err)
	}
	a := &w.audit
	var labels []string
	switch v := got.(type) {
	case PutResult:
		if v.Created {
			a.counters[e.Put.Name] = &walkCounters{created: index}
		}
	case DeleteResult:
		if v.Existed && v.Detail == "" {
			delete(a.counters, e.Delete.Name)
		}
	case []ReserveResult:
		for i := range v {
			labels = append(labels, w.auditReserve(index, &e.Reserves[i], v[i], before)...)
		}
	case SettleResult:
		if v.Status == Settled && !v.Duplicate {
			rv := w.f.st.reservations.byID[e.Settle.Reservation]
			for i, p := range v.Parts {
				// An in-flight hold's early release is not a refund of a
				// rate, whatever the limit of its name is now
				// (reservation.go, "Holds").
				hold := rv != nil && i < len(rv.parts) && rv.parts[i].holdExpiresAtNanos != 0
				if c := a.counters[p.Limit]; c != nil && before[p.Limit].alg != bucket.Concurrency && !hold {
					c.refunded += uint64(p.Refunded)
					c.charged += uint64(p.Charged)
				}
			}
		}
	case ExpiredGrantsResult:
		labels = append(labels, w.auditExpired(index, e.ExpiredGrants, v)...)
	}
	w.checkCounters()
	return labels
}

// auditReserve tallies one reserve's answer, or checks it against its
// first decision if it is a replay.
func (w *walker) auditReserve(index uint64, r *Reserve, rr ReserveResult, before map[string]walkLimitState) []string {
	a := &w.audit
	key := ""
	switch {
	case r.RequestID != "":
		key = "id " + r.RequestID
	case r.Session.ID != 0:
		key = fmt.Sprintf("session %d seq %d", r.Session.ID, r.Session.Seq)
	}
	if rr.Duplicate {
		if rr.Status != Granted {
			return nil
		}
		return w.checkReplay(key, r, rr)
	}
	parts := []Part{{Limit: r.Limit, Permits: r.Permits}}
	if r.Track {
		parts = r.Parts()
	}
	switch rr.Status {
	case Granted:
		shadow, ok := w.tallyGrant(index, parts, before, rr)
		if !ok {
			return nil
		}
		p := w.promise(rr, parts, shadow, before)
		if r.Track {
			p.holdEndNanos = holdEnd(p.atNanos, parts, before)
			w.checkHoldEnd("a fresh grant", rr, p.holdEndNanos)
		}
		if key != "" {
			a.promises[key] = p
		}
	case Refused:
		name := r.Limit
		if r.Track {
			name = rr.Blocking
		}
		if c := a.counters[name]; c != nil {
			c.refused++
		} else {
			w.t.Errorf("seed %d: a reserve was refused by limit %q, which the walk does not know: %+v", w.seed, name, rr)
		}
		if key != "" {
			a.promises[key] = walkPromise{status: Refused}
		}
	default:
		if key != "" && rr.Status != Busy && rr.Status != SessionExpired {
			a.promises[key] = walkPromise{status: rr.Status}
		}
	}
	return nil
}

// promise is what a fresh grant rr of parts promises its replays: its
// time, and its expiry, or else one replay period after its time (the
// shortest of its limits').
func (w *walker) promise(rr ReserveResult, parts []Part, shadow bool, before map[string]walkLimitState) walkPromise {
	p := walkPromise{status: Granted, atNanos: rr.NowNanos + rr.WaitNanos, reservationID: rr.ReservationID,
		shadow: shadow, parts: parts, before: before}
	switch {
	case rr.ExpiresInNanos > 0:
		p.expiresNanos = rr.NowNanos + rr.ExpiresInNanos
	case rr.ExpiresInNanos < 0:
		w.t.Errorf("seed %d: a fresh grant is already expired: %+v", w.seed, rr)
	default:
		var period int64
		for _, part := range parts {
			if q := before[part.Limit].period; q > 0 && (period == 0 || q < period) {
				period = q
			}
		}
		p.expiresNanos = p.atNanos + period
	}
	return p
}

// checkReplay checks a replayed grant rr of reserve r against the first
// decision under key, and labels it.
func (w *walker) checkReplay(key string, r *Reserve, rr ReserveResult) []string {
	p, ok := w.audit.promises[key]
	switch {
	case !ok:
		w.t.Errorf("seed %d: a replay of %s was granted, but the walk saw no decision with that key: %+v", w.seed, key, rr)
		return nil
	case p.status != Granted:
		w.t.Errorf("seed %d: a replay of %s was granted, but its first decision was status %d: %+v", w.seed, key, p.status, rr)
		return nil
	}
	now := rr.NowNanos
	wantWait, wantExpires := max(p.atNanos-now, 0), int64(-1)
	if p.expiresNanos > now {
		wantExpires = p.expiresNanos - now
	}
	w.checkHoldEnd("a replay of "+key, rr, p.holdEndNanos)
	if rr.WaitNanos != wantWait || rr.ExpiresInNanos != wantExpires || rr.ReservationID != p.reservationID {
		w.t.Errorf("seed %d: a replay of %s (%d parts, shadow %v) at %d answered wait %dns, expires in %dns, reservation %d; its first decision promised the time %d, an expiry at %d (wait %dns, expires in %dns), reservation %d",
			w.seed, key, len(p.parts), p.shadow, now, rr.WaitNanos, rr.ExpiresInNanos, rr.ReservationID,
			p.atNanos, p.expiresNanos, wantWait, wantExpires, p.reservationID)
	}
	labels := []string{}
	if p.shadow {
		labels = append(labels, "replay-shadow")
	}
	if wantExpires < 0 {
		labels = append(labels, "replay-expired")
	}
	if len(p.parts) > 1 {
		labels = append(labels, "replay-multi")
	}
	if p.holdEndNanos > now && p.holdEndNanos != p.expiresNanos {
		labels = append(labels, "replay-hold-end") // a hold that outlasts the grant's expiry
	}
	if r.Session.ID != 0 {
		labels = append(labels, "replay-in-session")
	}
	now2 := w.auditLimits()
	flipped := false
	for _, part := range p.parts {
		was := p.before[part.Limit]
		labels = append(labels, "replay-"+was.alg.String())
		flipped = flipped || now2[part.Limit] != was
	}
	if flipped {
		labels = append(labels, "replay-flipped")
	}
	return labels
}

// holdEnd is when the in-flight holds of a grant of parts served at
// atNanos end (the earliest: its time plus the TTL of each enforced cap
// among them, before: the limits as they were when it was decided), or 0
// if no enforced cap is among them.
func holdEnd(atNanos int64, parts []Part, before map[string]walkLimitState) int64 {
	var end int64
	for _, p := range parts {
		if st := before[p.Limit]; st.alg == bucket.Concurrency && !st.shadow {
			if e := atNanos + st.period; end == 0 || e < end {
				end = e
			}
		}
	}
	return end
}

// checkHoldEnd checks that grant rr (what: which) says it holds in-flight
// permits exactly when endNanos is not 0, and that they end at endNanos,
// relative to its entry (-1 once passed), never before its expiry.
func (w *walker) checkHoldEnd(what string, rr ReserveResult, endNanos int64) {
	var want int64
	if endNanos != 0 {
		want = expiresIn(endNanos, rr.NowNanos)
	}
	if rr.Holds != (endNanos != 0) || rr.HoldExpiresInNanos != want {
		w.t.Errorf("seed %d: %s at %d answered holds %v, hold expires in %dns; its caps say holds %v until %d (in %dns): %+v",
			w.seed, what, rr.NowNanos, rr.Holds, rr.HoldExpiresInNanos, endNanos != 0, endNanos, want, rr)
	}
	if rr.HoldExpiresInNanos > 0 && rr.ExpiresInNanos > rr.HoldExpiresInNanos {
		w.t.Errorf("seed %d: %s: expires in %dns, after its hold (%dns)", w.seed, what, rr.ExpiresInNanos, rr.HoldExpiresInNanos)
	}
}

// auditExpired tallies a report of expired grants: each part counts on
// its limit if that limit is the incarnation that granted it, and a
// report naming no earlier decision counts nowhere.
func (w *walker) auditExpired(index uint64, gs []ExpiredGrant, res ExpiredGrantsResult) []string {
	a := &w.audit
	want := 0
	for _, g := range gs {
		var grant *walkGrant
		for i := range a.grants {
			if a.grants[i].index == g.DecidedIndex && fmt.Sprint(a.grants[i].parts) == fmt.Sprint(g.Parts) {
				grant = &a.grants[i]
			}
		}
		if grant == nil || g.DecidedIndex >= index {
			continue // made up: before the limit existed, or not decided yet
		}
		for i, p := range g.Parts {
			if c := a.counters[p.Limit]; c != nil && c.created == grant.created[i] {
				c.expired++
				c.expiredPermits += uint64(p.Permits)
				want++
			}
		}
	}
	if res.Counted != want {
		w.t.Errorf("seed %d: a report of %d expired grants counted %d parts, want %d: %+v", w.seed, len(gs), res.Counted, want, gs)
	}
	if want > 0 {
		return []string{"expired-counted"}
	}
	return nil
}

// checkCounters compares every limit's counters with the walk's tally.
func (w *walker) checkCounters() {
	for _, name := range walkAllNames() {
		info, ok := w.f.Limit(name)
		c := w.audit.counters[name]
		if ok != (c != nil) {
			w.t.Errorf("seed %d: limit %q exists: %v, but the answers say %v", w.seed, name, ok, c != nil)
			continue
		}
		if !ok {
			continue
		}
		want := LimitInfo{
			GrantedRequests: c.granted - c.expired, GrantedPermits: c.grantedPermits - c.expiredPermits,
			RefusedRequests: c.refused + c.expired, ExpiredRequests: c.expired, ExpiredPermits: c.expiredPermits,
			RefundedPermits: c.refunded, ChargedPermits: c.charged, NetPermits: c.grantedPermits - c.refunded + c.charged,
			ShadowGranted: c.shadowGranted,
		}
		got := LimitInfo{
			GrantedRequests: info.GrantedRequests, GrantedPermits: info.GrantedPermits,
			RefusedRequests: info.RefusedRequests, ExpiredRequests: info.ExpiredRequests, ExpiredPermits: info.ExpiredPermits,
			RefundedPermits: info.RefundedPermits, ChargedPermits: info.ChargedPermits, NetPermits: info.NetPermits,
			ShadowGranted: info.ShadowGranted,
		}
		if got != want {
			w.t.Errorf("seed %d: limit %q counts %s; the answers say %s", w.seed, name, counterString(got), counterString(want))
		}
		if info.ShadowWouldRefuse+info.ShadowWouldWait > info.ShadowGranted {
			w.t.Errorf("seed %d: limit %q would have refused %d and made wait %d of its %d shadow grants", w.seed, name,
				info.ShadowWouldRefuse, info.ShadowWouldWait, info.ShadowGranted)
		}
	}
}

func counterString(l LimitInfo) string {
	return fmt.Sprintf("granted %d (%d permits), refused %d, expired %d (%d permits), refunded %d, charged %d, net %d, shadow grants %d",
		l.GrantedRequests, l.GrantedPermits, l.RefusedRequests, l.ExpiredRequests, l.ExpiredPermits,
		l.RefundedPermits, l.ChargedPermits, l.NetPermits, l.ShadowGranted)
}

// tallyGrant counts a grant of parts decided by the entry at index (what,
// for an error: its answer) on the limits' counters, and reports whether
// a limit was in shadow mode (before: the limits as they were), or false
// when a limit is unknown to the walk.
func (w *walker) tallyGrant(index uint64, parts []Part, before map[string]walkLimitState, what any) (shadow, ok bool) {
	a := &w.audit
	g := walkGrant{index: index, parts: parts}
	for _, p := range parts {
		c := a.counters[p.Limit]
		if c == nil {
			w.t.Errorf("seed %d: a reserve on limit %q, which the walk does not know, was granted: %+v", w.seed, p.Limit, what)
			return false, false
		}
		c.granted++
		c.grantedPermits += uint64(p.Permits)
		if before[p.Limit].shadow {
			c.shadowGranted++
			shadow = true
		}
		g.created = append(g.created, c.created)
	}
	a.grants = append(a.grants, g)
	if len(a.grants) > 32 {
		a.grants = a.grants[1:]
	}
	return shadow, true
}
