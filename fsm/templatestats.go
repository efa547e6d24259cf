package fsm

import (
	"maps"
	"slices"
	"strings"

	"github.com/permitd/permitd/bucket"
)

// templatestats.go: what monitoring reads of templates and their keys,
// as families rather than one limit per key: a template's live keys and
// their counters summed (FSM.TemplateStats), and the keys each applied
// entry created or removed (FSM.AppliedKeyChanges). Nothing here changes
// the replicated state.

// KeyChangeKind says how an applied entry changed a templated key.
type KeyChangeKind uint8

// The kinds of KeyChange.
const (
	// KeyCreated: a reserve created the key from its template.
	KeyCreated KeyChangeKind = iota + 1
	// KeyDroppedIdle: the register dropped the key, idle and at rest.
	KeyDroppedIdle
	// KeyMadeExplicit: an explicit put made the key an explicit limit
	// (it leaves its template's family, with its counters).
	KeyMadeExplicit
	// KeyDeleted: a delete of the key removed it.
	KeyDeleted
)

// KeyChange is one templated key an applied entry created or took out of
// its template's family, with the key's counters at that moment (0 for a
// created key; counted as LimitInfo counts them).
type KeyChange struct {
	Kind            KeyChangeKind
	Name, Template  string
	GrantedRequests uint64
	RefusedRequests uint64
	GrantedPermits  uint64
}

// keyCounters are the family-summed counters of templated key l.
func (l *limit) keyCounters() (granted, refused, permits uint64) {
	t := l.tally()
	return l.grantedRequests - t.expiredRequests, l.refusedRequests + t.expiredRequests, l.grantedPermits - t.expiredPermits
}

// templatePrefix is the prefix of the template that created l, "" for an
// explicit limit.
func (l *limit) templatePrefix() string {
	if !l.templated() {
		return ""
	}
	return l.name[:strings.IndexByte(l.name, ':')]
}

// noteKeyChange records that the entry being applied changed templated
// key l (before it leaves its template's family).
func (s *state) noteKeyChange(l *limit, kind KeyChangeKind) {
	c := KeyChange{Kind: kind, Name: l.name, Template: l.templatePrefix()}
	if kind != KeyCreated {
		c.GrantedRequests, c.RefusedRequests, c.GrantedPermits = l.keyCounters()
	}
	s.keyChanges = append(s.keyChanges, c)
}

// AppliedKeyChanges returns the templated keys the latest Apply created,
// dropped as idle, made explicit or deleted, in the order it did (nil
// before any, and after a Restore). Like AppliedEntry, only the goroutine
// that calls Apply may read it, and only until its next Apply.
func (f *FSM) AppliedKeyChanges() []KeyChange { return f.st.keyChanges }

// TemplateStats is one template and its family of live keys, for
// monitoring.
type TemplateStats struct {
	Prefix string
	// Active is false for a deleted template whose keys still live.
	Active    bool
	Config    bucket.Config
	IdleNanos int64
	MaxKeys   int64
	// LiveKeys counts the keys it created that live now.
	LiveKeys int64
	// GrantedRequests, RefusedRequests and GrantedPermits are summed over
	// the live keys, counted as LimitInfo counts them: a key that leaves
	// the family (AppliedKeyChanges) takes its counters along.
	GrantedRequests, RefusedRequests, GrantedPermits uint64
}

// TemplateStats returns every template (deleted ones whose keys still
// live included), sorted by prefix, with its live keys counted and their
// counters summed, read under one lock. It walks every templated key.
func (f *FSM) TemplateStats() []TemplateStats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := &f.st
	out := make([]TemplateStats, 0, len(s.templates))
	at := make(map[*template]int, len(s.templates))
	for _, prefix := range slices.Sorted(maps.Keys(s.templates)) {
		t := s.templates[prefix]
		at[t] = len(out)
		out = append(out, TemplateStats{Prefix: prefix, Active: t.active, Config: t.conf.cfg,
			IdleNanos: t.idleNanos, MaxKeys: t.maxKeys, LiveKeys: t.keys})
	}
	var last *template
	var ts *TemplateStats
	for i := range s.keys.es {
		l := s.keys.es[i].l
		if last == nil || !strings.HasPrefix(l.name, last.prefix) || l.name[len(last.prefix)] != ':' {
			last = s.ownTemplate(l)
			ts = &out[at[last]]
		}
		g, r, p := l.keyCounters()
		ts.GrantedRequests += g
		ts.RefusedRequests += r
		ts.GrantedPermits += p
	}
	return out
}

// KeyTemplate returns the prefix of the template that created the limit
// called name, "" if name is an explicit limit or none: cheap for names
// no template's prefix starts (no lookup of the limit).
func (f *FSM) KeyTemplate(name string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if l := f.st.maybeKeyName(name); l != nil {
		return l.templatePrefix()
	}
	return ""
}

// CreatesKey reports whether a reserve naming name would create it from
// an active template: no limit of that name exists, and a template of its
// prefix does.
func (f *FSM) CreatesKey(name string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if _, ok := f.st.limits[name]; ok {
		return false
	}
	return f.st.templateOf(name) != nil
}
