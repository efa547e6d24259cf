package fsm

import "testing"

// checkConfigTable checks that f's shared configs (limitconfig.go) are
// exactly the configs its limits run, each counted once per limit that
// runs it, and that every limit's pacer runs its limit's config; and the
// other indexes derived from the limits (checkNameIndexes).
func checkConfigTable(t testing.TB, f *FSM) {
	t.Helper()
	checkNameIndexes(t, f)
	s := &f.st
	runs := map[*limitConfig]int{}
	for name, l := range s.limits {
		if l.conf == nil || s.configs[l.conf.raw] != l.conf {
			t.Errorf("limit %q runs a config the table does not hold", name)
			return
		}
		if got := l.pacer.Config(); got != l.conf.cfg {
			t.Errorf("limit %q: its pacer runs %+v, the limit %+v", name, got, l.conf.cfg)
		}
		runs[l.conf]++
	}
	for prefix, tp := range s.templates { // a template holds its config too
		if tp.conf == nil || s.configs[tp.conf.raw] != tp.conf {
			t.Errorf("template %q holds a config the table does not hold", prefix)
			return
		}
		runs[tp.conf]++
	}
	if len(runs) != len(s.configs) {
		t.Errorf("the config table holds %d configs, the limits run %d", len(s.configs), len(runs))
	}
	for c, n := range runs {
		if c.refs != n {
			t.Errorf("config of %s counts %d limits and templates, %d run or hold it", c.cfg.Spec.Algorithm, c.refs, n)
		}
	}
}

// TestLimitsShareConfigs: limits put with the same config share one entry
// of the table, which forgets a config when no limit runs it any more, and
// a restored state shares them alike.
func TestLimitsShareConfigs(t *testing.T) {
	h := newHarness(t)
	a, b := strict(t, 10, 1), bursty(t, 10)
	for _, name := range []string{"k:1", "k:2", "k:3"} {
		h.put(0, name, a)
	}
	h.put(0, "other", b)
	checkConfigTable(t, h.f)
	if n := len(h.f.st.configs); n != 2 {
		t.Fatalf("4 limits of 2 configs: the table holds %d configs, want 2", n)
	}
	h.put(sec, "k:1", strict(t, 20, 1)) // reconfigured
	h.put(sec, "k:2", b)                // another algorithm
	h.del(sec, "k:3")
	checkConfigTable(t, h.f)
	if n := len(h.f.st.configs); n != 2 {
		t.Fatalf("after the puts and the delete: the table holds %d configs, want 2 (strict 20/s, bursty)", n)
	}
	g := New()
	if err := restore(g, snapshotBytes(t, h.f)); err != nil {
		t.Fatal(err)
	}
	checkConfigTable(t, g)
	if n := len(g.st.configs); n != 2 {
		t.Fatalf("restored: the table holds %d configs, want 2", n)
	}
	for _, name := range []string{"k:1", "k:2", "other"} {
		h.del(2*sec, name)
	}
	if n := len(h.f.st.configs); n != 0 {
		t.Fatalf("no limit left: the table holds %d configs, want 0", n)
	}
}
