package fsm

import (
	"maps"
	"slices"

	"github.com/permitd/permitd/bucket"
)

// templateview.go: the templates as the edge reads them (GET
// /v1/templates).

// TemplateInfo is an active template as the register holds it.
type TemplateInfo struct {
	Prefix    string
	Config    bucket.Config
	IdleNanos int64
	MaxKeys   int64
	// LiveKeys is how many keys it created live now.
	LiveKeys int64
}

// info is t's view.
func (t *template) info() TemplateInfo {
	return TemplateInfo{Prefix: t.prefix, Config: t.conf.cfg, IdleNanos: t.idleNanos, MaxKeys: t.maxKeys, LiveKeys: t.keys}
}

// Templates returns the active templates (at most MaxTemplates), sorted
// by prefix. A deleted template whose keys still live is not one.
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
