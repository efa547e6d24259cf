package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestThrottleFailModeRunsOnlyAtItsSlot: in Fail mode with a max wait, a
// permit granted for later is waited for before fn runs (Throttle and
// Wrap alike): the throttled function never runs before its slot.
func TestThrottleFailModeRunsOnlyAtItsSlot(t *testing.T) {
	c, clk := strictOnAFakeClock(t, 5)
	ctx := context.Background()
	var ranAt []time.Time
	fn := func(context.Context) error { ranAt = append(ranAt, clk.Now()); return nil }
	fail := c.Throttle("api", Fail, ThrottleMaxWait(5*time.Second))
	for i := 0; i < 2; i++ {
		if err := fail(ctx, fn); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	wrapped := Wrap(c, "api", Fail, func(ctx context.Context) (int, error) { return 7, fn(ctx) }, ThrottleMaxWait(5*time.Second))
	if v, err := wrapped(ctx); err != nil || v != 7 {
		t.Fatalf("wrap: %v %v", v, err)
	}
	for i := 1; i < len(ranAt); i++ {
		if gap := ranAt[i].Sub(ranAt[i-1]); gap < time.Second {
			t.Errorf("calls %d and %d ran %v apart on a 1/s strict limit (sleeps %v)", i-1, i, gap, clk.Sleeps())
		}
	}
	// And without a max wait it is refused, never run early.
	n := len(ranAt)
	if err := c.Throttle("api", Fail)(ctx, fn); !errors.Is(err, ErrThrottled) || len(ranAt) != n {
		t.Errorf("no max wait: %v, ran %d times; want ErrThrottled without running", err, len(ranAt)-n)
	}
}
