package lazyctx

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// withLazyDeadline is New, with Release as context.WithDeadline's cancel
// (as transport/server uses it).
func withLazyDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	c := New(parent, deadline)
	return c, c.Release
}

// The lazy deadline behaves as context.WithDeadline does, whether or not
// anything waited on it: at the deadline, with its parent, and after its
// release. The bubble's clock makes the deadlines exact.
func TestLazyDeadlineEndsAsWithDeadline(t *testing.T) {
	type key struct{}
	for _, waited := range []bool{false, true} {
		name := "never-waited-on"
		if waited {
			name = "waited-on"
		}
		t.Run(name+"/deadline", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parent := context.WithValue(context.Background(), key{}, "v")
				ctx, release := withLazyDeadline(parent, time.Now().Add(time.Second))
				defer release()
				if waited {
					_ = ctx.Done()
				}
				d, ok := ctx.Deadline()
				require.True(t, ok)
				require.Equal(t, time.Now().Add(time.Second), d)
				require.Equal(t, "v", ctx.Value(key{}))
				require.NoError(t, ctx.Err())
				time.Sleep(999 * time.Millisecond) // the bubble's clock: no real wait
				require.NoError(t, ctx.Err())
				time.Sleep(time.Millisecond)
				synctest.Wait()
				require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
				select {
				case <-ctx.Done():
				default:
					t.Fatal("Done is not closed at the deadline")
				}
			})
		})
		t.Run(name+"/parent", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parent, cancel := context.WithCancel(context.Background())
				ctx, release := withLazyDeadline(parent, time.Now().Add(time.Hour))
				defer release()
				if waited {
					_ = ctx.Done()
				}
				cancel()
				synctest.Wait()
				require.ErrorIs(t, ctx.Err(), context.Canceled)
				<-ctx.Done()
			})
		})
		t.Run(name+"/release", func(t *testing.T) {
			ctx, release := withLazyDeadline(context.WithValue(context.Background(), key{}, "v"), time.Now().Add(time.Hour))
			if waited {
				_ = ctx.Done()
			}
			release()
			require.ErrorIs(t, ctx.Err(), context.Canceled)
			require.Equal(t, "v", ctx.Value(key{})) // the parent's values outlive the release
			require.ErrorIs(t, context.Cause(ctx), context.Canceled)
			<-ctx.Done() // a first Done after the release is closed too
			release()    // twice, as a CancelFunc may be called
		})
	}
	t.Run("parent-deadline-first", func(t *testing.T) {
		parent, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Minute))
		defer cancel()
		want, _ := parent.Deadline()
		ctx, release := withLazyDeadline(parent, time.Now().Add(time.Hour))
		defer release()
		got, _ := ctx.Deadline()
		require.Equal(t, want, got)
	})
}

// Waiting, reading and releasing from several goroutines at once is
// safe (run under -race).
func TestLazyDeadlineConcurrentUse(t *testing.T) {
	for range 100 {
		ctx, release := withLazyDeadline(context.Background(), time.Now().Add(time.Hour))
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				_ = ctx.Err()
				_ = ctx.Done()
			})
		}
		wg.Go(release)
		wg.Wait()
		<-ctx.Done()
		require.ErrorIs(t, ctx.Err(), context.Canceled)
	}
}

// A request's context that nothing waits on makes no timer: two
// allocations (the context and its release), where context.WithTimeout
// makes four, one of them the timer.
func TestLazyDeadlineMakesNoTimerUnlessWaitedOn(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		ctx, release := withLazyDeadline(context.Background(), time.Now().Add(time.Minute))
		_ = ctx.Err()
		release()
	})
	require.LessOrEqual(t, allocs, 2.0)
}

// A context derived from a lazy deadline follows it as one derived from
// context.WithDeadline does, without a goroutine of its own; and
// context.Cause reports the deadline once it has passed.
func TestLazyDeadlineChildrenNeedNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		before := runtime.NumGoroutine()
		var releases []context.CancelFunc
		for range 50 {
			ctx, release := withLazyDeadline(parent, time.Now().Add(time.Second))
			_, stop := context.WithTimeout(ctx, time.Minute)
			releases = append(releases, release, stop)
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("%d goroutines after deriving 50 contexts, %d before: want none started to follow them", n, before)
		}
		for _, r := range releases {
			r()
		}
		ctx, release := withLazyDeadline(parent, time.Now().Add(time.Second))
		defer release()
		time.Sleep(time.Second)
		require.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
	})
}

// TestErrStaysAfterRelease: a context released before anything was made
// reports context.Canceled, and keeps reporting it once Done is asked
// after its deadline or after its parent ended (an error, once reported,
// never changes).
func TestErrStaysAfterRelease(t *testing.T) {
	live, cancelLive := context.WithTimeout(context.Background(), time.Hour)
	defer cancelLive()
	past := New(live, time.Now().Add(-time.Second))
	past.Release()
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()
	parentEnded := New(expired, time.Now().Add(time.Hour))
	parentEnded.Release()
	for name, c := range map[string]*Context{"deadline passed": past, "parent ended": parentEnded} {
		require.Equal(t, context.Canceled, c.Err(), "%s: released", name)
		<-c.Done()
		require.Equal(t, context.Canceled, c.Err(), "%s: once Done was asked", name)
		require.Equal(t, context.Canceled, context.Cause(c), "%s: its cause", name)
	}
}
