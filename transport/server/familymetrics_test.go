package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
)

// familyFSM is an FSM whose applied entries are observed by m as a node
// observes them (key changes; grants with their template), and read as a
// node reads it (the counters of the keys that left each family added).
type familyFSM struct {
	tb    testing.TB
	f     *fsm.FSM
	m     *LimitMetrics
	left  node.KeyFamilies
	index uint64
}

func (h *familyFSM) LimitStats(n int) ([]fsm.LimitStats, int) { return h.f.LimitStats(n) }
func (h *familyFSM) TemplateStats() []fsm.TemplateStats {
	ts := h.f.TemplateStats()
	h.left.Add(ts)
	return ts
}

func (h *familyFSM) apply(b []byte, err error) any {
	h.tb.Helper()
	if err != nil {
		h.tb.Fatal(err)
	}
	h.index++
	res := h.f.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: b})
	h.left.Observe(h.f.AppliedKeyChanges())
	for _, c := range h.f.AppliedKeyChanges() {
		h.m.KeyChanged(c)
	}
	if rs, ok := res.([]fsm.ReserveResult); ok {
		for i, r := range rs {
			q := &h.f.AppliedEntry().Reserves[i]
			switch r.Status {
			case fsm.Granted:
				h.m.GrantedWait(q.Limit, h.f.KeyTemplate(q.Limit), r.WaitNanos)
			case fsm.KeysFull:
				h.m.KeysFull(q.Limit[:strings.IndexByte(q.Limit, ':')])
			}
		}
	}
	return res
}

// newFamilyFSM returns 10 explicit limits x0..x9 and the templates cust
// and team (idle 10 s, at most max keys), observed by a LimitMetrics
// exporting up to 5000 limits.
func newFamilyFSM(tb testing.TB, max int64) (*familyFSM, *prometheus.Registry) {
	h := &familyFSM{tb: tb, f: fsm.New(), m: NewLimitMetrics(5000)}
	reg := prometheus.NewRegistry()
	h.m.Register(reg, h)
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 100})
	if err != nil {
		tb.Fatal(err)
	}
	st := fsm.Stamp{Nanos: int64(time.Second), Term: 1}
	for _, p := range []string{"cust", "team"} {
		h.apply(fsm.AppendPutTemplate(nil, st, fsm.PutTemplate{Prefix: p, Config: cfg, IdleNanos: int64(10 * time.Second), MaxKeys: max}))
	}
	for i := range 10 {
		h.apply(fsm.AppendPut(nil, st, fsm.PutLimit{Name: fmt.Sprintf("x%d", i), Config: cfg}))
	}
	return h, reg
}

// createKeys reserves once on each of n new keys of template p at 2 s.
func (h *familyFSM) createKeys(p string, n int) {
	var batch []fsm.Reserve
	for i := range n {
		batch = append(batch, fsm.Reserve{Limit: fmt.Sprintf("%s:k%07d", p, i), Permits: 1})
		if len(batch) == 512 || i == n-1 {
			h.apply(fsm.AppendReserveBatch(nil, fsm.Stamp{Nanos: int64(2 * time.Second), Term: 1}, batch))
			batch = batch[:0]
		}
	}
}

// TestTemplatedKeysExportFamilies: a registry with many templated keys
// exports the series of its explicit limits and one family per template,
// as many series with 5 000 keys as with 50; the family counts its live
// keys and sums their counters.
func TestTemplatedKeysExportFamilies(t *testing.T) {
	series := func(keys int) (int, *prometheus.Registry) {
		h, reg := newFamilyFSM(t, 1<<20)
		h.createKeys("cust", keys)
		h.createKeys("team", keys/2)
		n, err := testutil.GatherAndCount(reg)
		if err != nil {
			t.Fatal(err)
		}
		return n, reg
	}
	few, _ := series(50)
	many, reg := series(5000)
	if many != few {
		t.Errorf("%d series with 7 500 templated keys, %d with 75: want as many (one family per template, no series per key)", many, few)
	}
	if n, _ := testutil.GatherAndCount(reg, "permitd_limit_requests_total"); n != 2*10 {
		t.Errorf("%d permitd_limit_requests_total series, want %d (two per explicit limit, none per key)", n, 2*10)
	}
	want := `
# HELP permitd_limits_exported Limits that have per-limit series (the first --metrics-max-limits by name).
# TYPE permitd_limits_exported gauge
permitd_limits_exported 10
# HELP permitd_limits_unexported Limits beyond --metrics-max-limits (by name), which have no per-limit series.
# TYPE permitd_limits_unexported gauge
permitd_limits_unexported 0
# HELP permitd_template_keys Live keys the template created (a deleted template is listed while its keys live); the same on every node.
# TYPE permitd_template_keys gauge
permitd_template_keys{template="cust"} 5000
permitd_template_keys{template="team"} 2500
# HELP permitd_template_keys_created_total Keys the template created on their first reserve, as this node applied the entries since it started.
# TYPE permitd_template_keys_created_total counter
permitd_template_keys_created_total{template="cust"} 5000
permitd_template_keys_created_total{template="team"} 2500
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "permitd_limits_exported", "permitd_limits_unexported",
		"permitd_template_keys", "permitd_template_keys_created_total"); err != nil {
		t.Error(err)
	}
}

// TestFamilyCountersMoveWithKeys: the created, dropped and KeysFull
// counters move as keys are created, refused and dropped once the
// cluster time passes their idle time, and the family's request counters
// keep what dropped keys counted (they never go down).
func TestFamilyCountersMoveWithKeys(t *testing.T) {
	h, reg := newFamilyFSM(t, 100)
	h.createKeys("cust", 103) // 3 refused KeysFull
	h.apply(fsm.AppendReserveBatch(nil, fsm.Stamp{Nanos: int64(2 * time.Second), Term: 1}, []fsm.Reserve{{Limit: "cust:k0000000", Permits: 1}}))
	check := func(when, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "permitd_template_keys", "permitd_template_keys_created_total",
			"permitd_template_keys_dropped_total", "permitd_template_keys_full_total", "permitd_template_requests_total"); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	const head = `
# HELP permitd_template_keys Live keys the template created (a deleted template is listed while its keys live); the same on every node.
# TYPE permitd_template_keys gauge
permitd_template_keys{template="cust"} %d
permitd_template_keys{template="team"} 0
# HELP permitd_template_keys_created_total Keys the template created on their first reserve, as this node applied the entries since it started.
# TYPE permitd_template_keys_created_total counter
permitd_template_keys_created_total{template="cust"} 100
permitd_template_keys_created_total{template="team"} 0
# HELP permitd_template_keys_dropped_total Keys of the template the register dropped as idle and at rest, as this node applied the entries since it started.
# TYPE permitd_template_keys_dropped_total counter
permitd_template_keys_dropped_total{template="cust"} %d
permitd_template_keys_dropped_total{template="team"} 0
# HELP permitd_template_keys_full_total Reserves refused because a new key of the template would pass a cap on keys (the template's max keys, or all templates'), as this node applied the entries since it started.
# TYPE permitd_template_keys_full_total counter
permitd_template_keys_full_total{template="cust"} 3
permitd_template_keys_full_total{template="team"} 0
# HELP permitd_template_requests_total Reserves the register answered on the template's keys, by outcome (granted, refused): the live keys' counters plus those of the keys that left the family (dropped, made explicit, deleted) since this node started.
# TYPE permitd_template_requests_total counter
permitd_template_requests_total{outcome="granted",template="cust"} 100
permitd_template_requests_total{outcome="granted",template="team"} 0
permitd_template_requests_total{outcome="refused",template="cust"} 1
permitd_template_requests_total{outcome="refused",template="team"} 0
`
	check("created", fmt.Sprintf(head, 100, 0))
	// Idle from 2 s, due at 12 s: 64 keys go per entry.
	h.apply(fsm.AppendNoop(nil, fsm.Stamp{Nanos: int64(12*time.Second) - 1, Term: 1}), nil)
	check("before the idle time", fmt.Sprintf(head, 100, 0))
	h.apply(fsm.AppendNoop(nil, fsm.Stamp{Nanos: int64(12 * time.Second), Term: 1}), nil)
	check("one entry past the idle time", fmt.Sprintf(head, 36, 64))
	h.apply(fsm.AppendNoop(nil, fsm.Stamp{Nanos: int64(12 * time.Second), Term: 1}), nil)
	check("two entries past the idle time", fmt.Sprintf(head, 0, 100))
}
