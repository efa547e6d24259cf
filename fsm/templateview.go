package fsm

import (
	"maps"
	"slices"

	"github.com/permitd/permitd/bucket"
)

// templateview.go: the templates as the edge reads them (GET
// /v1/templates).

// TemplateInfo is a template as the register holds it.
type TemplateInfo struct {
	Prefix    string
	Config    bucket.Config
	IdleNanos int64
	MaxKeys   int64
	// LiveKeys is how many keys it created live now.
	LiveKeys int64
	// Deleted reports a deleted template whose keys still live: it
	// creates no key, and is forgotten with its last key (LiveKeys of
	// them are left, each with the config it was created with; Config,
	// IdleNanos and MaxKeys are those of the template when deleted).
	// Only AllTemplates lists one.
	Deleted bool
}

// info is t's view.
func (t *template) info() TemplateInfo {
	return TemplateInfo{Prefix: t.prefix, Config: t.conf.cfg, IdleNanos: t.idleNanos, MaxKeys: t.maxKeys, LiveKeys: t.keys, Deleted: !t.active}
}

// AllTemplates returns every template the register holds, sorted by
// prefix: the active ones, and the deleted ones whose keys still live
// (Deleted true), at most MaxTemplates in all. It reads no key.
func (f *FSM) AllTemplates() []TemplateInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]TemplateInfo, 0, len(f.st.templates))
	for _, prefix := range slices.Sorted(maps.Keys(f.st.templates)) {
		out = append(out, f.st.templates[prefix].info())
	}
	return out
}

// Templates returns the active templates (at most MaxTemplates), sorted
// by prefix. A deleted template whose keys still live is not one
// (AllTemplates lists it).
func (f *FSM) Templates() []TemplateInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]TemplateInfo, 0, len(f.st.templates))
	for _, prefix := range slices.Sorted(maps.Keys(f.st.templates)) {
		if t := f.st.templates[prefix]; t.active {
			out = append(out, t.info())
		}
	}
	return out
}

// Template returns the active template of prefix, if there is one.
func (f *FSM) Template(prefix string) (TemplateInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.st.templates[prefix]
	if t == nil || !t.active {
		return TemplateInfo{}, false
	}
	return t.info(), true
}
