package checker

import (
	"testing"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
)

func TestConservation(t *testing.T) {
	const ok = history.OK
	// r1: 1 permit ready at 10ms; r2: 2 permits ready at 1.02s; r3 info.
	base := []opSpec{
		{p: 0, id: "r1", call: 0, ret: 10 * ms, typ: ok, resp: granted(0)},
		{p: 1, id: "r2", permits: 2, maxWait: 2 * sec, call: 10 * ms, ret: 20 * ms, typ: ok, resp: granted(sec)},
		{p: 2, id: "r3", call: 30 * ms, ret: 40 * ms, typ: history.Info},
		{p: 3, id: "r4", call: 50 * ms, ret: 60 * ms, typ: history.Fail, resp: refused(sec)},
	}
	with := func(extra ...opSpec) []opSpec { return append(append([]opSpec(nil), base...), extra...) }
	tests := []struct {
		name  string
		ops   []opSpec
		calls []fakeapi.Call
		same  bool
		tol   int64
		valid bool
		want  string
	}{
		{name: "each call backed", ops: base, same: true, valid: true,
			calls: calls([]int64{20 * ms, 1020 * ms, 2020 * ms}, "r1", "r2", "r2")},
		{name: "fewer calls than grants", ops: base, valid: true,
			calls: calls([]int64{20 * ms}, "r1")},
		{name: "grant spent twice", ops: base, want: "holds 0 tokens, needs 1",
			calls: calls([]int64{20 * ms, 1020 * ms}, "r1", "r1")},
		{name: "two-permit grant spent three times", ops: base, want: "tokens spent twice",
			calls: calls([]int64{1020 * ms, 2020 * ms, 3020 * ms}, "r2", "r2", "r2")},
		{name: "call without a request ID", ops: base, want: "no grant backs it",
			calls: calls([]int64{20 * ms}, "")},
		{name: "call spending an unknown ID", ops: base, want: "never credited",
			calls: calls([]int64{20 * ms}, "nope")},
		{name: "call spending an info reserve", ops: base, want: `grant:r3 was never credited`,
			calls: calls([]int64{50 * ms}, "r3")},
		{name: "call spending a refusal", ops: base, want: `grant:r4 was never credited`,
			calls: calls([]int64{50 * ms}, "r4")},
		{name: "call before the grant was received", ops: base, same: true, want: "before its grant (op #2) was received",
			calls: calls([]int64{15 * ms}, "r2")},
		{name: "call before the grant was ready", ops: base, same: true, tol: 5 * ms, want: "was ready at 1.02s",
			calls: calls([]int64{1010 * ms}, "r2")},
		{name: "call early within tolerance", ops: base, same: true, tol: 15 * ms, valid: true,
			calls: calls([]int64{1010 * ms}, "r2")},
		{name: "early call unnoticed without a shared time base", ops: base, valid: true,
			calls: calls([]int64{15 * ms}, "r2")},
		{name: "same request ID granted twice", want: `request_id "r1" granted twice`,
			ops: with(opSpec{p: 4, id: "r1", call: 70 * ms, ret: 80 * ms, typ: ok, resp: granted(0)})},
		{name: "replayed grant counted once", valid: true,
			ops:   with(opSpec{p: 4, id: "r1", call: 70 * ms, ret: 80 * ms, typ: ok, resp: history.ReserveResponse{Granted: true, Duplicate: true}}),
			calls: calls([]int64{100 * ms}, "r1")},
		{name: "replay does not add a token", want: "tokens spent twice",
			ops:   with(opSpec{p: 4, id: "r1", call: 70 * ms, ret: 80 * ms, typ: ok, resp: history.ReserveResponse{Granted: true, Duplicate: true}}),
			calls: calls([]int64{100 * ms, 200 * ms}, "r1", "r1")},
		{name: "ok acquire backs a call", valid: true,
			ops:   with(opSpec{p: 5, f: history.FAcquire, id: "a1", call: 70 * ms, ret: 80 * ms, typ: ok}),
			calls: calls([]int64{100 * ms}, "a1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Conservation(ConservationInput{Ops: build(t, tt.ops...), Calls: tt.calls, SameTimeBase: tt.same, ToleranceNanos: tt.tol})
			expect(t, r, err, tt.valid, tt.want)
		})
	}
}

// TestConservationSpacedPermits: a strict grant of n permits is spent one
// permit at a time, permit j from wait + j·spacing after the answer; every
// call spends a distinct permit.
func TestConservationSpacedPermits(t *testing.T) {
	// s1: 3 permits 200 ms apart, received at 100 ms, no wait: ready at
	// 100 ms, 300 ms and 500 ms.
	ops := []opSpec{{p: 0, id: "s1", permits: 3, maxWait: sec, call: 90 * ms, ret: 100 * ms, typ: history.OK,
		resp: history.ReserveResponse{Granted: true, SpacingNanos: 200 * ms}}}
	permitCalls := func(times []int64, permits ...int64) []fakeapi.Call {
		cs := calls(times, "s1", "s1", "s1", "s1")
		for i := range cs {
			if i < len(permits) && permits[i] >= -1 {
				p := permits[i]
				cs[i].Permit = &p
			}
		}
		return cs
	}
	const unnamed = -2 // the call does not name its permit
	tests := []struct {
		name  string
		calls []fakeapi.Call
		tol   int64
		valid bool
		want  string
	}{
		{name: "each permit at its slot", valid: true, calls: permitCalls([]int64{100 * ms, 300 * ms, 500 * ms}, 0, 1, 2)},
		{name: "unnamed permits at their slots", valid: true, calls: permitCalls([]int64{100 * ms, 300 * ms, 500 * ms})},
		{name: "a permit skipped", valid: true, calls: permitCalls([]int64{100 * ms, 500 * ms}, 0, 2)},
		{name: "second call before the second slot", want: "before permit 1 of its grant (op #0) was ready at 300ms",
			calls: permitCalls([]int64{100 * ms, 150 * ms}, unnamed, unnamed)},
		{name: "permits used together", want: "before permit 1",
			calls: permitCalls([]int64{100 * ms, 101 * ms, 102 * ms}, 0, 1, 2)},
		{name: "early within tolerance", tol: 20 * ms, valid: true, calls: permitCalls([]int64{100 * ms, 285 * ms}, 0, 1)},
		{name: "named permit before its slot", want: "before permit 2 of its grant",
			calls: permitCalls([]int64{310 * ms}, 2)},
		{name: "permit used twice", want: "spends permit 1 of its grant (op #0) a second time",
			calls: permitCalls([]int64{300 * ms, 500 * ms}, 1, 1)},
		{name: "permit out of range", want: "spends permit 3 of a grant of 3 permits",
			calls: permitCalls([]int64{700 * ms}, 3)},
		{name: "more calls than permits", want: "tokens spent twice",
			calls: permitCalls([]int64{100 * ms, 300 * ms, 500 * ms, 700 * ms})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Conservation(ConservationInput{Ops: build(t, ops...), Calls: tt.calls, SameTimeBase: true, ToleranceNanos: tt.tol})
			expect(t, r, err, tt.valid, tt.want)
		})
	}
}

func TestConservationLeases(t *testing.T) {
	byWorker := func(c fakeapi.Call) string { return "lease:" + c.Worker }
	lease := func(to string, n, at int64) TokenEvent {
		return TokenEvent{Kind: Credit, TimeNanos: at, To: to, Tokens: n, Source: "lease to " + to}
	}
	steal := func(from, to string, n, at int64) TokenEvent {
		return TokenEvent{Kind: Transfer, TimeNanos: at, From: from, To: to, Tokens: n, Source: "steal " + from + "→" + to}
	}
	workerCalls := func(worker string, times ...int64) []fakeapi.Call {
		cs := calls(times)
		for i := range cs {
			cs[i].Worker = worker
		}
		return cs
	}
	tests := []struct {
		name   string
		events []TokenEvent
		calls  []fakeapi.Call
		valid  bool
		want   string
	}{
		{"lease spent within its tokens", []TokenEvent{lease("lease:a", 2, 0)}, workerCalls("a", 10, 20), true, ""},
		{"lease overspent", []TokenEvent{lease("lease:a", 2, 0)}, workerCalls("a", 10, 20, 30), false, "holds 0 tokens"},
		{"spent before the lease", []TokenEvent{lease("lease:a", 2, 50)}, workerCalls("a", 10), false, "never credited"},
		{"steal moves tokens", []TokenEvent{lease("lease:a", 2, 0), steal("lease:a", "lease:b", 1, 5)},
			append(workerCalls("a", 10), workerCalls("b", 10)...), true, ""},
		{"steal does not duplicate tokens", []TokenEvent{lease("lease:a", 1, 0), steal("lease:a", "lease:b", 1, 5)},
			append(workerCalls("a", 10), workerCalls("b", 10)...), false, "lease:a holds 0"},
		{"steal from an empty donor", []TokenEvent{lease("lease:a", 1, 0), steal("lease:a", "lease:b", 2, 5)},
			workerCalls("b", 10), false, "steal lease:a→lease:b: account lease:a holds 1 tokens, needs 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Conservation(ConservationInput{Events: tt.events, Calls: tt.calls, SameTimeBase: true, CallAccount: byWorker})
			expect(t, r, err, tt.valid, tt.want)
		})
	}
	for _, e := range []TokenEvent{{Kind: Credit, Tokens: 1}, {Kind: Spend, Tokens: 0}, {Kind: Transfer, From: "x", Tokens: 1}, {Kind: 9, Tokens: 1}} {
		if _, err := Conservation(ConservationInput{Events: []TokenEvent{e}}); err == nil {
			t.Fatalf("event %+v accepted", e)
		}
	}
	if _, err := Conservation(ConservationInput{ToleranceNanos: -1}); err == nil {
		t.Fatal("negative tolerance accepted")
	}
}
