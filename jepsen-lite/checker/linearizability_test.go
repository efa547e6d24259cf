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
