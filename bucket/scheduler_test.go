package bucket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// Tests of the Scheduler methods (ReserveAt, Charge): tables per
// algorithm, the equivalence of ReserveAt(now, n, t) with a Reserve(t, n, 0)
// on a copy, and the bounds of doc.go over grants made by ReserveAt and
// permits taken by Charge.

// schedulerAlgorithms are the algorithms whose pacers implement Scheduler
// with the semantics tested here.
var schedulerAlgorithms = []Algorithm{Strict, Bursty, WarmingUp, Hybrid}

func isSchedulerAlgorithm(a Algorithm) bool {
	for _, b := range schedulerAlgorithms {
		if a == b {
			return true
		}
	}
	return false
}

func mustScheduler(t testing.TB, p Pacer) Scheduler {
	t.Helper()
	s, ok := p.(Scheduler)
	if !ok {
		t.Fatalf("%T does not implement Scheduler", p)
	}
	return s
}

// stateLastNow decodes lastNow, the first field of every encoded state.
func stateLastNow(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b[stateHeaderLen:]))
}

// stateWithoutLastNow is an encoded state with its lastNow field removed.
func stateWithoutLastNow(b []byte) []byte {
	out := append([]byte(nil), b[:stateHeaderLen]...)
	return append(out, b[stateHeaderLen+8:]...)
}

// schedStep is one call of a table test: "reserve" (arg is maxWait), "at"
// (ReserveAt, arg is atNanos) or "charge"; then Query(now, 1) must be next.
type schedStep struct {
	op          string
	now, n, arg int64
	want        Decision
	err         error
	next        int64
}

func runSchedSteps(t *testing.T, p Pacer, steps []schedStep) {
	t.Helper()
	s := mustScheduler(t, p)
	for i, st := range steps {
		pre := p.AppendState(nil)
		var got Decision
		var err error
		switch st.op {
		case "reserve":
			got, err = p.Reserve(st.now, st.n, st.arg)
		case "at":
			got, err = s.ReserveAt(st.now, st.n, st.arg)
		case "charge":
			err = s.Charge(st.now, st.n)
		default:
			t.Fatalf("step %d: unknown op %q", i, st.op)
		}
		desc := fmt.Sprintf("step %d: %s(now %v, n %d, %v)", i, st.op, time.Duration(st.now), st.n, time.Duration(st.arg))
		if st.err != nil || err != nil {
			if !errors.Is(err, st.err) {
				t.Fatalf("%s: error %v, want %v", desc, err, st.err)
			}
		} else if got != st.want {
			t.Fatalf("%s = %+v, want %+v", desc, got, st.want)
		}
		post := p.AppendState(nil)
		changed := err == nil && (st.op == "charge" || got.Granted)
		if !changed && !bytes.Equal(pre, post) {
			t.Fatalf("%s refused or failed but changed the state %x -> %x", desc, pre, post)
		}
		if changed {
			if want := max(st.now, stateLastNow(pre)); stateLastNow(post) != want {
				t.Fatalf("%s: lastNow %d, want %d (now, never atNanos)", desc, stateLastNow(post), want)
			}
		}
		if next, err := p.Query(st.now, 1); err != nil || next != st.next {
			t.Fatalf("%s: then Query(%v, 1) = %v, %v, want %v", desc, time.Duration(st.now), time.Duration(next), err, time.Duration(st.next))
		}
	}
}

func TestStrictReserveAtAndCharge(t *testing.T) {
	spec := Spec{Algorithm: Strict, Rate: 1, MaxReserved: 2} // I 1 s, expiry 0.5 s, MaxPermits 3
	const half = sec / 2
	end := int64(math.MaxInt64)
	tests := []struct {
		name  string
		steps []schedStep
	}{
		{"grant after the natural time skips the slots before it", []schedStep{
			{op: "at", now: 0, n: 1, arg: 2 * sec, want: Decision{true, 2 * sec, 2*sec + half, sec}, next: 3 * sec},
			{op: "at", now: 0, n: 1, arg: 3*sec - 1, want: Decision{false, 3 * sec, 0, 0}, next: 3 * sec}, // below the natural time
			{op: "at", now: sec, n: 1, arg: 3 * sec, want: Decision{true, 3 * sec, 3*sec + half, sec}, next: 4 * sec},
			{op: "at", now: sec, n: 1, arg: 4 * sec, want: Decision{false, 4 * sec, 0, 0}, next: 4 * sec}, // 3 slots after now
			{op: "at", now: 2 * sec, n: 1, arg: 4 * sec, want: Decision{true, 4 * sec, 4*sec + half, sec}, next: 5 * sec},
			{op: "reserve", now: 2 * sec, n: 1, arg: end, want: Decision{false, 5 * sec, 0, 0}, next: 5 * sec}, // 3 slots after now
			{op: "reserve", now: 3 * sec, n: 1, arg: end, want: Decision{true, 5 * sec, 5*sec + half, sec}, next: 6 * sec},
		}},
		{"MaxReserved is counted from now, not from atNanos", []schedStep{
			{op: "at", now: 0, n: 3, arg: 1, want: Decision{false, 1, 0, 0}, next: 0}, // slots 1ns, 1s, 2s: ceil(1ns/1s)-1+3 = 3 > 2
			{op: "at", now: 0, n: 2, arg: sec, want: Decision{true, sec, sec + half, sec}, next: 3 * sec},
			{op: "at", now: sec, n: 2, arg: 3 * sec, want: Decision{false, 3 * sec, 0, 0}, next: 3 * sec},
			{op: "at", now: 2 * sec, n: 2, arg: 3 * sec, want: Decision{true, 3 * sec, 3*sec + half, sec}, next: 5 * sec},
			{op: "at", now: 5 * sec, n: 4, arg: 5 * sec, err: ErrTooManyPermits, next: 5 * sec},
			{op: "at", now: 5 * sec, n: 0, arg: 5 * sec, err: ErrInvalidPermits, next: 5 * sec},
		}},
		{"a time before now is below the natural time", []schedStep{
			{op: "reserve", now: 10 * sec, n: 1, arg: 0, want: Decision{true, 10 * sec, 10*sec + half, sec}, next: 11 * sec},
			{op: "at", now: 12 * sec, n: 1, arg: 11 * sec, want: Decision{false, 12 * sec, 0, 0}, next: 12 * sec},
			{op: "at", now: 5 * sec, n: 1, arg: 12 * sec, want: Decision{true, 12 * sec, 12*sec + half, sec}, next: 13 * sec}, // now clamped to 10 s
		}},
		{"the end of the timeline", []schedStep{
			{op: "at", now: end - 2*sec, n: 1, arg: end - sec, want: Decision{false, end - sec, 0, 0}, next: end - 2*sec},
			{op: "at", now: end - 2*sec, n: 1, arg: end - 2*sec, want: Decision{true, end - 2*sec, end - 2*sec + half, sec}, next: end - sec},
			{op: "charge", now: end - 2*sec, n: 1, err: ErrOverflow, next: end - sec},
		}},
		{"a charge delays the next grant by n intervals", []schedStep{
			{op: "charge", now: 0, n: 3, next: 3 * sec},
			{op: "reserve", now: 0, n: 1, arg: end, want: Decision{false, 3 * sec, 0, 0}, next: 3 * sec}, // 3 slots ahead of now
			{op: "charge", now: 10 * sec, n: 2, next: 12 * sec},                                          // idle time is forgotten
			{op: "charge", now: 10 * sec, n: 0, err: ErrInvalidPermits, next: 12 * sec},
			{op: "charge", now: 10 * sec, n: -1, err: ErrInvalidPermits, next: 12 * sec},
			{op: "charge", now: 10 * sec, n: 100, next: 112 * sec}, // more than MaxPermits
			{op: "charge", now: 10 * sec, n: math.MaxInt64, err: ErrOverflow, next: 112 * sec},
			{op: "charge", now: 5 * sec, n: 1, next: 113 * sec}, // now clamped to 10 s
			{op: "at", now: 10 * sec, n: 1, arg: 113 * sec, want: Decision{false, 113 * sec, 0, 0}, next: 113 * sec},
			{op: "at", now: 112 * sec, n: 1, arg: 113 * sec, want: Decision{true, 113 * sec, 113*sec + half, sec}, next: 114 * sec},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSchedSteps(t, mustNew(t, spec), tt.steps) })
	}
}

func TestBurstyReserveAtAndCharge(t *testing.T) {
	spec := Spec{Algorithm: Bursty, Rate: 1, MaxBurstSeconds: 10}
	tests := []struct {
		name  string
		steps []schedStep
	}{
		{"grant after the natural time stores the idle time up to it", []schedStep{
			{op: "at", now: 0, n: 1, arg: 4 * sec, want: Decision{Granted: true, AtNanos: 4 * sec}, next: 4 * sec}, // 4 s stored, 1 spent
			{op: "at", now: 0, n: 5, arg: 4*sec - 1, want: Decision{AtNanos: 4 * sec}, next: 4 * sec},
			{op: "at", now: sec, n: 5, arg: 4 * sec, want: Decision{Granted: true, AtNanos: 4 * sec}, next: 6 * sec}, // 3 stored, 2 fresh
			{op: "reserve", now: 2 * sec, n: 1, arg: 0, want: Decision{AtNanos: 6 * sec}, next: 6 * sec},
			{op: "at", now: 2 * sec, n: 1, arg: 20 * sec, want: Decision{Granted: true, AtNanos: 20 * sec}, next: 20 * sec}, // store full: 10 s
			{op: "reserve", now: 20 * sec, n: 9, arg: 0, want: Decision{Granted: true, AtNanos: 20 * sec}, next: 20 * sec},
			{op: "reserve", now: 20 * sec, n: 1, arg: 0, want: Decision{Granted: true, AtNanos: 20 * sec}, next: 21 * sec},
			{op: "at", now: 20 * sec, n: 0, arg: 30 * sec, err: ErrInvalidPermits, next: 21 * sec},
		}},
		{"a charge spends the store first, then delays the next grant", []schedStep{
			{op: "charge", now: 0, n: 3, next: 3 * sec}, // empty store: exactly 3 intervals
			{op: "reserve", now: 0, n: 1, arg: 0, want: Decision{AtNanos: 3 * sec}, next: 3 * sec},
			{op: "charge", now: 8 * sec, n: 3, next: 8 * sec},  // 5 s stored: absorbed
			{op: "charge", now: 8 * sec, n: 4, next: 10 * sec}, // 2 stored, 2 fresh
			{op: "charge", now: 8 * sec, n: 0, err: ErrInvalidPermits, next: 10 * sec},
			{op: "charge", now: 8 * sec, n: 10_000_000_000, err: ErrOverflow, next: 10 * sec}, // n*I saturates
			{op: "charge", now: 8 * sec, n: 9_223_372_030, err: ErrOverflow, next: 10 * sec},  // nextFree would
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSchedSteps(t, mustNew(t, spec), tt.steps) })
	}
}

func TestWarmupReserveAtAndCharge(t *testing.T) {
	// The worked example of warmup.go: I 1 s, C 3 s, T 5 s, cold store
	// 5 s; draining costs F(s) = s + (s-2.5s)^2/2.5s above the threshold.
	spec := Spec{Algorithm: WarmingUp, Rate: 1, Warmup: 5 * time.Second, ColdFactor: 3}
	ms := int64(time.Millisecond)
	tests := []struct {
		name  string
		steps []schedStep
	}{
		{"grant after the natural time accrues the idle time up to it", []schedStep{
			{op: "at", now: 0, n: 1, arg: 0, want: Decision{Granted: true}, next: 2600 * ms}, // F(5)-F(4) = 2.6 s
			{op: "at", now: 0, n: 1, arg: sec, want: Decision{AtNanos: 2600 * ms}, next: 2600 * ms},
			// At 3 s: 4 s + 0.4 s stored; F(4.4)-F(3.4) = 5.844-3.724 = 2.12 s.
			{op: "at", now: 0, n: 1, arg: 3 * sec, want: Decision{Granted: true, AtNanos: 3 * sec}, next: 5120 * ms},
		}},
		{"a charge pays as a grant does", []schedStep{
			{op: "charge", now: 0, n: 1, next: 2600 * ms},          // cold: as the first reserve
			{op: "charge", now: 0, n: 2, next: 5500 * ms},          // F(4)-F(2) = 2.9 s
			{op: "charge", now: 5500 * ms, n: 3, next: 8500 * ms},  // 2 s stored at 1 s each, one fresh
			{op: "charge", now: 5500 * ms, n: 2, next: 10500 * ms}, // empty store: exactly 2 intervals
			{op: "charge", now: 5500 * ms, n: -3, err: ErrInvalidPermits, next: 10500 * ms},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSchedSteps(t, mustNew(t, spec), tt.steps) })
	}
}

func TestHybridReserveAtAndCharge(t *testing.T) {
	spec := Spec{Algorithm: Hybrid, Rate: 1, BurstRatio: 1.1} // A 1e9, B 1e8, MaxPermits 1
	const catchUp = 909_090_910                               // smallest d with d + floor(d/10) >= 1e9
	tests := []struct {
		name  string
		steps []schedStep
	}{
		{"grant after the natural time fills the pools up to it", []schedStep{
			{op: "at", now: 0, n: 1, arg: 0, want: Decision{Granted: true}, next: sec},
			{op: "at", now: 0, n: 1, arg: sec / 2, want: Decision{AtNanos: sec}, next: sec},
			// One fill of 3 s: active full, burst 1e8, waiting 1.9e9;
			// the grant takes the active pool.
			{op: "at", now: 0, n: 1, arg: 3 * sec, want: Decision{Granted: true, AtNanos: 3 * sec}, next: 3900 * int64(time.Millisecond)},
			{op: "at", now: sec, n: 1, arg: 3900 * int64(time.Millisecond), want: Decision{Granted: true, AtNanos: 3900 * int64(time.Millisecond)},
				next: 3900*int64(time.Millisecond) + catchUp}, // behind: catch up at 1.1 ops/s
			{op: "at", now: sec, n: 2, arg: 10 * sec, err: ErrTooManyPermits, next: 3900*int64(time.Millisecond) + catchUp},
		}},
		{"a charge draws the pools, then pushes the pools' clock", []schedStep{
			{op: "charge", now: 0, n: 3, next: 3 * sec}, // 1e9 from active, 2 s of debt, then 1 s to refill
			{op: "charge", now: 0, n: 0, err: ErrInvalidPermits, next: 3 * sec},
			{op: "charge", now: 0, n: 10_000_000_000, err: ErrOverflow, next: 3 * sec},
			{op: "charge", now: 13 * sec, n: 1, next: 13*sec + 900*int64(time.Millisecond)},           // active taken, burst 1e8 left
			{op: "charge", now: 13 * sec, n: 2, next: 14*sec + 900*int64(time.Millisecond) + catchUp}, // burst 1e8, then 1.9 s of debt
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSchedSteps(t, mustNew(t, spec), tt.steps) })
	}
}

// TestReserveAtIsReserveAtThatTime checks, over seeded random sequences of
// Reserve, ReserveAt and Charge on every config of validSpecs, that a
// ReserveAt(now, n, t) that grants leaves the state (except lastNow) that
// a copy of the state before it reaches with Reserve(t, n, 0), that one
// that refuses changes nothing and answers Query(now, n) when t is below
// it, and that a failing Charge changes nothing.
func TestReserveAtIsReserveAtThatTime(t *testing.T) {
	for si, s := range validSpecs {
		if !isSchedulerAlgorithm(s.Algorithm) {
			continue
		}
		t.Run(fmt.Sprintf("%d-%s", si, s.Algorithm), func(t *testing.T) {
			for seed := range 50 {
				if msg := checkReserveAtSequence(t, s, rand.New(rand.NewPCG(uint64(seed), uint64(si)))); msg != "" {
					t.Fatalf("seed %d: %s", seed, msg)
				}
			}
		})
	}
}

func checkReserveAtSequence(t *testing.T, s Spec, rng *rand.Rand) string {
	p := mustNew(t, s)
	sch := mustScheduler(t, p)
	c := p.Config()
	i := max(c.IntervalNanos, 1)
	fill := max(c.MaxStoredNanos, int64(c.Spec.Warmup), c.ActiveNanos+c.BurstNanos, i)
	maxN := min(c.MaxPermits(), 8)
	now := int64(0)
	for step := range 200 {
		switch rng.IntN(6) {
		case 0: // not at all
		case 1, 2:
			now += rng.Int64N(i)
		case 3:
			now += rng.Int64N(4 * i)
		case 4:
			now += rng.Int64N(3 * fill)
		case 5: // a big jump
			now += rng.Int64N(1000 * i)
		}
		callNow := now
		if rng.IntN(10) == 0 {
			callNow -= rng.Int64N(2 * i) // clamped to the largest now seen
		}
		n := 1 + rng.Int64N(maxN)
		pre := p.AppendState(nil)
		where := fmt.Sprintf("step %d (now %d, n %d, state %x)", step, callNow, n, pre)
		switch rng.IntN(3) {
		case 0:
			maxWait := []int64{0, rng.Int64N(4 * i), math.MaxInt64}[rng.IntN(3)]
			if _, err := p.Reserve(callNow, n, maxWait); err != nil {
				return fmt.Sprintf("%s: Reserve: %v", where, err)
			}
		case 1:
			q, err := p.Query(callNow, n)
			if err != nil {
				return fmt.Sprintf("%s: Query: %v", where, err)
			}
			extra := []int64{0, 0, rng.Int64N(i), rng.Int64N(5 * i), rng.Int64N(3 * fill), -1 - rng.Int64N(i)}[rng.IntN(6)]
			at := satAdd(q, extra)
			d, err := sch.ReserveAt(callNow, n, at)
			if err != nil {
				return fmt.Sprintf("%s: ReserveAt(%d): %v", where, at, err)
			}
			post := p.AppendState(nil)
			if !d.Granted {
				if !bytes.Equal(pre, post) {
					return fmt.Sprintf("%s: refused ReserveAt(%d) changed the state to %x", where, at, post)
				}
				switch {
				case at < q && d.AtNanos != q:
					return fmt.Sprintf("%s: ReserveAt(%d) below Query %d refused with %+v", where, at, q, d)
				case at >= q && (s.Algorithm != Strict || d.AtNanos != at):
					return fmt.Sprintf("%s: ReserveAt(%d) at or after Query %d refused with %+v", where, at, q, d)
				}
				continue
			}
			if at < q || d.AtNanos != at {
				return fmt.Sprintf("%s: ReserveAt(%d) with Query %d granted %+v", where, at, q, d)
			}
			if want := max(callNow, stateLastNow(pre)); stateLastNow(post) != want {
				return fmt.Sprintf("%s: ReserveAt(%d) left lastNow %d, want %d", where, at, stateLastNow(post), want)
			}
			cp := mustNew(t, s)
			if err := cp.RestoreState(pre); err != nil {
				return fmt.Sprintf("%s: RestoreState: %v", where, err)
			}
			dc, err := cp.Reserve(at, n, 0)
			if err != nil || !dc.Granted || dc != d {
				// Strict's copy always grants too: n <= MaxReserved+1
				// and the end was checked by ReserveAt.
				return fmt.Sprintf("%s: ReserveAt(%d) = %+v but the copy's Reserve(%d, %d, 0) = %+v, %v", where, at, d, at, n, dc, err)
			}
			if got, want := stateWithoutLastNow(post), stateWithoutLastNow(cp.AppendState(nil)); !bytes.Equal(got, want) {
				return fmt.Sprintf("%s: ReserveAt(%d) left %x, the copy's Reserve %x", where, at, post, cp.AppendState(nil))
			}
		case 2:
			m := 1 + rng.Int64N(3*maxN) // may exceed MaxPermits
			q1, _ := p.Query(callNow, 1)
			if err := sch.Charge(callNow, m); err != nil {
				if !errors.Is(err, ErrOverflow) {
					return fmt.Sprintf("%s: Charge(%d): %v", where, m, err)
				}
				if !bytes.Equal(pre, p.AppendState(nil)) {
					return fmt.Sprintf("%s: failed Charge(%d) changed the state", where, m)
				}
				continue
			}
			q2, _ := p.Query(callNow, 1)
			switch s.Algorithm {
			case Strict:
				if q2 != q1+m*c.IntervalNanos {
					return fmt.Sprintf("%s: Charge(%d) moved the next free time from %d to %d", where, m, q1, q2)
				}
			case Bursty, WarmingUp:
				// Without the maxWait check, a charge spends as a grant.
				if m > c.MaxPermits() {
					break
				}
				cp := mustNew(t, s)
				_ = cp.RestoreState(pre)
				if d, err := cp.Reserve(callNow, m, math.MaxInt64); err != nil || !d.Granted {
					return fmt.Sprintf("%s: Charge(%d) succeeded, Reserve on a copy: %+v, %v", where, m, d, err)
				}
				if !bytes.Equal(p.AppendState(nil), cp.AppendState(nil)) {
					return fmt.Sprintf("%s: Charge(%d) left %x, Reserve %x", where, m, p.AppendState(nil), cp.AppendState(nil))
				}
			}
		}
		checkStateRoundTrip(t, p)
	}
	return ""
}

var schedulerBoundTrials = flag.Int("bound.schedtrials", 1000, "random configurations per algorithm in TestBoundsWithReserveAtAndCharge")

// TestBoundsWithReserveAtAndCharge checks the bounds of doc.go over
// everything Compile accepts (the configurations of
// TestBoundsOverAcceptedRange), with grants made by Reserve and by
// ReserveAt (served at their AtNanos) and permits taken by Charge. A
// charge of n counts as a grant of n served at the pacer's next free time
// when it is taken (Query(now, 1) just before it); for Hybrid, whose bound
// has no n_last term, in tokens: what the pools held at the time it is
// taken (max(now, FillNanos)) at that time, and its debt one token per
// nanosecond as the debt's time passes (see doc.go, "Serving at a chosen
// time").
func TestBoundsWithReserveAtAndCharge(t *testing.T) {
	for _, a := range schedulerAlgorithms {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(a), 4242))
			charged, at := 0, 0
			accepted := eachAcceptedSpec(rng, a, *schedulerBoundTrials, func(trial int, s Spec, c Config) {
				msg, nc, na := checkSchedulerBoundTrial(rng, c)
				if msg != "" {
					t.Fatalf("trial %d, spec %+v (interval %d ns): %s", trial, s, c.IntervalNanos, msg)
				}
				charged += nc
				at += na
			})
			if accepted < *schedulerBoundTrials || charged < accepted || at < accepted {
				t.Fatalf("weak test: %d accepted configurations, %d charges, %d ReserveAt grants", accepted, charged, at)
			}
		})
	}
}

// tokenEvent is what a Hybrid grant or charge consumes: tokens at at, and
// the debt (at, debtEnd], one token per nanosecond (debtEnd == at for a
// grant).
type tokenEvent struct{ at, tokens, debtEnd int64 }

// checkSchedulerBoundTrial is checkBoundTrial with ReserveAt and Charge
// mixed in; it returns the first violation (or ""), and how many charges
// and ReserveAt grants were made.
func checkSchedulerBoundTrial(rng *rand.Rand, c Config) (msg string, charges, ats int) {
	p, err := New(c, 0)
	if err != nil {
		return fmt.Sprintf("New: %v", err), 0, 0
	}
	sch := p.(Scheduler)
	hp, _ := p.(*HybridPacer)
	i := c.IntervalNanos
	arrive := newArrivals(rng, c)
	maxN, fill := arrive.maxN, arrive.fill
	var grants []grantRecord
	var tokens []tokenEvent
	for range 60 {
		now, n := arrive.next()
		var rec grantRecord
		var tok tokenEvent
		switch rng.IntN(3) {
		case 0:
			maxWait := []int64{0, satMul(i, n), math.MaxInt64, logInt(rng, 1, math.MaxInt64)}[rng.IntN(4)]
			d, err := p.Reserve(now, n, maxWait)
			if err != nil {
				return fmt.Sprintf("Reserve(%d, %d, %d): %v", now, n, maxWait, err), charges, ats
			}
			if !d.Granted {
				continue
			}
			rec = grantRecord{d.AtNanos, n}
			tok = tokenEvent{d.AtNanos, n * i, d.AtNanos}
		case 1:
			q, err := p.Query(now, n)
			if err != nil {
				return fmt.Sprintf("Query(%d, %d): %v", now, n, err), charges, ats
			}
			extra := []int64{0, rng.Int64N(i), satMul(i, rng.Int64N(4)), logInt(rng, 1, max(1, satMul(fill, 2)))}[rng.IntN(4)]
			at := satAdd(q, extra)
			d, err := sch.ReserveAt(now, n, at)
			if err != nil {
				return fmt.Sprintf("ReserveAt(%d, %d, %d): %v", now, n, at, err), charges, ats
			}
			if !d.Granted {
				continue
			}
			if d.AtNanos != at {
				return fmt.Sprintf("ReserveAt(%d, %d, %d) = %+v", now, n, at, d), charges, ats
			}
			ats++
			rec = grantRecord{at, n}
			tok = tokenEvent{at, n * i, at}
		case 2:
			m := logInt(rng, 1, max(2*maxN, 16)) // may exceed MaxPermits
			q, err := p.Query(now, 1)
			if err != nil {
				return fmt.Sprintf("Query(%d, 1): %v", now, err), charges, ats
			}
			var taken int64
			if hp != nil {
				taken = max(now, hp.FillNanos()) // FillNanos >= lastNow
			}
			if err := sch.Charge(now, m); err != nil {
				if errors.Is(err, ErrOverflow) {
					continue
				}
				return fmt.Sprintf("Charge(%d, %d): %v", now, m, err), charges, ats
			}
			charges++
			rec = grantRecord{q, m}
			if hp != nil {
				debt := hp.FillNanos() - taken
				tok = tokenEvent{taken, m*i - debt, hp.FillNanos()}
			}
		}
		if rec.at < now || rec.at == math.MaxInt64 {
			return fmt.Sprintf("served at %d, now %d", rec.at, now), charges, ats
		}
		if len(grants) > 0 && rec.at < grants[len(grants)-1].at {
			return fmt.Sprintf("served at %d before the previous one at %d", rec.at, grants[len(grants)-1].at), charges, ats
		}
		grants = append(grants, rec)
		tokens = append(tokens, tok)
	}
	for _, w := range trialWindows(rng, c) {
		if w < 0 {
			continue
		}
		if hp != nil {
			msg = checkTokenWindows(c, tokens, w)
		} else {
			msg = checkWindows(c, grants, w)
		}
		if msg != "" {
			return msg, charges, ats
		}
	}
	return "", charges, ats
}

// checkTokenWindows checks every window [s, s+w] that starts at an event
// or at the end of a debt against the Hybrid bound in tokens,
// A + B + w + floor(B*w/A): the tokens of the events in the window plus the
// part of every debt that elapses in it.
func checkTokenWindows(c Config, events []tokenEvent, w int64) string {
	b := func(v int64) *big.Int { return big.NewInt(v) }
	bound := new(big.Int).Mul(b(c.BurstNanos), b(w))
	bound.Quo(bound, b(c.ActiveNanos))
	bound.Add(bound, b(c.ActiveNanos))
	bound.Add(bound, b(c.BurstNanos))
	bound.Add(bound, b(w))
	for _, e := range events {
		for _, start := range []int64{e.at, e.debtEnd} {
			end := satAdd(start, w)
			count := new(big.Int)
			for _, f := range events {
				if f.at >= start && f.at <= end {
					count.Add(count, b(f.tokens))
				}
				if lo, hi := max(f.at, start), min(f.debtEnd, end); hi > lo {
					count.Add(count, b(hi-lo))
				}
			}
			if count.Cmp(bound) > 0 {
				return fmt.Sprintf("window [%d, %d] (W = %d) holds %v tokens, bound %v (events %v)", start, end, w, count, bound, events)
			}
		}
	}
	return ""
}
