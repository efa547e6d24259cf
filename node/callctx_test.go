package node

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCallContextEndsAtItsDeadline: a call's context behaves as
// context.WithDeadline's, though it arms no timer until something waits
// on it: it reports its deadline, Err is nil before it and
// DeadlineExceeded from it on (with or without a waiter), Done closes at
// it, a context derived from it ends with it (with the same error), and
// stop ends it early (Canceled), as a cancel.
func TestCallContextEndsAtItsDeadline(t *testing.T) {
	const d = 50 * time.Millisecond
	start := time.Now()
	c := newCallContext(start.Add(d), nil)
	defer c.stop()
	if dl, ok := c.Deadline(); !ok || !dl.Equal(start.Add(d)) {
		t.Errorf("Deadline() = %v, %v; want %v, true", dl, ok, start.Add(d))
	}
	if err := c.Err(); err != nil {
		t.Fatalf("Err() before the deadline = %v, want nil", err)
	}
	child, cancel := context.WithCancel(c)
	defer cancel()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a context derived from a call's context did not end within 10s of its 50ms deadline")
	}
	if waited := time.Since(start); waited < d {
		t.Errorf("derived context ended after %v, before the deadline (%v)", waited, d)
	}
	if !errors.Is(child.Err(), context.DeadlineExceeded) || !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("after the deadline: Err() = %v, derived %v; want DeadlineExceeded", c.Err(), child.Err())
	}

	// Nothing waits: Err still reads the deadline.
	past := newCallContext(time.Now().Add(-time.Millisecond), nil)
	if !errors.Is(past.Err(), context.DeadlineExceeded) {
		t.Errorf("Err() past an unwatched deadline = %v, want DeadlineExceeded", past.Err())
	}
	select {
	case <-past.Done():
	default:
		t.Error("Done() past the deadline is not closed")
	}
	past.stop()

	// stop, before or after a waiter: Canceled.
	for _, armFirst := range []bool{false, true} {
		s := newCallContext(time.Now().Add(time.Hour), nil)
		if armFirst {
			_ = s.Done()
		}
		s.stop()
		select {
		case <-s.Done():
		default:
			t.Errorf("armed first %v: Done() not closed after stop", armFirst)
		}
		if !errors.Is(s.Err(), context.Canceled) {
			t.Errorf("armed first %v: Err() after stop = %v, want Canceled", armFirst, s.Err())
		}
	}
}

// TestCallContextCarriesItsWindowPlace: the place a call holds in its
// connection's window is found through any context derived from the
// call's, given back once whether the call's waiting (giveAll, with the
// layers above it) or the call's end (leaveWindow) comes first.
func TestCallContextCarriesItsWindowPlace(t *testing.T) {
	sem := make(chan struct{}, 2)
	sem <- struct{}{}
	c := newCallContext(time.Now().Add(time.Hour), sem)
	defer c.stop()
	released := 0
	ctx, adm := withAdmission(c, func() { released++ })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	admissionOf(ctx).giveAll()
	if len(sem) != 0 || released != 1 {
		t.Fatalf("after a waiting reserve's giveAll: window holds %d, released %d times; want 0 and 1 (both layers given back)", len(sem), released)
	}
	sem <- struct{}{} // another call's place: the leaves below must not take it
	admissionOf(ctx).giveAll()
	adm.leave()
	c.leaveWindow()
	if len(sem) != 1 || released != 1 {
		t.Errorf("after giveAll again and both leaves: window holds %d, released %d times; want 1 and 1 (each layer given back once)", len(sem), released)
	}
}

// BenchmarkCallDeadline compares a served call's context as it was
// (context.WithTimeout: a runtime timer armed and stopped per call) with
// a callContext nothing waits on (the leader's reserve path), each
// carrying the call's place in its window and given back.
func BenchmarkCallDeadline(b *testing.B) {
	sem := make(chan struct{}, 1024)
	b.Run("WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				sem <- struct{}{}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				ctx, adm := withAdmission(ctx, func() { <-sem })
				if ctx.Err() != nil {
					b.Error("ended")
				}
				cancel()
				adm.leave()
			}
		})
	})
	b.Run("callContext", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				sem <- struct{}{}
				ctx := newCallContext(time.Now().Add(10*time.Second), sem)
				if ctx.Err() != nil {
					b.Error("ended")
				}
				ctx.stop()
				ctx.leaveWindow()
			}
		})
	})
}
