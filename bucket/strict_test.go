package bucket

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"
)

// TestStrictTimelineOfDocument002 replays the worked example of
// strict.go: one permit every 6 s, requests at 2 s and 8 s granted, the request at
// 13 s (5 s after the last) refused or delayed to 14 s.
func TestStrictTimelineOfDocument002(t *testing.T) {
	type step struct {
		now, maxWait int64
		want         Decision
	}
	tests := []struct {
		name  string
		spec  Spec
		steps []step
	}{
		{
			name: "pessimistic: the request at 13s is refused, come back at 14s",
			spec: Spec{Algorithm: Strict, Rate: 1, Per: 6 * time.Second},
			steps: []step{
				{2 * sec, 0, Decision{true, 2 * sec, 5 * sec, 6 * sec}},
				{8 * sec, 0, Decision{true, 8 * sec, 11 * sec, 6 * sec}},
				{13 * sec, 0, Decision{false, 14 * sec, 0, 0}},
				{13 * sec, 10 * sec, Decision{false, 14 * sec, 0, 0}}, // MaxReserved 0: no waiting ever
				{14 * sec, 0, Decision{true, 14 * sec, 17 * sec, 6 * sec}},
				{21 * sec, 0, Decision{true, 21 * sec, 24 * sec, 6 * sec}}, // no memory of the idle second
			},
		},
		{
			name: "optimistic: the request at 13s waits until 14s",
			spec: Spec{Algorithm: Strict, Rate: 1, Per: 6 * time.Second, MaxReserved: 1},
			steps: []step{
				{2 * sec, 0, Decision{true, 2 * sec, 5 * sec, 6 * sec}},
				{8 * sec, 0, Decision{true, 8 * sec, 11 * sec, 6 * sec}},
				{13 * sec, sec - 1, Decision{false, 14 * sec, 0, 0}}, // not willing to wait 1 s
				{13 * sec, sec, Decision{true, 14 * sec, 17 * sec, 6 * sec}},
				{13 * sec, time.Hour.Nanoseconds(), Decision{false, 20 * sec, 0, 0}}, // a second reservation ahead: over MaxReserved
				{15 * sec, 5 * sec, Decision{true, 20 * sec, 23 * sec, 6 * sec}},     // 14s slot is past: only this one ahead
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, tt.spec)
			for i, s := range tt.steps {
				if got := mustReserve(t, p, s.now, 1, s.maxWait); got != s.want {
					t.Fatalf("step %d: Reserve(%v, 1, %v) = %+v, want %+v", i, time.Duration(s.now), time.Duration(s.maxWait), got, s.want)
				}
			}
		})
	}
}

// TestStrictRedisPseudocode checks the register against the reservation
// rule of strict.go with a bound of 2 reserved permits.
func TestStrictMaxReserved(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Strict, Rate: 1, MaxReserved: 2})
	const forever = math.MaxInt64
	want := []Decision{
		{true, 0, sec / 2, sec},             // served now
		{true, sec, sec + sec/2, sec},       // 1 ahead
		{true, 2 * sec, 2*sec + sec/2, sec}, // 2 ahead
		{false, 3 * sec, 0, 0},              // would be the 3rd ahead
	}
	for i, w := range want {
		if got := mustReserve(t, p, 0, 1, forever); got != w {
			t.Fatalf("reserve %d at 0: %+v, want %+v", i, got, w)
		}
	}
	// Half a second later the slot at 0 is past but 1s and 2s still ahead.
	if got := mustReserve(t, p, sec/2, 1, forever); got.Granted {
		t.Fatalf("granted a third reservation ahead: %+v", got)
	}
	// At 1s the slot at 1s is now, not ahead.
	if got := mustReserve(t, p, sec, 1, forever); !got.Granted || got.AtNanos != 3*sec {
		t.Fatalf("at 1s: %+v, want granted at 3s", got)
	}
	if at, _ := p.Query(sec, 1); at != 4*sec {
		t.Fatalf("Query = %d, want 4s", at)
	}
}

func TestStrictWeighted(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Strict, Rate: 10, MaxReserved: 4, Expiry: time.Millisecond})
	// 3 permits at 0: slots 0, 100ms, 200ms (2 ahead).
	if got := mustReserve(t, p, 0, 3, 0); got != (Decision{true, 0, 1e6, 1e8}) {
		t.Fatalf("3 permits: %+v", got)
	}
	// 3 more: slots 300..500ms, ahead = 2 + 3 = 5 > 4.
	if got := mustReserve(t, p, 0, 3, sec); got.Granted || got.AtNanos != 3e8 {
		t.Fatalf("3 more: %+v, want refused at 300ms", got)
	}
	// 2 more: slots 300, 400ms: ahead 4.
	if got := mustReserve(t, p, 0, 2, sec); got != (Decision{true, 3e8, 3e8 + 1e6, 1e8}) {
		t.Fatalf("2 more: %+v", got)
	}
	if _, err := p.Reserve(0, 6, 0); !errors.Is(err, ErrTooManyPermits) {
		t.Fatalf("6 permits: %v, want ErrTooManyPermits", err)
	}
}

func TestStrictInvalidInput(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Strict, Rate: 1})
	for _, n := range []int64{0, -1, math.MinInt64} {
		if _, err := p.Reserve(0, n, 0); !errors.Is(err, ErrInvalidPermits) {
			t.Errorf("Reserve n=%d: %v", n, err)
		}
		if _, err := p.Query(0, n); !errors.Is(err, ErrInvalidPermits) {
			t.Errorf("Query n=%d: %v", n, err)
		}
	}
	if _, err := p.Reserve(0, 2, 0); !errors.Is(err, ErrTooManyPermits) {
		t.Errorf("Reserve n=2: %v", err)
	}
	if _, err := p.Reserve(0, 1, -1); !errors.Is(err, ErrInvalidDuration) {
		t.Errorf("Reserve maxWait=-1: %v", err)
	}
	other := mustCompile(t, Spec{Algorithm: Bursty, Rate: 1})
	if err := p.Reconfigure(0, other); !errors.Is(err, ErrInvalidAlgorithm) {
		t.Errorf("Reconfigure to bursty: %v", err)
	}
	if b := p.AppendState(nil); !bytes.Equal(b, mustNewState(t, Spec{Algorithm: Strict, Rate: 1})) {
		t.Errorf("invalid calls changed the state: %x", b)
	}
}

func mustNewState(t *testing.T, s Spec) []byte {
	return mustNew(t, s).AppendState(nil)
}

func TestStrictTimeGoesBackwards(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Strict, Rate: 1, MaxReserved: 1})
	mustReserve(t, p, 10*sec, 1, 0)
	// now = 5s is treated as 10s: the next slot is 11s, 1 s away.
	if got := mustReserve(t, p, 5*sec, 1, sec); got != (Decision{true, 11 * sec, 11*sec + sec/2, sec}) {
		t.Fatalf("backwards: %+v", got)
	}
}

func TestStrictReconfigureKeepsReservations(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Strict, Rate: 1, MaxReserved: 3})
	mustReserve(t, p, 0, 3, 0) // slots 0, 1s, 2s; nextFree 3s
	if err := p.Reconfigure(0, mustCompile(t, Spec{Algorithm: Strict, Rate: 10, MaxReserved: 3})); err != nil {
		t.Fatal(err)
	}
	// The new interval of 100ms starts after the slots already given out;
	// the three slots ahead leave room for none.
	if got := mustReserve(t, p, 0, 1, 10*sec); got.Granted || got.AtNanos != 3*sec {
		t.Fatalf("after reconfigure: %+v", got)
	}
	// Slots ahead are counted in new intervals: at 2s the one old slot
	// ahead (1 s away) counts as 9 of 100 ms, too many.
	if got := mustReserve(t, p, 2*sec, 1, 10*sec); got.Granted {
		t.Fatalf("after reconfigure at 2s: %+v", got)
	}
	// At 2.8s the next slot (3s) is 2 new intervals away: 2 ahead with this one.
	if got := mustReserve(t, p, 28e8, 1, 10*sec); got != (Decision{true, 3 * sec, 3*sec + 5e7, 1e8}) {
		t.Fatalf("after reconfigure at 2.8s: %+v", got)
	}
}

// FuzzStrict runs a sequence of reservations and checks that no two
// granted slots are closer than the interval, that no grant reserves more
// than MaxReserved slots after now, and that the state round-trips.
func FuzzStrict(f *testing.F) {
	f.Add(int64(1000), int64(3), []byte{1, 0, 5, 1, 200, 2, 3, 3, 0, 9})
	f.Add(int64(6e9), int64(0), []byte{2, 6, 5, 0, 1, 1})
	f.Fuzz(func(t *testing.T, interval, maxRes int64, ops []byte) {
		if interval <= 0 || maxRes < 0 || maxRes > 8 || len(ops) > 300 {
			return
		}
		c, err := Compile(Spec{Algorithm: Strict, Rate: 1, Per: time.Duration(interval), MaxReserved: maxRes})
		if err != nil {
			return
		}
		p, _ := New(c, 0)
		var now, lastSlot int64 = 0, math.MinInt64
		for i := 0; i+1 < len(ops); i += 2 {
			now += int64(ops[i]) * interval / 7
			n := int64(ops[i+1]%4) + 1
			maxWait := int64(ops[i+1]>>2) * interval / 3
			d, err := p.Reserve(now, n, maxWait)
			if n > maxRes+1 {
				if !errors.Is(err, ErrTooManyPermits) {
					t.Fatalf("n=%d > MaxReserved+1: %v", n, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			q, _ := p.Query(now, n)
			if !d.Granted {
				if d.AtNanos < now {
					t.Fatalf("refusal in the past: %+v at %d", d, now)
				}
				continue
			}
			if d.AtNanos < now || d.AtNanos-now > maxWait {
				t.Fatalf("grant %+v at %d exceeds maxWait %d", d, now, maxWait)
			}
			if lastSlot != math.MinInt64 && d.AtNanos-lastSlot < interval {
				t.Fatalf("slot %d only %d after the previous %d (interval %d)", d.AtNanos, d.AtNanos-lastSlot, lastSlot, interval)
			}
			lastSlot = d.AtNanos + (n-1)*interval
			if ahead := ceilDiv(lastSlot+interval-now, interval) - 1; ahead > maxRes {
				t.Fatalf("%d slots ahead of now, MaxReserved %d", ahead, maxRes)
			}
			if q != lastSlot+interval {
				t.Fatalf("Query = %d, want %d", q, lastSlot+interval)
			}
			checkStateRoundTrip(t, p)
		}
	})
}

// checkStateRoundTrip checks encode → restore (into a fresh pacer) →
// encode is byte-identical.
func checkStateRoundTrip(t *testing.T, p Pacer) {
	t.Helper()
	b := p.AppendState(nil)
	q, err := New(p.Config(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.RestoreState(b); err != nil {
		t.Fatalf("RestoreState(%x): %v", b, err)
	}
	if b2 := q.AppendState(nil); !bytes.Equal(b, b2) {
		t.Fatalf("state round trip %x -> %x", b, b2)
	}
}

func TestStrictZeroAllocs(t *testing.T) {
	p := mustNew(t, Spec{Algorithm: Strict, Rate: 1e6, MaxReserved: 10})
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 500
		_, _ = p.Reserve(now, 1, 2000)
		_, _ = p.Query(now, 1)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Reserve+Query", allocs)
	}
}
