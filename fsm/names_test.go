package fsm

import (
	"slices"
	"strings"
	"testing"
)

// all returns x's names in order.
func (x nameIndex) all() []string {
	var out []string
	x.each(func(l *limit) bool {
		out = append(out, l.name)
		return true
	})
	return out
}

// checkNameIndexes checks that f's indexes derived from its limits
// (names.go) are exactly what the limits say: every name in order, the
// shadow and leased names, and the explicit limits counted by prefix.
func checkNameIndexes(t testing.TB, f *FSM) {
	t.Helper()
	s := &f.st
	var names, shadows, pooled []string
	prefixes := map[string]int{}
	for name, l := range s.limits {
		names = append(names, name)
		if l.shadow {
			shadows = append(shadows, name)
		}
		if l.pool != nil {
			pooled = append(pooled, name)
		}
		if l.explicitCounted == l.templated() {
			t.Errorf("limit %q: counted as explicit %v, templated %v", name, l.explicitCounted, l.templated())
		}
		if i := strings.IndexByte(name, ':'); i > 0 && !l.templated() {
			prefixes[name[:i]]++
		}
	}
	for _, c := range []struct {
		what string
		want []string
		idx  nameIndex
	}{{"names", names, s.names}, {"shadow names", shadows, s.shadows}, {"leased names", pooled, s.pooled}} {
		slices.Sort(c.want)
		if got := c.idx.all(); !slices.Equal(got, c.want) {
			t.Errorf("%s index holds %q, the limits say %q", c.what, got, c.want)
		}
	}
	if len(prefixes) != len(s.explicitPrefixes) {
		t.Errorf("explicit limits by prefix: %v, the limits say %v", s.explicitPrefixes, prefixes)
		return
	}
	for p, n := range prefixes {
		if s.explicitPrefixes[p] != n {
			t.Errorf("explicit limits by prefix: %v, the limits say %v", s.explicitPrefixes, prefixes)
			return
		}
	}
}

// TestShadowLimits: ShadowLimits returns exactly the limits in shadow
// mode, in name order, as Limits shows them, through puts that set and
// clear shadow mode, deletes, templated keys and a restore.
func TestShadowLimits(t *testing.T) {
	h := newHarness(t)
	cfg := strict(t, 10, 1)
	putShadow := func(name string, shadow bool) {
		t.Helper()
		b, err := AppendPut(nil, at(0), PutLimit{Name: name, Config: cfg, Shadow: shadow})
		if err != nil {
			t.Fatal(err)
		}
		h.apply(b)
	}
	h.apply(mustEntry(AppendPutTemplate(nil, at(0), PutTemplate{Prefix: "k", Config: cfg, IdleNanos: MaxTemplateIdleNanos, MaxKeys: 10})))
	h.reserve(0, rsv("k:1", 1, 0, ""), rsv("k:2", 1, 0, ""))
	putShadow("b", true)
	putShadow("a", true)
	putShadow("c", true)
	putShadow("k:2", true) // a key made explicit, in shadow mode
	putShadow("c", false)
	h.del(0, "a")
	check := func(f *FSM, want ...string) {
		t.Helper()
		var got, fromLimits []string
		for _, l := range f.ShadowLimits() {
			got = append(got, l.Name)
		}
		for _, l := range f.Limits() {
			if l.Shadow {
				fromLimits = append(fromLimits, l.Name)
			}
		}
		if !slices.Equal(got, want) || !slices.Equal(fromLimits, want) {
			t.Fatalf("ShadowLimits %q, Limits in shadow mode %q, want %q", got, fromLimits, want)
		}
	}
	check(h.f, "b", "k:2")
	g := New()
	if err := restore(g, snapshotBytes(t, h.f)); err != nil {
		t.Fatal(err)
	}
	check(g, "b", "k:2")
	checkNameIndexes(t, g)
}
