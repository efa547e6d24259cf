package fsm

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/permitd/permitd/bucket"
)

// template.go: templates, the keys they create on first use, and how idle
// keys are dropped (the rule and its argument: README.md, "Templated keys
// and their drop").
//
// A template is a limit config under a prefix. A reserve naming
// "prefix:key" that finds no limit of that name while the template is
// active creates one, at rest (bucket.Compiled.NewRestedPacer: the state
// of a limit idle since forever), in the entry that decides the reserve,
// then decides the reserve on it. Such a key is dropped by Apply once it
// has been untouched for the template's idle time and forgetting it
// changes no decision: its pacer is at rest (bucket.RestAtNanos), and no
// live reservation names it (reservationTable.pins: a settlement, a
// release, a waiter or a hold needs the limit as it is). A key dropped
// and created again is then the very state it would have been.
//
// The keys wait for their drop in a heap ordered by (due time, name), a
// function of the log only: Apply pops at most maxDropsPerEntry due keys
// per entry, drops those that may go and puts the others back at the time
// they may (their idle time's end, their pacer's rest; a pinned key one
// idle time later). A touch only moves the key's touch time, not its place
// in the heap: the pop finds out. Snapshots keep each key's touch and due
// times; Restore rebuilds the heap from them.

// Bounds of templates. They are part of the replicated behaviour (Decode
// and Restore reject what exceeds them).
const (
	// MaxTemplates is the most templates at once (deleted ones whose keys
	// still live count until their last key goes).
	MaxTemplates = 1024
	// MaxTemplatePrefixLen is the longest template prefix, in bytes: a
	// prefix, ':' and a key of at least that many bytes fit in a name.
	MaxTemplatePrefixLen = MaxNameLen / 2
	// MinTemplateIdleNanos and MaxTemplateIdleNanos bound a template's
	// idle time.
	MinTemplateIdleNanos = int64(time.Second)
	MaxTemplateIdleNanos = int64(30 * 24 * time.Hour)
	// MaxTemplatedKeys is the most templated keys live at once, over all
	// templates, and the largest MaxKeys of one template.
	MaxTemplatedKeys = 1 << 21
	// maxDropsPerEntry bounds the keys one entry pops from the drop heap.
	maxDropsPerEntry = 64
)

// PutTemplate creates the template of Prefix, or replaces it: keys named
// "Prefix:key" are created from Config on first use and dropped after
// IdleNanos of cluster time without a reserve, once at rest; at most
// MaxKeys of them live at once. Keys already live keep the config they
// were created with (an explicit PutLimit changes one).
type PutTemplate struct {
	Prefix    string
	Config    bucket.Config
	IdleNanos int64
	MaxKeys   int64
}

// DeleteTemplate stops the template of Prefix from creating keys; its
// live keys stay until they are dropped as idle.
type DeleteTemplate struct {
	Prefix string
}

// PutTemplateResult is the outcome of a PutTemplate.
type PutTemplateResult struct {
	// Created reports that no active template of that prefix existed.
	Created bool
	// Detail, when not empty, says why nothing changed (too many
	// templates).
	Detail string
}

// DeleteTemplateResult is the outcome of a DeleteTemplate.
type DeleteTemplateResult struct {
	// Existed reports that an active template of that prefix existed (and
	// now is deleted).
	Existed bool
	// LiveKeys is how many of its keys live on until they are idle.
	LiveKeys int64
}

// ValidateTemplatePrefix reports whether prefix is a valid template
// prefix: 1 to MaxTemplatePrefixLen characters of [A-Za-z0-9_.-] (a
// limit name without ':'). The error wraps ErrInvalidCommand.
func ValidateTemplatePrefix(prefix string) error {
	return validatePrefix(prefix)
}

func validatePrefix[T ~string | ~[]byte](prefix T) error {
	if len(prefix) == 0 || len(prefix) > MaxTemplatePrefixLen {
		return fmt.Errorf("%w: template prefix is %d bytes long (allowed: 1-%d characters of A-Z a-z 0-9 _ . -)",
			ErrInvalidCommand, len(prefix), MaxTemplatePrefixLen)
	}
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; !nameChars[c] || c == ':' {
			return fmt.Errorf("%w: template prefix %q has byte %q at offset %d (allowed: 1-%d characters of A-Z a-z 0-9 _ . -)",
				ErrInvalidCommand, string(prefix), c, i, MaxTemplatePrefixLen)
		}
	}
	return nil
}

// Validate reports whether t can be replicated: a valid prefix, a config
// whose pacers come to rest (bucket.Rests: not a hybrid with a burst
// pool), IdleNanos in [MinTemplateIdleNanos, MaxTemplateIdleNanos] and
// MaxKeys in [1, MaxTemplatedKeys]. The error wraps ErrInvalidCommand.
func (t PutTemplate) Validate() error {
	if err := validatePrefix(t.Prefix); err != nil {
		return err
	}
	if !bucket.Rests(t.Config) {
		return fmt.Errorf("%w: template %q: a hybrid limit with a burst pool never comes to rest (its waiting pool grows while it is idle), so its keys could never be dropped (allowed: any algorithm; hybrid with strictness 1)",
			ErrInvalidCommand, t.Prefix)
	}
	if t.IdleNanos < MinTemplateIdleNanos || t.IdleNanos > MaxTemplateIdleNanos {
		return fmt.Errorf("%w: template %q: idle time %dns (allowed: %dns to %dns)",
			ErrInvalidCommand, t.Prefix, t.IdleNanos, MinTemplateIdleNanos, MaxTemplateIdleNanos)
	}
	if t.MaxKeys < 1 || t.MaxKeys > MaxTemplatedKeys {
		return fmt.Errorf("%w: template %q: max keys %d (allowed: 1 to %d)", ErrInvalidCommand, t.Prefix, t.MaxKeys, MaxTemplatedKeys)
	}
	return nil
}

// Validate reports whether d can be replicated: a valid prefix. The error
// wraps ErrInvalidCommand.
func (d DeleteTemplate) Validate() error {
	return validatePrefix(d.Prefix)
}

// template is one template as the register keeps it. A deleted template
// (active false) is kept while keys it created live, for their idle time
// and count; a put of its prefix makes it active again.
type template struct {
	prefix    string
	conf      *limitConfig
	idleNanos int64
	maxKeys   int64
	active    bool
	// keys counts its live keys (derived from the limits).
	keys int64
}

// keyEntry is what a limit created from a template keeps besides the
// limit, in the drop heap: when it was last reserved, and when the heap
// looks at it next.
type keyEntry struct {
	l                          *limit
	touchedAtNanos, dueAtNanos int64
}

// keyHeap orders the templated keys by (due time, name). Each key's
// limit knows its place (limit.keySlot).
type keyHeap struct{ es []keyEntry }

func (h *keyHeap) Len() int { return len(h.es) }
func (h *keyHeap) Less(i, j int) bool {
	a, b := &h.es[i], &h.es[j]
	if a.dueAtNanos != b.dueAtNanos {
		return a.dueAtNanos < b.dueAtNanos
	}
	return a.l.name < b.l.name
}
func (h *keyHeap) Swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	h.es[i].l.keySlot, h.es[j].l.keySlot = int32(i+1), int32(j+1)
}
func (h *keyHeap) Push(x any) {
	e := x.(keyEntry)
	e.l.keySlot = int32(len(h.es) + 1)
	h.es = append(h.es, e)
}
func (h *keyHeap) Pop() any {
	n := len(h.es) - 1
	e := h.es[n]
	h.es[n] = keyEntry{}
	h.es = h.es[:n]
	e.l.keySlot = 0
	return e
}

// templated reports whether l is a key a template created.
func (l *limit) templated() bool { return l.keySlot != 0 }

// keyOf returns templated key l's entry in the drop heap.
func (s *state) keyOf(l *limit) *keyEntry { return &s.keys.es[l.keySlot-1] }

// templateOf returns the active template that creates a key called name
// ("prefix:key", key not empty), or nil.
func (s *state) templateOf(name string) *template {
	i := strings.IndexByte(name, ':')
	if i <= 0 || i == len(name)-1 {
		return nil
	}
	t := s.templates[name[:i]]
	if t == nil || !t.active {
		return nil
	}
	return t
}

// ownTemplate returns the template record of templated key l.
func (s *state) ownTemplate(l *limit) *template {
	return s.templates[l.name[:strings.IndexByte(l.name, ':')]]
}

// putTemplate applies a PutTemplate.
func (s *state) putTemplate(p *PutTemplate, parts putParts) PutTemplateResult {
	t := s.templates[p.Prefix]
	if t == nil && len(s.templates) >= MaxTemplates {
		return PutTemplateResult{Detail: boundDetail(fmt.Sprintf(
			"template %q not created: the register holds %d templates (allowed: at most %d, deleted ones whose keys still live included); delete one first",
			p.Prefix, len(s.templates), MaxTemplates))}
	}
	conf := s.configs.acquire(parts.rawConfig, parts.config)
	created := t == nil || !t.active
	if t == nil {
		t = &template{prefix: p.Prefix}
		s.templates[p.Prefix] = t
	}
	s.configs.release(t.conf)
	t.conf, t.idleNanos, t.maxKeys, t.active = conf, p.IdleNanos, p.MaxKeys, true
	return PutTemplateResult{Created: created}
}

// deleteTemplate applies a DeleteTemplate.
func (s *state) deleteTemplate(d *DeleteTemplate) DeleteTemplateResult {
	t := s.templates[d.Prefix]
	if t == nil || !t.active {
		return DeleteTemplateResult{}
	}
	t.active = false
	res := DeleteTemplateResult{Existed: true, LiveKeys: t.keys}
	s.retireIfEmpty(t)
	return res
}

// retireIfEmpty forgets deleted template t once no key of it lives.
func (s *state) retireIfEmpty(t *template) {
	if !t.active && t.keys == 0 {
		s.configs.release(t.conf)
		delete(s.templates, t.prefix)
	}
}

// keysFull is the answer to a reserve that would create a key past a
// cap: come back when the first templated key may be dropped (a hint).
func (s *state) keysFull(nowNanos int64, detail string) outcome {
	at := satAddNanos(nowNanos, 1)
	if s.keys.Len() > 0 {
		at = max(at, s.keys.es[0].dueAtNanos)
	}
	return outcome{status: KeysFull, atNanos: at, detail: boundDetail(detail)}
}

// canCreate checks the caps for creating extra more keys, one of them of
// template t.
func (s *state) canCreate(nowNanos int64, t *template, ofT, extra int64) (outcome, bool) {
	if t.keys+ofT > t.maxKeys {
		return s.keysFull(nowNanos, fmt.Sprintf(
			"template %q holds %d live keys (allowed: at most %d, its max keys); a key goes when it has been idle for %v",
			t.prefix, t.keys, t.maxKeys, time.Duration(t.idleNanos))), false
	}
	if int64(s.keys.Len())+extra > int64(s.maxTemplatedKeys) {
		return s.keysFull(nowNanos, fmt.Sprintf(
			"the register holds %d templated keys (allowed: at most %d over all templates); a key goes when it has been idle for its template's idle time",
			s.keys.Len(), s.maxTemplatedKeys)), false
	}
	return outcome{}, true
}

// createKey creates key name from template t at nowNanos, at rest, in
// the entry at the applied index.
func (s *state) createKey(name string, t *template, nowNanos int64) *limit {
	conf := s.configs.acquire([]byte(t.conf.raw), t.conf.compiled)
	l := s.insertLimit(name, conf, s.appliedIndex, conf.compiled.NewRestedPacer(nowNanos))
	heap.Push(&s.keys, keyEntry{l: l, touchedAtNanos: nowNanos, dueAtNanos: satAddNanos(nowNanos, t.idleNanos)})
	t.keys++
	s.carryHolds(l, nowNanos)
	s.noteKeyChange(l, KeyCreated)
	return l
}

// limitOrKey returns the limit called name, creating it from its
// template if it does not exist: or the outcome that answers the reserve
// (UnknownLimit, KeysFull).
func (s *state) limitOrKey(name string, nowNanos int64) (*limit, outcome, bool) {
	if l, ok := s.limits[name]; ok {
		return l, outcome{}, true
	}
	t := s.templateOf(name)
	if t == nil {
		return nil, outcome{status: UnknownLimit}, false
	}
	if o, ok := s.canCreate(nowNanos, t, 1, 1); !ok {
		return nil, o, false
	}
	return s.createKey(name, t, nowNanos), outcome{}, true
}

// createParts creates, at nowNanos, the templated keys the parts of a
// reserve in the reservation form name that do not exist, all or none: it
// returns the outcome that answers the reserve if one part names neither
// a limit nor an active template's key (UnknownLimit), or if the keys do
// not fit under the caps (KeysFull).
func (s *state) createParts(parts []Part, nowNanos int64) (outcome, bool) {
	var missing []int
	for i, p := range parts {
		if _, ok := s.limits[p.Limit]; ok {
			continue
		}
		if s.templateOf(p.Limit) == nil {
			return outcome{status: UnknownLimit, detail: boundDetail(fmt.Sprintf("limit %q does not exist", p.Limit))}, false
		}
		missing = append(missing, i)
	}
	for _, i := range missing {
		t, ofT := s.templateOf(parts[i].Limit), int64(0)
		for _, j := range missing {
			if s.templateOf(parts[j].Limit) == t {
				ofT++
			}
		}
		if o, ok := s.canCreate(nowNanos, t, ofT, int64(len(missing))); !ok {
			return o, false
		}
	}
	for _, i := range missing {
		s.createKey(parts[i].Limit, s.templateOf(parts[i].Limit), nowNanos)
	}
	return outcome{}, true
}

// configName names l's configuration in a detail: its version, or, for
// a templated key, its template (a key created again has another
// version, and the same answers).
func (l *limit) configName() string {
	if l.templated() {
		return "its template's"
	}
	return fmt.Sprintf("version %d", l.version)
}

// touch records a reserve on l at nowNanos (nothing for an explicit
// limit).
func (s *state) touch(l *limit, nowNanos int64) {
	if l.templated() {
		s.keyOf(l).touchedAtNanos = nowNanos
	}
}

// keyAtRest reports whether templated key l may be forgotten at nowNanos
// without changing any decision: no live reservation names it and its
// pacer is at rest. If not, it also says when to look again.
func (s *state) keyAtRest(l *limit, nowNanos int64) (int64, bool) {
	if s.reservations.pins[l.name] > 0 || l.pool != nil {
		return satAddNanos(nowNanos, s.ownTemplate(l).idleNanos), false
	}
	at, ok := bucket.RestAtNanos(l.pacer, nowNanos)
	if !ok {
		return satAddNanos(nowNanos, s.ownTemplate(l).idleNanos), false
	}
	return at, at <= nowNanos
}

// unkey makes templated key l an explicit limit (nothing if it is one):
// out of the drop heap and its template's count.
func (s *state) unkey(l *limit, why KeyChangeKind) {
	if !l.templated() {
		return
	}
	s.noteKeyChange(l, why)
	heap.Remove(&s.keys, int(l.keySlot-1))
	t := s.ownTemplate(l)
	t.keys--
	s.retireIfEmpty(t)
}

// dropIdleKeys pops up to maxDropsPerEntry keys due at nowNanos: drops
// those idle for their template's idle time and at rest, and puts the
// others back at the time they may be.
func (s *state) dropIdleKeys(nowNanos int64) {
	if !s.dropKeys {
		return
	}
	for range maxDropsPerEntry {
		if s.keys.Len() == 0 || s.keys.es[0].dueAtNanos > nowNanos {
			return
		}
		l := s.keys.es[0].l
		due := satAddNanos(s.keys.es[0].touchedAtNanos, s.ownTemplate(l).idleNanos)
		if due <= nowNanos {
			var rested bool
			if due, rested = s.keyAtRest(l, nowNanos); rested {
				s.unkey(l, KeyDroppedIdle)
				s.removeLimit(l)
				continue
			}
		}
		s.keys.es[0].dueAtNanos = max(due, satAddNanos(nowNanos, 1))
		heap.Fix(&s.keys, 0)
	}
}

// templatedDetail is why a lease command or policy does not apply to
// name, a templated key (live or not yet created), or "" if name is not
// one.
func (s *state) templatedDetail(name string) string {
	if l, ok := s.limits[name]; ok && !l.templated() {
		return ""
	}
	if l, ok := s.limits[name]; !ok || !l.templated() {
		if s.templateOf(name) == nil {
			return ""
		}
	}
	return fmt.Sprintf("limit %q is a key of a template: keys made from a template are reserved one request at a time, never leased (put the limit explicitly to lease it)", name)
}

// withTemplatedKeyCap bounds f's templated keys by n (1 <= n <=
// MaxTemplatedKeys) instead of MaxTemplatedKeys, for tests that fill it;
// f must be empty. It returns f.
func (f *FSM) withTemplatedKeyCap(n int) *FSM {
	if n < 1 || n > MaxTemplatedKeys || f.st.appliedIndex != 0 {
		panic(fmt.Sprintf("fsm: templated key cap %d on an FSM at index %d", n, f.st.appliedIndex))
	}
	f.st.maxTemplatedKeys = n
	return f
}

// keepingIdleKeys makes f keep every templated key (no idle drops), for
// the tests that compare it with one that drops them; f must be empty. It
// returns f.
func (f *FSM) keepingIdleKeys() *FSM {
	if f.st.appliedIndex != 0 {
		panic(fmt.Sprintf("fsm: keepingIdleKeys on an FSM at index %d", f.st.appliedIndex))
	}
	f.st.dropKeys = false
	return f
}

// appendTemplates appends the templates section of a snapshot.
func (s *state) appendTemplates(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s.templates)))
	for _, prefix := range slices.Sorted(maps.Keys(s.templates)) {
		t := s.templates[prefix]
		b = appendBytes(b, t.prefix)
		b = append(b, boolByte(t.active))
		b = appendBytes(b, t.conf.raw)
		b = binary.AppendUvarint(b, uint64(t.idleNanos))
		b = binary.AppendUvarint(b, uint64(t.maxKeys))
	}
	return b
}

// decodeTemplates reads the templates section of a snapshot.
func decodeTemplates(r *reader, st *state) {
	n := r.uvarintMax("template count", MaxTemplates)
	prev := ""
	for i := range int(n) {
		r.unit, r.index = "template", i
		prefix := r.bytes("prefix", MaxTemplatePrefixLen)
		active := r.bool1("active")
		raw := r.bytes("config", MaxConfigBytes)
		idle := int64(r.uvarintMax("idle nanos", uint64(MaxTemplateIdleNanos)))
		maxKeys := int64(r.uvarintMax("max keys", MaxTemplatedKeys))
		if r.err != nil {
			return
		}
		if i > 0 && string(prefix) <= prev {
			r.fail("prefix %q does not sort after %q", prefix, prev)
			return
		}
		prev = string(prefix)
		compiled, err := decodeConfig(prev, raw)
		if err != nil {
			r.fail("%v", err)
			return
		}
		t := PutTemplate{Prefix: prev, Config: compiled.Config(), IdleNanos: idle, MaxKeys: maxKeys}
		if err := t.Validate(); err != nil {
			r.fail("%v", err)
			return
		}
		st.templates[prev] = &template{prefix: prev, conf: st.configs.acquire(raw, compiled), idleNanos: idle, maxKeys: maxKeys, active: active}
	}
	r.unit = ""
}

// decodeTemplatedKey reads whether limit l (called name) is a templated
// key, and its times.
func decodeTemplatedKey(r *reader, st *state, l *limit, name string) {
	if !r.bool1("templated") {
		return
	}
	touched, due := r.varint("touch time"), r.varint("due time")
	if r.err != nil {
		return
	}
	i := strings.IndexByte(name, ':')
	switch {
	case i <= 0 || i == len(name)-1 || st.templates[name[:i]] == nil:
		r.fail("limit %q is a templated key, but no template has its prefix", name)
	case touched < 0 || touched > st.lastNowNanos || due < 0:
		r.fail("templated key %q touched at %d, due at %d (allowed: touched in [0, %d], due >= 0)", name, touched, due, st.lastNowNanos)
	case l.shadow:
		r.fail("templated key %q is in shadow mode (only an explicit put sets it)", name)
	default:
		st.keys.es = append(st.keys.es, keyEntry{l: l, touchedAtNanos: touched, dueAtNanos: due})
		l.keySlot = int32(len(st.keys.es))
		st.templates[name[:i]].keys++
	}
}

// checkTemplatedKeys checks, once the whole snapshot is read, what
// relates templates, their keys and the lease book, and orders the keys
// for their drop.
func checkTemplatedKeys(r *reader, st *state) {
	if r.err != nil {
		return
	}
	if len(st.keys.es) > MaxTemplatedKeys {
		r.fail("%d templated keys (allowed: at most %d)", len(st.keys.es), MaxTemplatedKeys)
		return
	}
	for _, e := range st.keys.es {
		if e.l.pool != nil {
			r.fail("templated key %q is leased (keys made from a template are never leased)", e.l.name)
			return
		}
	}
	for _, t := range st.templates {
		if !t.active && t.keys == 0 {
			r.fail("deleted template %q has no live key (it is forgotten with its last key)", t.prefix)
			return
		}
	}
	heap.Init(&st.keys)
}
