package checker

import (
	"testing"

	"github.com/permitd/permitd/jepsen-lite/bound"
)

// TestLeasedWindowBound: the leased bound C + O + floor(W/I) + 1 at the
// fake API. With I = 100 ms, C = O = 2 and W = 1 s the bound is 15: a
// fleet that spends at the rate plus both pools passes, one call more in
// the same second fails, and the tolerance is applied as W − jitter.
func TestLeasedWindowBound(t *testing.T) {
	const ms = int64(1_000_000)
	b, err := bound.Leased(100*ms, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	spec := WindowSpec{WindowsNanos: []int64{1000 * ms}, Bound: b}
	// 15 calls within one second: 4 at once (both pools), then 11 paced.
	at := []int64{0, 0, 0, 0}
	for k := int64(0); k <= 10; k++ {
		at = append(at, k*100*ms)
	}
	r, err := Window(calls(at), spec)
	expect(t, r, err, true, "")
	// One more inside the same second: 16 > 15.
	over := append(append([]int64(nil), at...), 999*ms)
	r, err = Window(calls(over), spec)
	expect(t, r, err, false, "bound C+O+floor(W/I)+1")
	// The extra call 1.05 s after the first: outside W, fine without
	// tolerance; with 60 ms of jitter the span counted is 940 ms, so it
	// is judged with the others only if it came within 940 ms.
	late := append(append([]int64(nil), at...), 1050*ms)
	r, err = Window(calls(late), spec)
	expect(t, r, err, true, "")
	spec.ToleranceNanos = 60 * ms
	r, err = Window(calls(over), spec)
	expect(t, r, err, true, "") // [0, 940 ms] holds 14
	crowded := append(append([]int64(nil), at...), 500*ms, 500*ms)
	r, err = Window(calls(crowded), spec)
	expect(t, r, err, false, "bound C+O+floor(W/I)+1")
	// A fleet that spends each permit twice (the double-lease bug) at the
	// rate over 10 s: 2·100 + 1 calls against a bound of 2+2+100+1.
	var twice []int64
	for k := int64(0); k <= 100; k++ {
		twice = append(twice, k*100*ms, k*100*ms+ms)
	}
	r, err = Window(calls(twice), WindowSpec{WindowsNanos: []int64{10_000 * ms}, Bound: b, ToleranceNanos: 50 * ms})
	expect(t, r, err, false, "= 105")
}

func counters(leased, spent, in, out int64) WorkerCounters {
	return WorkerCounters{Leased: leased, Spent: spent, StolenIn: in, StolenOut: out}
}

func TestLeasedConservation(t *testing.T) {
	snap := func(at int64, c WorkerCounters) WorkerSnapshot {
		return WorkerSnapshot{SentNanos: at, WorkerCounters: c}
	}
	good := []WorkerIncarnation{
		{Worker: "g1-w0", Generation: 1, GrantNanos: []int64{10, 20, 30},
			Snapshots: []WorkerSnapshot{snap(25, counters(10, 2, 0, 3)), snap(100, counters(10, 4, 0, 5)), snap(200, counters(10, 4, 0, 5))}},
		{Worker: "g2-w1", Generation: 1, GrantNanos: []int64{15, 16, 17, 18, 19},
			Snapshots: []WorkerSnapshot{snap(50, counters(2, 5, 3, 0)), snap(150, counters(2, 7, 5, 0))}},
		// A killed process read once, before its kill.
		{Worker: "g2-w1", Generation: 2, GrantNanos: nil, Snapshots: []WorkerSnapshot{snap(300, counters(4, 0, 0, 0))}},
	}
	tests := []struct {
		name  string
		mod   func([]WorkerIncarnation)
		valid bool
		want  string
	}{
		{"conserved", func([]WorkerIncarnation) {}, true, ""},
		{"worker creates permits", func(in []WorkerIncarnation) {
			in[0].Snapshots[1].Spent = 6 // 10 + 0 - 5 = 5 available
		}, false, "permits created by the worker"},
		{"grants handed out twice", func(in []WorkerIncarnation) {
			in[1].GrantNanos = append(in[1].GrantNanos, 21, 22, 23) // 8 answered before the read at 150, spent 7
		}, false, "permits handed out twice"},
		{"steal creates permits", func(in []WorkerIncarnation) {
			in[1].Snapshots[0].StolenIn = 5
			in[1].Snapshots[0].Leased = 0
			in[1].Snapshots[1].StolenIn = 9 // the fleet gave away 5
			in[1].Snapshots[1].Spent = 9
			in[1].Snapshots[1].Leased = 0
			in[1].Snapshots = in[1].Snapshots[1:]
		}, false, "steals created 4 permits"},
		{"counter goes down", func(in []WorkerIncarnation) {
			in[0].Snapshots[2].Leased = 9
		}, false, "went down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := make([]WorkerIncarnation, len(good))
			for i, inc := range good {
				inc.Snapshots = append([]WorkerSnapshot(nil), inc.Snapshots...)
				inc.GrantNanos = append([]int64(nil), inc.GrantNanos...)
				in[i] = inc
			}
			tt.mod(in)
			r, err := LeasedConservation(LeasedInput{Incarnations: in})
			expect(t, r, err, tt.valid, tt.want)
		})
	}
	if _, err := LeasedConservation(LeasedInput{Incarnations: []WorkerIncarnation{{}}}); err == nil {
		t.Fatal("an unnamed worker was accepted")
	}
}
