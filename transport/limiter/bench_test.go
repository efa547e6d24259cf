package limiter

import (
	"context"
	"testing"
	"time"

	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/permitd/permitd/bucket"
)

// Benchmarks of the decisions and of the Limiter, side by side with
// golang.org/x/time/rate and go.uber.org/ratelimit. Run:
//
//	go test -run '^$' -bench . -benchmem -cpu 1,2 -benchtime=200ms ./bucket/
//
// Every benchmark is set up so that each request is granted without waiting:
// they measure the cost of a decision, not pacing.

// benchRate is the rate of the decision benchmarks: one permit per
// microsecond, with the synthetic clock advancing by exactly one interval
// per request.
const benchRate = 1e6

// benchSpecs is one Spec per algorithm at the given rate.
func benchSpecs(r float64) []struct {
	name string
	spec bucket.Spec
} {
	return []struct {
		name string
		spec bucket.Spec
	}{
		{"strict", bucket.Spec{Algorithm: bucket.Strict, Rate: r}},
		{"bursty", bucket.Spec{Algorithm: bucket.Bursty, Rate: r}},
		{"warmup", bucket.Spec{Algorithm: bucket.WarmingUp, Rate: r, Warmup: time.Millisecond}},
		{"hybrid", bucket.Spec{Algorithm: bucket.Hybrid, Rate: r}},
	}
}

// BenchmarkDecision measures one decision, single-threaded, on a synthetic
// timeline: each algorithm's Pacer.Reserve (no lock, no clock), against
// x/time/rate's AllowN and ReserveN with a passed-in time (which take its
// mutex) and uber's Take with a synthetic clock (an atomic CAS loop).
func BenchmarkDecision(b *testing.B) {
	for _, bs := range benchSpecs(benchRate) {
		b.Run(bs.name, func(b *testing.B) {
			c, err := bucket.Compile(bs.spec)
			if err != nil {
				b.Fatal(err)
			}
			p, err := bucket.New(c, 0)
			if err != nil {
				b.Fatal(err)
			}
			step := c.IntervalNanos
			now := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				now += step
				if _, err := p.Reserve(now, 1, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("xrate-AllowN", func(b *testing.B) {
		lim := rate.NewLimiter(rate.Limit(benchRate), 1)
		t := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			t = t.Add(time.Microsecond)
			lim.AllowN(t, 1)
		}
	})
	b.Run("xrate-ReserveN", func(b *testing.B) {
		lim := rate.NewLimiter(rate.Limit(benchRate), 1)
		t := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			t = t.Add(time.Microsecond)
			lim.ReserveN(t, 1)
		}
	})
	b.Run("uber-Take", func(b *testing.B) {
		clk := &stepClock{now: time.Now(), step: time.Microsecond}
		lim := ratelimit.New(benchRate, ratelimit.WithClock(clk))
		b.ReportAllocs()
		for b.Loop() {
			lim.Take()
		}
	})
}

// stepClock is a ratelimit.Clock for one goroutine whose time advances by
// step at each reading and whose Sleep returns at once: uber's Take then
// costs its decision only.
type stepClock struct {
	now  time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time {
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *stepClock) Sleep(time.Duration) {}

// limiterRate is the rate of the Limiter benchmarks: high enough (one
// permit per nanosecond) that no request ever waits on the real clock, so
// they measure the cost of the non-sleeping path, clock read included.
const limiterRate = 1e9

// BenchmarkLimiter measures the Limiter's operations single-threaded on
// the real clock, against x/time/rate (Allow reads time.Now) and uber's
// Take on the real clock at 1e9 per second (it only sleeps when it is ahead
// of the clock, which a 1 ns interval never is).
func BenchmarkLimiter(b *testing.B) {
	ctx := context.Background()
	for _, bs := range benchSpecs(limiterRate) {
		b.Run(bs.name, func(b *testing.B) {
			l, err := New(bs.spec)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("TryAcquire", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := l.TryAcquire(1, 0); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("Wait", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := l.Wait(ctx, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("Reserve", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := l.Reserve(1); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
	b.Run("xrate", func(b *testing.B) {
		lim := rate.NewLimiter(rate.Limit(limiterRate), 1)
		b.Run("Allow", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				lim.Allow()
			}
		})
		b.Run("Wait", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := lim.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Reserve", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				lim.Reserve()
			}
		})
	})
	b.Run("uber/Take", func(b *testing.B) {
		lim := ratelimit.New(limiterRate)
		b.ReportAllocs()
		for b.Loop() {
			lim.Take()
		}
	})
}

// BenchmarkLimiterParallel measures TryAcquire(1, 0) from GOMAXPROCS
// goroutines on one Limiter (run with -cpu 1,2), against x/time/rate's
// Allow and uber's Take on the real clock.
func BenchmarkLimiterParallel(b *testing.B) {
	for _, bs := range benchSpecs(limiterRate) {
		b.Run(bs.name, func(b *testing.B) {
			l, err := New(bs.spec)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.TryAcquire(1, 0); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("xrate-Allow", func(b *testing.B) {
		lim := rate.NewLimiter(rate.Limit(limiterRate), 1)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lim.Allow()
			}
		})
	})
	b.Run("uber-Take", func(b *testing.B) {
		lim := ratelimit.New(limiterRate)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lim.Take()
			}
		})
	})
}
