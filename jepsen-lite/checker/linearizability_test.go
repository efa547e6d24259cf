package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/permitd/permitd/jepsen-lite/history"
)

func TestLinearizability(t *testing.T) {
	const ok, fail, info = history.OK, history.Fail, history.Info
	fresh := func(m int64) map[string]RegisterSpec {
		return map[string]RegisterSpec{"api": {IntervalNanos: sec, MaxReserved: m, Fresh: true}}
	}
	// Seed 2367's shape: the timeline stands still (the leader's clock
	// stalled), so the queue stays full and every refusal names the same
	// slot; over 3 s that needs a lag of 3 s.
	stalled := []opSpec{
		{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
		{p: 1, call: 20 * ms, ret: 30 * ms, typ: ok, maxWait: 2 * sec, resp: granted(980 * ms)},
		{p: 2, call: 500 * ms, ret: 510 * ms, typ: fail, resp: refused(1500 * ms)},
		{p: 2, call: 1500 * ms, ret: 1510 * ms, typ: fail, resp: refused(1500 * ms)},
		{p: 2, call: 3500 * ms, ret: 3510 * ms, typ: fail, resp: refused(1500 * ms)},
	}
	tests := []struct {
		name   string
		limits map[string]RegisterSpec
		tol    int64
		lag    int64
		ops    []opSpec
		valid  bool
		want   string
	}{
		{
			name: "sequential grants, a wait and a refusal", limits: fresh(2), valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: ok, maxWait: 2 * sec, resp: granted(900 * ms)},
				{p: 2, call: 200 * ms, ret: 210 * ms, typ: fail, resp: refused(1800 * ms)},
				{p: 0, call: 2500 * ms, ret: 2510 * ms, typ: ok, resp: granted(0)},
			},
		},
		{
			name: "concurrent grants in the one order that works", limits: fresh(2), valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 50 * ms, typ: ok, maxWait: 2 * sec, resp: granted(sec)},
				{p: 1, call: 0, ret: 50 * ms, typ: ok, resp: granted(0)},
			},
		},
		{
			name: "two concurrent immediate grants: no order spaces them", limits: fresh(5),
			ops: []opSpec{
				{p: 0, call: 0, ret: 50 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 0, ret: 50 * ms, typ: ok, resp: granted(0)},
			},
			want: "no linearization",
		},
		{
			name: "two sequential immediate grants 20ms apart", limits: fresh(5),
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 20 * ms, ret: 30 * ms, typ: ok, resp: granted(0)},
			},
			want: "no linearization",
		},
		{
			name: "wait too short for the slot before it", limits: fresh(5),
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: ok, maxWait: sec, resp: granted(500 * ms)},
			},
			want: "earliest op outside it: #2",
		},
		{
			name: "a wait on a fresh register", limits: fresh(5),
			ops:  []opSpec{{p: 0, call: 0, ret: 10 * ms, typ: ok, maxWait: sec, resp: granted(500 * ms)}},
			want: "no linearization",
		},
		{
			name: "a wait with an unknown initial state", valid: true,
			limits: map[string]RegisterSpec{"api": {IntervalNanos: sec, MaxReserved: 5}},
			ops:    []opSpec{{p: 0, call: 0, ret: 10 * ms, typ: ok, maxWait: sec, resp: granted(500 * ms)}},
		},
		{
			name: "refusal of a request that fits", limits: fresh(1),
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 500 * ms, ret: 510 * ms, typ: fail, maxWait: 2 * sec, resp: refused(500 * ms)},
			},
			want: "refused although the slot",
		},
		{
			// Decided with a wait of 500 ms > max_wait 495 ms; the node
			// held the answer 20 ms and took them off: retry_after 480 ms.
			name: "refusal whose retry_after the node shortened by its hold", limits: fresh(1), valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 500 * ms, ret: 520 * ms, typ: fail, maxWait: 495 * ms, resp: refused(480 * ms)},
			},
		},
		{
			name: "refusal that fits even with its whole duration added back", limits: fresh(1),
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 500 * ms, ret: 520 * ms, typ: fail, maxWait: 600 * ms, resp: refused(480 * ms)},
			},
			want: "at most 500ms at the decision",
		},
		{
			// A grant whose permit expired while the node held it is
			// answered as a refusal with retry_after 1 ns: it took the
			// slot [1 s, 2 s), so the next grant waits for 2 s.
			name: "refusal at the floor took a slot", limits: fresh(2), valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 20 * ms, ret: 30 * ms, typ: fail, maxWait: 2 * sec, resp: refused(1)},
				{p: 2, call: 40 * ms, ret: 50 * ms, typ: ok, maxWait: 3 * sec, resp: granted(1960 * ms)},
			},
		},
		{
			name: "grant waiting longer than max_wait", limits: fresh(5),
			ops:  []opSpec{{p: 0, call: 0, ret: 10 * ms, typ: ok, maxWait: 100 * ms, resp: granted(200 * ms)}},
			want: "> max_wait",
		},
		{
			name: "grant reserving more than max_reserved ahead", limits: fresh(1),
			ops:  []opSpec{{p: 0, call: 0, ret: 10 * ms, typ: ok, maxWait: 5 * sec, resp: granted(1500 * ms)}},
			want: "> max_reserved 1",
		},
		{
			name: "refusal whose retry_after contradicts the grant before it", limits: fresh(0),
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 500 * ms, ret: 510 * ms, typ: fail, resp: refused(100 * ms)},
			},
			want: "no linearization",
		},
		{
			name: "refusal consistent with the grant before it", limits: fresh(0), valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 500 * ms, ret: 510 * ms, typ: fail, resp: refused(500 * ms)},
			},
		},
		{
			name: "info op must have taken effect to explain a refusal", limits: fresh(0), valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 20 * ms, typ: info, resp: history.ReserveResponse{Error: "timeout"}},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: fail, resp: refused(900 * ms)},
			},
		},
		{
			name: "never-completed op may have taken effect too", limits: fresh(0), valid: true,
			ops: []opSpec{
				{p: 0, call: 0},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: fail, resp: refused(900 * ms)},
			},
		},
		{
			name: "the same refusal when the earlier op certainly failed", limits: fresh(0),
			ops: []opSpec{
				{p: 0, call: 0, ret: 20 * ms, typ: fail, resp: history.ReserveResponse{Error: "400"}},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: fail, resp: refused(900 * ms)},
			},
			want: "no linearization",
		},
		{
			name: "info op may not have taken effect", limits: fresh(0), valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 20 * ms, typ: info},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: ok, resp: granted(0)},
				{p: 2, call: 1200 * ms, ret: 1210 * ms, typ: ok, resp: granted(0)},
			},
		},
		{
			name: "info op cannot excuse an illegal pair of grants", limits: fresh(0),
			ops: []opSpec{
				{p: 0, call: 0, ret: 20 * ms, typ: info},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: ok, resp: granted(0)},
				{p: 2, call: 300 * ms, ret: 310 * ms, typ: ok, resp: granted(0)},
			},
			want: "no linearization",
		},
		{
			name: "timeline lag beyond the budget", limits: fresh(5),
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 2 * sec, ret: 2*sec + 10*ms, typ: ok, maxWait: 5 * sec, resp: granted(3 * sec)},
			},
			want: "no linearization",
		},
		{
			name: "timeline lag within the budget", limits: fresh(5), lag: 4 * sec, valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 2 * sec, ret: 2*sec + 10*ms, typ: ok, maxWait: 5 * sec, resp: granted(3 * sec)},
			},
		},
		{name: "a stalled timeline beyond the lag budget", limits: fresh(1), lag: sec, ops: stalled, want: "earliest op outside it: #8"},
		{name: "a stalled timeline within the lag budget", limits: fresh(1), lag: 4 * sec, ops: stalled, valid: true},
		{
			name: "slot 10ms early without tolerance", limits: fresh(5),
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: ok, maxWait: sec, resp: granted(880 * ms)},
			},
			want: "no linearization",
		},
		{
			name: "slot 10ms early within tolerance", limits: fresh(5), tol: 10 * ms, valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: ok, maxWait: sec, resp: granted(880 * ms)},
			},
		},
		{
			name: "multi-permit grant spaces the next one by n intervals", limits: fresh(5), valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, permits: 2, resp: granted(0)},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: ok, maxWait: 5 * sec, resp: granted(1900 * ms)},
			},
		},
		{
			name: "multi-permit grant followed by a one-interval wait", limits: fresh(5),
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, permits: 2, resp: granted(0)},
				{p: 1, call: 100 * ms, ret: 110 * ms, typ: ok, maxWait: 5 * sec, resp: granted(900 * ms)},
			},
			want: "no linearization",
		},
		{
			name: "replayed grant of the same request ID", limits: fresh(5), valid: true,
			ops: []opSpec{
				{p: 0, id: "r1", call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, id: "r1", call: 20 * ms, ret: 30 * ms, typ: ok, resp: history.ReserveResponse{Granted: true, Duplicate: true}},
			},
		},
		{
			name: "same request ID granted twice without replay", limits: fresh(5),
			ops: []opSpec{
				{p: 0, id: "r1", call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, id: "r1", call: 20 * ms, ret: 30 * ms, typ: ok, resp: granted(0)},
			},
			want: "no linearization",
		},
		{
			name: "first answer lost, retry replayed with a shrunk wait", limits: fresh(5), valid: true,
			ops: []opSpec{
				{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, id: "r2", call: 100 * ms, ret: 700 * ms, typ: ok, maxWait: sec, resp: history.ReserveResponse{Granted: true, WaitNanos: 300 * ms, Duplicate: true}},
			},
		},
		{
			name: "other limits are independent", valid: true,
			limits: map[string]RegisterSpec{"a": {IntervalNanos: sec, Fresh: true}, "b": {IntervalNanos: sec, Fresh: true}},
			ops: []opSpec{
				{p: 0, limit: "a", call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, limit: "b", call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 2, limit: "c", call: 0, ret: 10 * ms, typ: ok, resp: granted(0)}, // not checked
			},
		},
		{
			name:   "a violation names its limit",
			limits: map[string]RegisterSpec{"a": {IntervalNanos: sec, Fresh: true}, "b": {IntervalNanos: sec, Fresh: true}},
			ops: []opSpec{
				{p: 0, limit: "a", call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 1, limit: "b", call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
				{p: 2, limit: "b", call: 20 * ms, ret: 30 * ms, typ: ok, resp: granted(0)},
			},
			want: `limit "b": no linearization`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Linearizability(LinearizabilityInput{
				Ops: build(t, tt.ops...), Limits: tt.limits, ToleranceNanos: tt.tol, TimelineLagNanos: tt.lag,
			})
			expect(t, r, err, tt.valid, tt.want)
		})
	}
}

func TestLinearizabilityDetailsAndVisualization(t *testing.T) {
	dir := t.TempDir()
	ops := build(t,
		opSpec{p: 0, call: 0, ret: 10 * ms, typ: history.OK, resp: granted(0)},
		opSpec{p: 1, call: 20 * ms, ret: 30 * ms, typ: history.OK, resp: granted(0)},
		opSpec{p: 2, call: 40 * ms, ret: 50 * ms, typ: history.Fail, resp: history.ReserveResponse{Error: "invalid"}},
		opSpec{p: 3, f: history.FPut, call: 60 * ms, ret: 70 * ms, typ: history.OK, value: history.LimitRequest{Limit: "api"}},
	)
	r, err := Linearizability(LinearizabilityInput{
		Ops:          ops,
		Limits:       map[string]RegisterSpec{"api": {IntervalNanos: sec, Fresh: true}},
		VisualizeDir: dir,
	})
	expect(t, r, err, false, "no linearization")
	if got := r.Details["per_limit"].(map[string]string)["api"]; got != "Illegal" {
		t.Fatalf("per_limit = %v", r.Details["per_limit"])
	}
	if r.Details["ops"] != 2 || r.Details["skipped_ops"] != 1 {
		t.Fatalf("ops %v skipped %v", r.Details["ops"], r.Details["skipped_ops"])
	}
	b, err := os.ReadFile(filepath.Join(dir, "linearizability-api.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "reserve(api") {
		t.Fatal("visualization does not describe the operations")
	}
}

func TestLinearizabilityInvalidInput(t *testing.T) {
	good := map[string]RegisterSpec{"api": {IntervalNanos: sec}}
	ops := build(t, opSpec{p: 0, call: 0, ret: 1, typ: history.OK, resp: granted(0)})
	tests := []struct {
		name string
		in   LinearizabilityInput
	}{
		{"negative tolerance", LinearizabilityInput{Ops: ops, Limits: good, ToleranceNanos: -1}},
		{"negative lag", LinearizabilityInput{Ops: ops, Limits: good, TimelineLagNanos: -1}},
		{"zero interval", LinearizabilityInput{Ops: ops, Limits: map[string]RegisterSpec{"api": {}}}},
		{"negative max reserved", LinearizabilityInput{Ops: ops, Limits: map[string]RegisterSpec{"api": {IntervalNanos: 1, MaxReserved: -1}}}},
		{"invalid history", LinearizabilityInput{Ops: []history.Op{{Type: history.OK, F: history.FReserve}}, Limits: good}},
		{"negative permits", LinearizabilityInput{Ops: build(t, opSpec{p: 0, permits: -2, call: 0, ret: 1, typ: history.OK}), Limits: good}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Linearizability(tt.in); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestCanonicalMergesPastMaxBoxes(t *testing.T) {
	var boxes []regBox
	for i := range maxBoxes + 5 {
		boxes = append(boxes, regBox{Lo: 100 - int64(i), Hi: 100 - int64(i), K: i}) // none covers another
	}
	s := canonical(boxes)
	if len(s) != 1 || s[0] != (regBox{Lo: 100 - maxBoxes - 4, Hi: 100, K: 0}) {
		t.Fatalf("canonical = %v", s)
	}
	s = canonical([]regBox{{Lo: 1, Hi: 2, K: 1}, {Lo: 0, Hi: 5}, {Lo: 0, Hi: 1, K: 2}})
	if len(s) != 1 || s[0] != (regBox{Lo: 0, Hi: 5}) {
		t.Fatalf("covered boxes kept: %v", s)
	}
}

// TestLinearizabilityReconfigured: a limit slowed down mid-history (I from
// 1 s to 3 s) is checked epoch by epoch, each with its own configuration;
// operations overlapping the put are dropped; a put with an unknown
// outcome leaves the epochs after its invoke unchecked unless it put the
// epoch's own configuration.
func TestLinearizabilityReconfigured(t *testing.T) {
	const ok = history.OK
	before := []opSpec{
		{p: 0, call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
		{p: 1, call: 100 * ms, ret: 110 * ms, typ: ok, maxWait: 2 * sec, resp: granted(900 * ms)},
	}
	put := opSpec{p: 9, f: history.FPut, call: 2100 * ms, ret: 2200 * ms, typ: ok, value: history.LimitRequest{Limit: "api"}}
	// After the put: N = 2 s <= now, so 2.5 s gets the slot at once and
	// moves N to 5.5 s (I = 3 s); the next waits for it.
	after := []opSpec{
		{p: 0, call: 2500 * ms, ret: 2510 * ms, typ: ok, resp: granted(0)},
		{p: 1, call: 2600 * ms, ret: 2610 * ms, typ: ok, maxWait: 5 * sec, resp: granted(2900 * ms)},
	}
	slow := RegisterChange{OpIndex: 4, CallNanos: 2100 * ms, ReturnNanos: 2200 * ms, IntervalNanos: 3 * sec, MaxReserved: 2}
	spec := func(changes ...RegisterChange) map[string]RegisterSpec {
		return map[string]RegisterSpec{"api": {IntervalNanos: sec, MaxReserved: 2, Fresh: true, Changes: changes}}
	}
	all := func(extra ...opSpec) []opSpec {
		return append(append(append(append([]opSpec(nil), before...), put), after...), extra...)
	}
	tests := []struct {
		name   string
		limits map[string]RegisterSpec
		ops    []opSpec
		valid  bool
		want   string
		epochs []string // per_limit results by key
	}{
		{name: "each epoch with its configuration", limits: spec(slow), ops: all(), valid: true,
			epochs: []string{"api=Ok", "api@epoch1=Ok"}},
		{name: "one configuration cannot explain both", limits: spec(), ops: all(),
			want: "ceil(wait/I)-1+n = 3 slots ahead > max_reserved 2"},
		{name: "an op overlapping the put is dropped", limits: spec(slow), valid: true,
			ops:    all(opSpec{p: 2, call: 2150 * ms, ret: 2160 * ms, typ: ok, resp: granted(0)}),
			epochs: []string{"api=Ok", "api@epoch1=Ok"}},
		{name: "a double grant after the put is caught", limits: spec(slow), want: `limit "api@epoch1": no linearization`,
			ops: all(opSpec{p: 2, call: 2700 * ms, ret: 2710 * ms, typ: ok, resp: granted(0)})},
		{name: "max_reserved of the new configuration", want: "max_reserved 0",
			limits: spec(RegisterChange{OpIndex: 4, CallNanos: 2100 * ms, ReturnNanos: 2200 * ms, IntervalNanos: 3 * sec})},
		{name: "unknown put of another configuration: checked up to it", valid: true,
			limits: spec(RegisterChange{OpIndex: 4, CallNanos: 2100 * ms, ReturnNanos: -1, IntervalNanos: 3 * sec, MaxReserved: 2}),
			ops:    all(opSpec{p: 2, call: 2700 * ms, ret: 2710 * ms, typ: ok, resp: granted(0)}),
			epochs: []string{"api=Ok"}},
		{name: "unknown put of another configuration: a fault before it is caught", want: `limit "api": no linearization`,
			limits: spec(RegisterChange{OpIndex: 4, CallNanos: 2100 * ms, ReturnNanos: -1, IntervalNanos: 3 * sec, MaxReserved: 2}),
			ops:    all(opSpec{p: 2, call: 500 * ms, ret: 510 * ms, typ: ok, resp: granted(0)})},
		{name: "unknown put of the same configuration changes nothing", want: "no linearization",
			limits: spec(slow, RegisterChange{OpIndex: 4, CallNanos: 2300 * ms, ReturnNanos: -1, IntervalNanos: 3 * sec, MaxReserved: 2}),
			ops:    all(opSpec{p: 2, call: 2700 * ms, ret: 2710 * ms, typ: ok, resp: granted(0)})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := tt.ops
			if ops == nil {
				ops = all()
			}
			r, err := Linearizability(LinearizabilityInput{Ops: build(t, ops...), Limits: tt.limits})
			expect(t, r, err, tt.valid, tt.want)
			if tt.epochs != nil {
				var got []string
				for _, k := range sortedKeys(r.Details["per_limit"].(map[string]string)) {
					got = append(got, k+"="+r.Details["per_limit"].(map[string]string)[k])
				}
				if strings.Join(got, " ") != strings.Join(tt.epochs, " ") {
					t.Fatalf("per_limit %v, want %v; details %v", got, tt.epochs, r.Details)
				}
			}
		})
	}
	// The unknown put: epoch 0 ends where it began, and the rest is
	// reported as skipped, its operations unchecked.
	r, err := Linearizability(LinearizabilityInput{Ops: build(t, all()...),
		Limits: spec(RegisterChange{OpIndex: 4, CallNanos: 2100 * ms, ReturnNanos: -1, IntervalNanos: 3 * sec, MaxReserved: 2})})
	if err != nil {
		t.Fatal(err)
	}
	eps := r.Details["epochs"].(map[string][]EpochReport)["api"]
	if len(eps) != 2 || eps[0].Result != "Ok" || eps[0].ToNanos != 2100*ms || eps[1].Result != "skipped" ||
		!strings.Contains(eps[1].SkippedWhy, "unknown outcome") || r.Details["unchecked_ops"] != 2 || r.Details["ops"] != 2 {
		t.Fatalf("epochs %+v, unchecked %v", eps, r.Details["unchecked_ops"])
	}
	if _, err := Linearizability(LinearizabilityInput{Ops: build(t, all()...), Limits: spec(RegisterChange{CallNanos: 2, ReturnNanos: 1, IntervalNanos: sec})}); err == nil {
		t.Fatal("a change that ends before it starts was accepted")
	}
}
