package fakeapi

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerMulti: three calls of 200 ms at once against a cap of 2 in
// flight, 10 tokens each against a bound of 25 per window, spacing 1 s:
// the live judge counts each dimension; each call ends with its end stamp.
func TestServerMulti(t *testing.T) {
	s, err := New(Config{Mode: Multi, Multi: MultiSpec{
		SpacingNanos: int64(time.Second), MaxInFlight: 2, TokenWindowsNanos: []int64{int64(time.Second)},
		TokenBound: bound.Bound{Formula: "25", Max: func(int64) int64 { return 25 }},
	}})
	require.NoError(t, err)
	c := serveUnix(t, s)
	ctx := context.Background()
	_, err = c.Call(ctx, CallRequest{Worker: "w"})
	require.Error(t, err, "a call without tokens was accepted")
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			tokens, d := int64(10), int64(200*time.Millisecond)
			got, err := c.Call(ctx, CallRequest{Worker: "w", Tokens: &tokens, DurationNanos: &d})
			if assert.NoError(t, err) && assert.NotNil(t, got.EndNanos, "call %+v", got) {
				assert.GreaterOrEqual(t, *got.EndNanos-got.TimeNanos, d, "call %+v", got)
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	m := st.Multi
	require.NotNil(t, m, "stats %+v", st)
	require.Equal(t, int64(3), m.Calls, "multi %+v", m)
	require.Equal(t, int64(3), m.Ended, "multi %+v", m)
	require.Equal(t, int64(2), m.SpacingViolations, "multi %+v", m)
	require.Equal(t, int64(1), m.TokenViolations, "multi %+v", m)
	require.Equal(t, int64(1), m.InFlightViolations, "multi %+v", m)
	require.Equal(t, int64(4), st.Violations, "stats %+v", st)
	require.Equal(t, int64(3), m.MaxInFlight, "multi %+v", m)
	for _, call := range s.Calls() {
		require.NotNil(t, call.EndNanos, "call %+v", call)
		require.NotNil(t, call.Tokens, "call %+v", call)
		require.Equal(t, int64(10), *call.Tokens, "call %+v", call)
	}
}
