package checker

import (
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
)

func TestSpacing(t *testing.T) {
	tests := []struct {
		name  string
		times []int64
		tol   int64
		valid bool
		want  string
	}{
		{"no calls", nil, 0, true, ""},
		{"one call", []int64{5}, 0, true, ""},
		{"exactly spaced", []int64{0, sec, 2 * sec}, 0, true, ""},
		{"unsorted input is sorted", []int64{2 * sec, 0, sec}, 0, true, ""},
		{"one short gap", []int64{0, sec, 1900 * ms}, 0, false, "900ms apart"},
		{"short gap within tolerance", []int64{0, sec, 1990 * ms}, 10 * ms, true, ""},
		{"short gap beyond tolerance", []int64{0, sec, 1989 * ms}, 10 * ms, false, "need >= I - tolerance = 1s - 10ms = 990ms"},
		{"same instant", []int64{0, 0}, 0, false, "0s apart"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Spacing(calls(tt.times), SpacingSpec{IntervalNanos: sec, ToleranceNanos: tt.tol})
			expect(t, r, err, tt.valid, tt.want)
		})
	}
	r, err := Spacing(calls([]int64{0, sec, 1900 * ms, 1950 * ms}), SpacingSpec{IntervalNanos: sec})
	expect(t, r, err, false, "")
	if r.ViolationsTotal() != 2 || r.Details["min_gap_ns"] != 50*ms || r.Details["raw_violations"] != 2 {
		t.Fatalf("details %v", r.Details)
	}
	for _, spec := range []SpacingSpec{{IntervalNanos: 0}, {IntervalNanos: 1, ToleranceNanos: -1}} {
		if _, err := Spacing(nil, spec); err == nil {
			t.Fatalf("spec %+v accepted", spec)
		}
	}
}

func TestWindow(t *testing.T) {
	strict, err := bound.Strict(sec) // floor(W/I)+1
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		times   []int64
		windows []int64
		tol     int64
		valid   bool
		want    string
	}{
		{"strictly spaced", []int64{0, sec, 2 * sec, 3 * sec}, []int64{sec, 3 * sec}, 0, true, ""},
		{"three in one interval", []int64{0, 500 * ms, sec}, []int64{sec}, 0, false, "3 calls in [0s, 1s]"},
		{"three in one interval, only checked over 3s", []int64{0, 500 * ms, sec}, []int64{3 * sec}, 0, true, ""},
		{"a burst of five over 3s", []int64{0, 10, 20, 30, 40}, []int64{3 * sec}, 0, false, "5 calls"},
		{"tolerance shrinks the window", []int64{0, 500 * ms, sec}, []int64{sec}, ms, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Window(calls(tt.times), WindowSpec{WindowsNanos: tt.windows, Bound: strict, ToleranceNanos: tt.tol})
			expect(t, r, err, tt.valid, tt.want)
			if r.Details["formula"] != strict.Formula {
				t.Fatalf("formula %v", r.Details["formula"])
			}
		})
	}
	r, err := Window(calls([]int64{0, 10, 20, 30, 40}), WindowSpec{WindowsNanos: []int64{3 * sec}, Bound: strict})
	expect(t, r, err, false, "")
	w := r.Details["worst"].([]WorstWindow)[0]
	if w.Count != 5 || w.Bound != 4 || w.Violations != 1 || w.StartNanos != 0 || w.EndNanos != 40 || w.RawCount != 5 {
		t.Fatalf("worst %+v", w)
	}
	bad := []WindowSpec{
		{Bound: strict},
		{WindowsNanos: []int64{0}, Bound: strict},
		{WindowsNanos: []int64{1}},
		{WindowsNanos: []int64{1}, Bound: strict, ToleranceNanos: -1},
	}
	for _, spec := range bad {
		if _, err := Window(nil, spec); err == nil {
			t.Fatalf("spec %+v accepted", spec)
		}
	}
}

// The fake API's live monitor and the checkers count the same violations
// on the same calls (no tolerance).
func TestLiveMonitorAgreesWithCheckers(t *testing.T) {
	b, err := bound.Strict(int64(50 * time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []fakeapi.Mode{fakeapi.Spacing, fakeapi.Window} {
		s, err := fakeapi.New(fakeapi.Config{Mode: mode, IntervalNanos: int64(50 * time.Microsecond), WindowNanos: int64(200 * time.Microsecond), Bound: b})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			if _, err := s.Record("w", "", nil); err != nil {
				t.Fatal(err)
			}
			if i%7 == 0 {
				deadline := time.Now().Add(60 * time.Microsecond)
				for time.Now().Before(deadline) { // spread some calls out
				}
			}
		}
		var r Result
		if mode == fakeapi.Spacing {
			r, err = Spacing(s.Calls(), SpacingSpec{IntervalNanos: int64(50 * time.Microsecond)})
		} else {
			r, err = Window(s.Calls(), WindowSpec{WindowsNanos: []int64{int64(200 * time.Microsecond)}, Bound: b})
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, live := r.ViolationsTotal(), s.Stats().Violations; int64(got) != live {
			t.Fatalf("%s: checker %d violations, live monitor %d", mode, got, live)
		}
	}
}

func TestDeliveryJitter(t *testing.T) {
	sent := func(v int64) *int64 { return &v }
	cs := []fakeapi.Call{
		{Worker: "a", SentNanos: sent(0), TimeNanos: 100},
		{Worker: "a", SentNanos: sent(1000), TimeNanos: 1130},  // delay 130
		{Worker: "b", SentNanos: sent(-5000), TimeNanos: 200},  // other clock: delay 5200
		{Worker: "b", SentNanos: sent(-4000), TimeNanos: 1210}, // delay 5210
		{Worker: "c", TimeNanos: 3000},                         // no send time
	}
	j, err := DeliveryJitter(cs, false)
	if err != nil {
		t.Fatal(err)
	}
	if j.Samples != 4 || j.JitterNanos != 30 || j.P50Nanos != 0 || j.P99Nanos != 10 {
		t.Fatalf("per-worker jitter %+v", j)
	}
	j, err = DeliveryJitter(cs, true)
	if err != nil {
		t.Fatal(err)
	}
	if j.JitterNanos != 5110 || !j.SharedClock {
		t.Fatalf("shared-clock jitter %+v", j)
	}
	if _, err := DeliveryJitter(cs[4:], false); err == nil {
		t.Fatal("no samples accepted")
	}
}
