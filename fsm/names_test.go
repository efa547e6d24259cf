package fsm

import (
	"slices"
	"strings"
	"testing"
)

// all returns x's names in order.
func (x nameIndex) all() []string {
	var out []string
	x.each(func(name string) bool {
		out = append(out, name)
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
