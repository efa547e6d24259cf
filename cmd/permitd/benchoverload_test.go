package main

import (
	"math"
	"testing"
)

func TestParseCPUTicksReadsStealAndTheTotal(t *testing.T) {
	// A real aggregate line: user nice system idle iowait irq softirq steal guest guest_nice.
	got := parseCPUTicks("cpu  4705 150 1120 16250 520 0 37 300 100 0\n")
	if !got.ok || got.steal != 300 || got.total != 4705+150+1120+16250+520+0+37+300 {
		t.Fatalf("parseCPUTicks = %+v; want steal 300, total %d (guest time is inside user)", got, 4705+150+1120+16250+520+37+300)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x", "intr 1 2 3 4 5 6 7 8"} {
		if got := parseCPUTicks(bad); got.ok {
			t.Errorf("parseCPUTicks(%q) = %+v; want not ok", bad, got)
		}
	}
}

func TestStealPercentBetweenTwoReadings(t *testing.T) {
	a := cpuTicks{steal: 100, total: 1000, ok: true}
	b := cpuTicks{steal: 150, total: 2000, ok: true}
	if got := a.pctUntil(b); math.Abs(got-5) > 1e-9 {
		t.Errorf("steal between readings = %v%%; want 5%%", got)
	}
	for _, tc := range []struct {
		name string
		a, b cpuTicks
	}{
		{"unreadable first", cpuTicks{}, b},
		{"unreadable second", a, cpuTicks{}},
		{"no time passed", a, a},
		{"counter went back", b, cpuTicks{steal: 10, total: 3000, ok: true}},
	} {
		if got := tc.a.pctUntil(tc.b); got != -1 {
			t.Errorf("%s: %v; want -1 (unknown)", tc.name, got)
		}
	}
}

func TestMedianOfPasses(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{9, 5, 7}, 7},
		{[]float64{8, 2, 6, 4}, 5},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v; want %v", tc.xs, got, tc.want)
		}
	}
	xs := []float64{3, 1, 2}
	median(xs)
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("median reordered its argument: %v", xs)
	}
}
