package fakeapi

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
)

// TestServerMulti: three calls of 200 ms at once against a cap of 2 in
// flight, 10 tokens each against a bound of 25 per window, spacing 1 s:
// the live judge counts each dimension; each call ends with its end stamp.
func TestServerMulti(t *testing.T) {
	s, err := New(Config{Mode: Multi, Multi: MultiSpec{
		SpacingNanos: int64(time.Second), MaxInFlight: 2, TokenWindowsNanos: []int64{int64(time.Second)},
		TokenBound: bound.Bound{Formula: "25", Max: func(int64) int64 { return 25 }},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := serveUnix(t, s)
	ctx := context.Background()
	if _, err := c.Call(ctx, CallRequest{Worker: "w"}); err == nil {
		t.Fatal("a call without tokens was accepted")
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			tokens, d := int64(10), int64(200*time.Millisecond)
			got, err := c.Call(ctx, CallRequest{Worker: "w", Tokens: &tokens, DurationNanos: &d})
			if err != nil || got.EndNanos == nil || *got.EndNanos-got.TimeNanos < d {
				t.Errorf("call %+v: %v", got, err)
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	m := st.Multi
	if m == nil || m.Calls != 3 || m.Ended != 3 || m.SpacingViolations != 2 || m.TokenViolations != 1 || m.InFlightViolations != 1 || st.Violations != 4 || m.MaxInFlight != 3 {
		t.Fatalf("stats %+v, multi %+v", st, m)
	}
	for _, call := range s.Calls() {
		if call.EndNanos == nil || call.Tokens == nil || *call.Tokens != 10 {
			t.Fatalf("call %+v", call)
		}
	}
}
