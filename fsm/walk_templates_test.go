package fsm

import (
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
)

// walk_templates_test.go: templates in the reachable-state walk. The walk
// puts and deletes templates of two prefixes (random configs of every
// algorithm a template accepts, most re-puts keeping the config and
// changing the idle time and MaxKeys, caps small enough to fill), and its
// reserves, multi-limit reserves, puts and deletes name templated keys as
// well as explicit limits: first uses create keys, puts override them,
// deletes remove them, and time jumps let idle keys go. After every step,
// besides the walk's checks (snapshots, counters, caps, replays), it
// checks, from the answers:
//
//   - Every key's bound over every window (checkLimitBound, as
//     reservation_bound_test.go rebuilds it: a grant served at its time,
//     its permits less what a settlement refunded). A key's history runs
//     across its drops and re-creations while it comes back with the same
//     config: the promise is that dropping a key never lets a window
//     exceed its bound (README.md, "Templated keys and their drop"). It
//     ends at an explicit put or delete of the name (the limit is then
//     another one), at a re-creation under another config, and restarts
//     empty after a settlement's charge (an overrun used before the
//     register heard of it may exceed the bound; windows after it may
//     not).
//   - On every fifth seed (keepsKeys), a dropped key changes no answer: a
//     register fed the same log that keeps every key answers every entry
//     alike, and decides the same waiters (answers: but whether a delete
//     found the key, and the live keys a template delete counts). Its
//     templates keep their configs and caps that never fill: a template
//     put with another config reaches only keys created afterwards, and a
//     cap counts live keys, by design.
//   - A key is created only by an entry that decided a reserve on it
//     (granted, refused by a limit, or queued): a reserve answered Invalid
//     or Busy leaves no key; an explicit limit never vanishes but by a
//     delete; a key is dropped only after its template's idle time
//     without a reserve deciding on it.
//
// The steps it labels "key-dropped", "key-recreated",
// "key-bound-across-drop" (a history with grants on both sides of a drop)
// and "key-dropped-compared" (a drop in a walk compared with a register
// that keeps every key) are among walkKinds, so a walk that stops
// dropping keys fails.

// walkPrefixes are the template prefixes of the walk; walkKeyNames the
// templated keys its commands name.
var (
	walkPrefixes = []string{"t", "u"}
	walkKeyNames = []string{"t:k0", "t:k1", "t:k2", "u:k0", "u:k1"}
)

// walkTemplateKinds are the step labels of templates; the walk must reach
// each of them.
var walkTemplateKinds = []string{
	"template-put", "template-delete", "key-created", "key-dropped", "key-recreated", "key-bound-across-drop",
	"key-override", "key-deleted", "keys-full", "key-dropped-compared",
}

func init() { walkKinds = append(walkKinds, walkTemplateKinds...) }

// walkAllNames are the names the audit covers: explicit and templated.
func walkAllNames() []string { return append(slices.Clone(walkNames), walkKeyNames...) }

// keyAudit is the walk's memory of its templated keys.
type keyAudit struct {
	// segs is the open history of each key name (nil: none).
	segs map[string]*keySegment
	// byReservation locates the key parts of tracked grants, for refunds.
	byReservation map[uint64][]keyGrantRef
	// touched is when a reserve last decided on each key name; everDropped
	// the names dropped at least once.
	touched     map[string]int64
	everDropped map[string]bool
	// conf is each prefix's template config, which most re-puts keep.
	conf map[string]bucket.Config
}

// keySegment is the history of one key name over which its bound holds.
type keySegment struct {
	raw    string
	cfg    bucket.Config
	grants []boundGrant
	// live reports that the key exists; grantsAtDrop is how many grants
	// the history had at its first drop (-1: not dropped yet).
	live         bool
	grantsAtDrop int
}

// keyGrantRef is a part of a tracked grant on a key: its history and
// grant.
type keyGrantRef struct {
	limit string
	seg   *keySegment
	index int
}

// keyState is a walk name's limit before an entry.
type keyState struct {
	exists, templated bool
	created           uint64
	idleNanos         int64
}

func (w *walker) keys() *keyAudit {
	if w.keyAudit.segs == nil {
		w.keyAudit = keyAudit{segs: map[string]*keySegment{}, byReservation: map[uint64][]keyGrantRef{},
			touched: map[string]int64{}, everDropped: map[string]bool{}, conf: map[string]bucket.Config{}}
	}
	return &w.keyAudit
}

// pickName draws the name a reserve, put or delete names: a templated
// key a third of the time, else an explicit name.
func (w *walker) pickName() string {
	if w.rng.IntN(3) == 0 {
		return walkKeyNames[w.rng.IntN(len(walkKeyNames))]
	}
	return walkNames[w.rng.IntN(len(walkNames))]
}

// trackedNames are the names a tracked reserve draws its parts from, in
// random order: the explicit ones and, most of the time, one or two keys.
func (w *walker) trackedNames() []string {
	r := w.rng
	names := slices.Clone(walkNames)
	for range r.IntN(3) {
		if k := walkKeyNames[r.IntN(len(walkKeyNames))]; !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	r.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
	return names
}

// templateCommand draws a put or delete of a template: a put keeps the
// prefix's config two times out of three (so that dropped keys come back
// alike) and draws its idle time and MaxKeys (1 to 3, now and then the
// largest).
func (w *walker) templateCommand() (string, []byte) {
	r := w.rng
	k := w.keys()
	prefix := walkPrefixes[r.IntN(len(walkPrefixes))]
	if r.IntN(4) == 0 && w.keeper == nil {
		b, err := AppendDeleteTemplate(nil, w.stamp(), DeleteTemplate{Prefix: prefix})
		if err != nil {
			w.t.Fatalf("seed %d: template-delete: encoding failed: %v", w.seed, err)
		}
		return "template-delete", b
	}
	cfg, ok := k.conf[prefix]
	if !ok || (r.IntN(3) == 0 && w.keeper == nil) {
		cfg = w.restingConfig()
		k.conf[prefix] = cfg
	}
	idle := []int64{MinTemplateIdleNanos, int64(3 * time.Second), int64(20 * time.Second), int64(2 * time.Minute)}[r.IntN(4)]
	idle += r.Int64N(int64(time.Second))
	maxKeys := 1 + r.Int64N(3)
	if r.IntN(4) == 0 || w.keeper != nil {
		maxKeys = MaxTemplatedKeys
	}
	b, err := AppendPutTemplate(nil, w.stamp(), PutTemplate{Prefix: prefix, Config: cfg, IdleNanos: idle, MaxKeys: maxKeys})
	if err != nil {
		w.t.Fatalf("seed %d: template-put: encoding failed: %v", w.seed, err)
	}
	return "template-put", b
}

// restingConfig draws a config a template accepts: any of the walk's but
// a hybrid with a burst pool.
func (w *walker) restingConfig() bucket.Config {
	alg := w.algorithm()
	for {
		if c := w.randomConfig(alg); bucket.Rests(c) {
			return c
		}
	}
}

// limitState is what the audit needs of limit l (auditLimits).
func limitState(l *limit) walkLimitState {
	p := l.conf.cfg.IntervalNanos
	if l.conf.cfg.Spec.Algorithm == bucket.Concurrency {
		p = int64(l.conf.cfg.Spec.HoldTTL)
	}
	return walkLimitState{created: l.createdIndex, shadow: l.shadow, alg: l.conf.cfg.Spec.Algorithm, period: p}
}

// keyStates returns the state of every key name before an entry.
func (w *walker) keyStates() map[string]keyState {
	m := map[string]keyState{}
	for _, name := range walkKeyNames {
		l, ok := w.f.st.limits[name]
		if !ok {
			continue
		}
		ks := keyState{exists: true, templated: l.templated(), created: l.createdIndex}
		if ks.templated {
			ks.idleNanos = w.f.st.ownTemplate(l).idleNanos
		}
		m[name] = ks
	}
	return m
}

// fixCreatedKeys gives the keys the entry at index created their state
// as it was when the entry decided on them (before: the limits before the
// entry, which knew them not, or as a key the entry dropped first).
func (w *walker) fixCreatedKeys(before map[string]walkLimitState, index uint64) {
	for _, name := range walkKeyNames {
		if l, ok := w.f.st.limits[name]; ok && l.createdIndex == index && l.templated() {
			before[name] = limitState(l)
		}
	}
}

// keyLifecycle follows the keys through the entry at index (data, its
// answer got; before, the key names' limits before it): drops and
// creations update the counters' tally and the keys' histories, and are
// checked against the answers. It runs before the audit tallies the
// entry's answers.
func (w *walker) keyLifecycle(data []byte, got any, before map[string]keyState, index uint64) []string {
	e, err := Decode(data)
	if err != nil {
		w.t.Fatalf("seed %d: decoding the walk's own entry: %v", w.seed, err)
	}
	k := w.keys()
	now := w.f.st.lastNowNanos
	target := "" // the name an explicit put or delete acts on
	var labels []string
	switch v := got.(type) {
	case PutResult:
		target = e.Put.Name
		if slices.Contains(walkKeyNames, target) && v.Detail == "" {
			if before[target].templated {
				labels = append(labels, "key-override")
			}
			delete(k.segs, target)
		}
	case DeleteResult:
		if v.Existed {
			target = e.Delete.Name // (else it was dropped first, if it lived)
		}
		if slices.Contains(walkKeyNames, target) && v.Detail == "" {
			if before[target].templated {
				labels = append(labels, "key-deleted")
			}
			delete(k.segs, target)
		}
	case PutTemplateResult:
		labels = append(labels, "template-put")
	case DeleteTemplateResult:
		labels = append(labels, "template-delete")
	}
	decidedOn := map[string]bool{}
	if rs, ok := got.([]ReserveResult); ok {
		for i, rr := range rs {
			if rr.Status == KeysFull {
				labels = append(labels, "keys-full")
			}
			if rr.Duplicate || (rr.Status != Granted && rr.Status != Refused && rr.Status != Queued) {
				continue
			}
			for _, p := range reserveParts(&e.Reserves[i]) {
				decidedOn[p.Limit] = true
				k.touched[p.Limit] = rr.NowNanos
			}
		}
	}
	for _, name := range walkKeyNames {
		if name == target {
			continue // an explicit put or delete: the audit follows it
		}
		was := before[name]
		l, exists := w.f.st.limits[name]
		gone := was.exists && (!exists || l.createdIndex != was.created)
		switch {
		case gone && !was.templated:
			w.t.Errorf("seed %d: explicit limit %q vanished without a delete", w.seed, name)
		case gone:
			// Dropped as idle at the entry's start (before it decided
			// anything: its reserves' touches came later).
			if last, ok := k.touched[name]; ok && now-last < was.idleNanos && !decidedOn[name] {
				w.t.Errorf("seed %d: key %q dropped at %d, %v after a reserve decided on it (its template's idle time: %v)",
					w.seed, name, now, time.Duration(now-last), time.Duration(was.idleNanos))
			}
			labels = append(labels, "key-dropped")
			if w.keeper != nil {
				labels = append(labels, "key-dropped-compared") // (checkKeeper)
			}
			k.everDropped[name] = true
			if c := w.audit.counters[name]; c != nil && c.created == was.created {
				delete(w.audit.counters, name)
			}
			if s := k.segs[name]; s != nil {
				s.live = false
				if s.grantsAtDrop < 0 {
					s.grantsAtDrop = len(s.grants)
				}
			}
		}
		if !exists || l.createdIndex != index || !l.templated() {
			continue
		}
		// Created by this entry, from its template.
		if !decidedOn[name] {
			w.t.Errorf("seed %d: key %q was created by an entry that decided no reserve on it: %+v", w.seed, name, got)
		}
		labels = append(labels, "key-created")
		if k.everDropped[name] {
			labels = append(labels, "key-recreated")
		}
		w.audit.counters[name] = &walkCounters{created: index}
		if s := k.segs[name]; s != nil && !s.live && s.raw == l.conf.raw {
			s.live = true // the same history, on: its bound must hold across the drop
			continue
		}
		k.segs[name] = &keySegment{raw: l.conf.raw, cfg: l.conf.cfg, live: true, grantsAtDrop: -1}
	}
	return labels
}

// reserveParts are the limits and permits reserve r names.
func reserveParts(r *Reserve) []Part {
	if r.Track {
		return r.Parts()
	}
	return []Part{{Limit: r.Limit, Permits: r.Permits}}
}

// walkServed is a grant of parts served at atNanos (id: its
// reservation).
type walkServed struct {
	id      uint64
	parts   []Part
	atNanos int64
}

// waiterGrants returns the grants among the waiters' decisions of an
// entry, while the walk still knows their parts.
func (w *walker) waiterGrants(decided []WaiterDecision) []walkServed {
	var out []walkServed
	for _, d := range decided {
		if ww, ok := w.waiters[d.Reservation]; ok && d.Result.Status == Granted {
			out = append(out, walkServed{id: d.Reservation, parts: ww.parts, atNanos: d.ServedAtNanos})
		}
	}
	return out
}

// auditKeyBounds records what the entry (data, answered got; waiters,
// the waiters its start granted) served on keys, and checks each key's
// bound over the history it changed.
func (w *walker) auditKeyBounds(data []byte, got any, waiters []walkServed) []string {
	e, err := Decode(data)
	if err != nil {
		w.t.Fatalf("seed %d: decoding the walk's own entry: %v", w.seed, err)
	}
	k := w.keys()
	changed := map[string]*keySegment{}
	serve := func(id uint64, parts []Part, atNanos int64) {
		for _, p := range parts {
			s := k.segs[p.Limit]
			if s == nil || s.cfg.Spec.Algorithm == bucket.Concurrency {
				continue
			}
			s.grants = append(s.grants, boundGrant{atNanos: atNanos, n: p.Permits})
			changed[p.Limit] = s
			if id != 0 {
				k.byReservation[id] = append(k.byReservation[id], keyGrantRef{limit: p.Limit, seg: s, index: len(s.grants) - 1})
			}
		}
	}
	for _, g := range waiters {
		serve(g.id, g.parts, g.atNanos)
	}
	switch v := got.(type) {
	case []ReserveResult:
		for i, rr := range v {
			if rr.Status == Granted && !rr.Duplicate {
				serve(rr.ReservationID, reserveParts(&e.Reserves[i]), rr.NowNanos+rr.WaitNanos)
			}
		}
	case SettleResult:
		if v.Status != Settled || v.Duplicate {
			break
		}
		for _, p := range v.Parts {
			s := k.segs[p.Limit]
			if s == nil {
				continue
			}
			if p.Charged > 0 {
				// An overrun used before the register heard of it: the
				// bound holds again over windows after the charge.
				k.segs[p.Limit] = &keySegment{raw: s.raw, cfg: s.cfg, live: s.live, grantsAtDrop: -1}
				continue
			}
			if p.Refunded == 0 {
				continue
			}
			for _, ref := range k.byReservation[e.Settle.Reservation] {
				if ref.limit == p.Limit && ref.seg == s {
					s.grants[ref.index].n = p.Reserved - p.Refunded
					changed[p.Limit] = s
				}
			}
		}
	}
	var labels []string
	for _, name := range slices.Sorted(maps.Keys(changed)) {
		s := changed[name]
		if why := checkLimitBound(s.cfg, s.grants); why != "" {
			w.t.Errorf("seed %d: key %q (%s, %d grants, dropped after grant %d): %s", w.seed, name, s.cfg.Spec.Algorithm, len(s.grants), s.grantsAtDrop, why)
		}
		if s.grantsAtDrop > 0 && len(s.grants) > s.grantsAtDrop {
			labels = append(labels, "key-bound-across-drop")
		}
	}
	return labels
}

// keepsKeys reports whether the walk of seed compares its register with
// one that keeps every key.
func keepsKeys(seed uint64) bool { return seed%5 == 3 }

// checkKeeper applies entry l to the register that keeps every key and
// compares its answer and waiter decisions with got and the walk's
// register's (before the walk takes them).
func (w *walker) checkKeeper(kind string, l *raft.Log, got any) {
	if w.keeper == nil {
		return
	}
	kept := w.keeper.Apply(&raft.Log{Index: l.Index, Term: l.Term, Type: l.Type, Data: l.Data})
	if !reflect.DeepEqual(keptAnswer(got), keptAnswer(kept)) {
		w.t.Errorf("seed %d: %s: a register that drops idle keys answered %+v, one that keeps them %+v (%d keys live, %d kept)",
			w.seed, kind, got, kept, w.f.st.keys.Len(), w.keeper.st.keys.Len())
	}
	if d, k := w.f.st.decided, w.keeper.st.decided; !reflect.DeepEqual(d, k) {
		w.t.Errorf("seed %d: %s: a register that drops idle keys decided waiters %+v, one that keeps them %+v", w.seed, kind, d, k)
	}
	w.keeper.TakeWaiterDecisions()
}

// keptAnswer is what of answer v must not depend on whether idle keys
// were dropped: all of it but whether a delete found the limit, the live
// keys of a deleted template, and how many parts of a report of expired
// grants counted (a dropped key's counters go with it).
func keptAnswer(v any) any {
	switch a := v.(type) {
	case DeleteResult:
		a.Existed = false
		return a
	case DeleteTemplateResult:
		a.LiveKeys = 0
		return a
	case ExpiredGrantsResult:
		return ExpiredGrantsResult{}
	}
	return v
}
