package limiter

import (
	"github.com/permitd/permitd/bucket"

	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The Limiter tests run inside testing/synctest bubbles: the Limiter's real
// monotonic clock then reads the bubble's virtual clock, time.Sleep and
// timers are virtual, and time only moves when every goroutine is blocked,
// so every wait is exact and the tests take no real time.

// limiterSpecs is one small Spec per algorithm, rate 1 per second unless
// the algorithm needs otherwise.
func limiterSpecs() map[string]bucket.Spec {
	return map[string]bucket.Spec{
		"strict":  {Algorithm: bucket.Strict, Rate: 1, MaxReserved: 8, Expiry: time.Hour},
		"bursty":  {Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 2},
		"warmup":  {Algorithm: bucket.WarmingUp, Rate: 1, Warmup: 4 * time.Second},
		"hybrid":  {Algorithm: bucket.Hybrid, Rate: 1, BurstRatio: 4},
		"bursty3": {Algorithm: bucket.Bursty, Rate: 3, Per: time.Second},
	}
}

// sortedSpecNames returns the keys of m in order, so subtests run in a fixed
// order.
func sortedSpecNames(m map[string]bucket.Spec) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func mustLimiter(t *testing.T, s bucket.Spec) *Limiter {
	t.Helper()
	l, err := New(s)
	if err != nil {
		t.Fatalf("New(%+v): %v", s, err)
	}
	return l
}

func newRefPacer(t *testing.T, s bucket.Spec) bucket.Pacer {
	t.Helper()
	c, err := bucket.Compile(s)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", s, err)
	}
	p, err := bucket.New(c, 0)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// state returns the Limiter's encoded Pacer state.
func (l *Limiter) state() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pacer.AppendState(nil)
}

// sinceNanos returns the bubble time since start in nanoseconds.
func sinceNanos(start time.Time) int64 { return int64(time.Since(start)) }

// TestLimiterFollowsPacer drives a Limiter with TryAcquire and Wait and a
// reference Pacer with the same requests at the same times: the Limiter
// must grant exactly what the Pacer grants and sleep exactly the Pacer's
// wait, for every algorithm.
func TestLimiterFollowsPacer(t *testing.T) {
	type step struct {
		idle    time.Duration // virtual time passing before the request
		n       int64
		wait    bool          // Wait without deadline instead of TryAcquire
		timeout time.Duration // TryAcquire timeout
	}
	const try, wait = false, true
	steps := []step{
		{0, 1, try, 0}, {0, 1, try, 0}, {0, 1, wait, 0}, {0, 1, try, 500 * time.Millisecond},
		{0, 1, try, 3 * time.Second}, {2500 * time.Millisecond, 2, try, 0}, {0, 1, wait, 0},
		{10 * time.Second, 1, try, 0}, {0, 1, try, 0}, {0, 1, try, 0}, {0, 1, try, 0},
		{0, 3, wait, 0}, {100 * time.Millisecond, 1, try, time.Second}, {time.Minute, 2, try, 2 * time.Second},
		{0, 1, try, -time.Second}, {0, 1, wait, 0}, {0, 1, try, 10 * time.Second},
	}
	specs := limiterSpecs()
	for _, name := range sortedSpecNames(specs) {
		spec := specs[name]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ref := newRefPacer(t, spec)
				l := mustLimiter(t, spec)
				start := time.Now()
				for i, st := range steps {
					time.Sleep(st.idle)
					now := sinceNanos(start)
					maxWait := int64(math.MaxInt64) - now
					if !st.wait {
						maxWait = max(int64(st.timeout), 0)
					}
					want, err := ref.Reserve(now, st.n, maxWait)
					if err != nil {
						t.Fatalf("step %d: reference Reserve: %v", i, err)
					}
					var got bool
					if !st.wait {
						got, err = l.TryAcquire(st.n, st.timeout)
					} else {
						err = l.Wait(context.Background(), st.n)
						got = err == nil
					}
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					waited := sinceNanos(start) - now
					wantWait := int64(0)
					if want.Granted {
						wantWait = max(want.AtNanos-now, 0)
					}
					if got != want.Granted || waited != wantWait {
						t.Fatalf("step %d %+v at %v: granted %v after %v, want %v after %v",
							i, st, time.Duration(now), got, time.Duration(waited), want.Granted, time.Duration(wantWait))
					}
				}
				if !bytes.Equal(l.state(), ref.AppendState(nil)) {
					t.Fatalf("final state differs from the reference pacer")
				}
			})
		})
	}
}

// TestLimiterTryAcquireGuava checks Guava's tryAcquire semantics on
// SmoothBursty at 1 permit per second, which starts with nothing stored.
func TestLimiterTryAcquireGuava(t *testing.T) {
	tests := []struct {
		name    string
		idle    time.Duration
		n       int64
		timeout time.Duration
		ok      bool
		slept   time.Duration
	}{
		{"first permit is free", 0, 1, 0, true, 0},
		{"next waits a second: refused at timeout 0", 0, 1, 0, false, 0},
		{"negative timeout is zero", 0, 1, -time.Hour, false, 0},
		{"refused when the wait exceeds the timeout", 0, 1, 999 * time.Millisecond, false, 0},
		{"granted and slept when it fits exactly", 0, 1, time.Second, true, time.Second},
		{"a big request is granted at once, paid for later", time.Second, 5, 0, true, 0},
		{"the next caller pays for it", 0, 1, 5 * time.Second, true, 5 * time.Second},
	}
	synctest.Test(t, func(t *testing.T) {
		l := mustLimiter(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 1})
		for _, tt := range tests {
			time.Sleep(tt.idle)
			start := time.Now()
			ok, err := l.TryAcquire(tt.n, tt.timeout)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if slept := time.Since(start); ok != tt.ok || slept != tt.slept {
				t.Errorf("%s: TryAcquire(%d, %v) = %v after %v, want %v after %v",
					tt.name, tt.n, tt.timeout, ok, slept, tt.ok, tt.slept)
			}
		}
	})
}

// TestLimiterWaitCancelReturnsPermits cancels a sleeping Wait and checks
// that a later caller gets the permit the cancelled one had reserved, and
// that the Pacer state is exactly as if the cancelled request never came.
func TestLimiterWaitCancelReturnsPermits(t *testing.T) {
	specs := limiterSpecs()
	for _, name := range sortedSpecNames(specs) {
		spec := specs[name]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mustLimiter(t, spec)
				// Drain until a request has to wait.
				for i := 0; ; i++ {
					if i == 1000 {
						t.Fatal("1000 permits granted without waiting")
					}
					ok, err := l.TryAcquire(1, 0)
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						break
					}
				}
				before := l.state()
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error)
				go func() { errc <- l.Wait(ctx, 1) }()
				synctest.Wait() // the waiter has reserved and sleeps
				if bytes.Equal(l.state(), before) {
					t.Fatal("Wait did not reserve")
				}
				cancel()
				err := <-errc
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Wait after cancel = %v, want context.Canceled", err)
				}
				if after := l.state(); !bytes.Equal(after, before) {
					t.Fatalf("state after cancel %x, want the state before the Wait %x", after, before)
				}
			})
		})
	}
	t.Run("a later caller gets the permit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustLimiter(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 1})
			start := time.Now()
			if ok, err := l.TryAcquire(1, 0); !ok || err != nil {
				t.Fatalf("first TryAcquire = %v, %v", ok, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error)
			go func() { errc <- l.Wait(ctx, 1) }() // reserves the permit of t=1s
			time.Sleep(500 * time.Millisecond)
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Wait = %v", err)
			}
			// Had the permit of t=1s stayed consumed, the next one would be
			// at t=2s, beyond this timeout.
			ok, err := l.TryAcquire(1, 600*time.Millisecond)
			if !ok || err != nil {
				t.Fatalf("TryAcquire after the cancelled Wait = %v, %v; want the returned permit", ok, err)
			}
			if got := time.Since(start); got != time.Second {
				t.Fatalf("returned permit used at %v, want 1s", got)
			}
		})
	})
}

// TestReservationCancel covers the rule of Reservation.Cancel.
func TestReservationCancel(t *testing.T) {
	spec := bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 1}
	tests := []struct {
		name string
		// between runs after the reservation and before Cancel.
		between func(t *testing.T, l *Limiter)
		want    bool
	}{
		{"nothing in between", func(*testing.T, *Limiter) {}, true},
		{"refused request in between", func(t *testing.T, l *Limiter) {
			if ok, err := l.TryAcquire(1, 0); ok || err != nil {
				t.Fatalf("TryAcquire = %v, %v; want refusal", ok, err)
			}
		}, true},
		{"time passes, even past the permit's time", func(*testing.T, *Limiter) { time.Sleep(3 * time.Second) }, true},
		{"another grant in between", func(t *testing.T, l *Limiter) {
			if _, err := l.Reserve(1); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"SetRate in between", func(t *testing.T, l *Limiter) {
			if err := l.SetRate(2); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mustLimiter(t, spec)
				if ok, err := l.TryAcquire(1, 0); !ok || err != nil {
					t.Fatalf("TryAcquire = %v, %v", ok, err)
				}
				before := l.state()
				r, err := l.Reserve(1)
				if err != nil || !r.OK() {
					t.Fatalf("Reserve = %+v, %v", r, err)
				}
				if d := r.Delay(); d != time.Second {
					t.Fatalf("Delay = %v, want 1s", d)
				}
				tt.between(t, l)
				if got := r.Cancel(); got != tt.want {
					t.Fatalf("Cancel = %v, want %v", got, tt.want)
				}
				if tt.want && !bytes.Equal(l.state(), before) {
					t.Fatal("Cancel returned true but did not restore the state")
				}
				if r.Cancel() {
					t.Fatal("second Cancel returned the permits again")
				}
			})
		})
	}
	var zero Reservation
	if zero.OK() || zero.Cancel() || zero.Delay() != math.MaxInt64 {
		t.Fatalf("zero Reservation: OK %v Delay %v", zero.OK(), zero.Delay())
	}
	if _, ok := zero.Expires(); ok {
		t.Fatal("zero Reservation expires")
	}
}

// TestLimiterWaitDeadline checks that a Wait whose deadline comes before
// its permits fails at once and reserves nothing, and that one whose
// deadline is later succeeds.
func TestLimiterWaitDeadline(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		wantErr bool
		slept   time.Duration
	}{
		{"deadline before the permit", 999 * time.Millisecond, true, 0},
		{"deadline exactly at the permit", time.Second, false, time.Second},
		{"deadline after the permit", 2 * time.Second, false, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mustLimiter(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 1})
				if err := l.Wait(context.Background(), 1); err != nil {
					t.Fatal(err)
				}
				before := l.state()
				ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
				defer cancel()
				start := time.Now()
				err := l.Wait(ctx, 1)
				if slept := time.Since(start); slept != tt.slept {
					t.Errorf("Wait returned after %v, want %v", slept, tt.slept)
				}
				if !tt.wantErr {
					if err != nil {
						t.Fatalf("Wait = %v", err)
					}
					return
				}
				if !errors.Is(err, ErrWaitExceedsDeadline) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Wait = %v, want ErrWaitExceedsDeadline and context.DeadlineExceeded", err)
				}
				if !bytes.Equal(l.state(), before) {
					t.Fatal("a refused Wait changed the state")
				}
			})
		})
	}
	t.Run("already done context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustLimiter(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 1})
			before := l.state()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := l.Wait(ctx, 1); !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait = %v, want context.Canceled", err)
			}
			if !bytes.Equal(l.state(), before) {
				t.Fatal("Wait on a done context changed the state")
			}
		})
	})
}

// TestLimiterInvalidInput checks that bad input is an error, never a panic
// or a silent clamp.
func TestLimiterInvalidInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustLimiter(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 10})
		for _, n := range []int64{0, -1, math.MinInt64} {
			if _, err := l.TryAcquire(n, time.Second); !errors.Is(err, bucket.ErrInvalidPermits) {
				t.Errorf("TryAcquire(%d) error = %v, want ErrInvalidPermits", n, err)
			}
			if err := l.Wait(context.Background(), n); !errors.Is(err, bucket.ErrInvalidPermits) {
				t.Errorf("Wait(%d) error = %v, want ErrInvalidPermits", n, err)
			}
			if r, err := l.Reserve(n); !errors.Is(err, bucket.ErrInvalidPermits) || r.OK() {
				t.Errorf("Reserve(%d) = %v, %v, want ErrInvalidPermits", n, r.OK(), err)
			}
		}
		tooMany := l.Config().MaxPermits() + 1
		if _, err := l.Reserve(tooMany); err == nil {
			t.Errorf("Reserve(%d) beyond MaxPermits: no error", tooMany)
		}
		for _, rate := range []float64{0, -1, math.NaN()} {
			if err := l.SetRate(rate); !errors.Is(err, bucket.ErrInvalidRate) {
				t.Errorf("SetRate(%v) = %v, want ErrInvalidRate", rate, err)
			}
		}
		if got := l.Config().Spec.Rate; got != 10 {
			t.Errorf("rate after failed SetRate = %v, want 10", got)
		}
		if _, err := New(bucket.Spec{Algorithm: 99, Rate: 1}); err == nil {
			t.Error("New with an unknown algorithm: no error")
		}
	})
}

// TestLimiterSetRate checks that a new rate paces from then on.
func TestLimiterSetRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustLimiter(t, bucket.Spec{Algorithm: bucket.Strict, Rate: 1, MaxReserved: 4, Expiry: time.Hour})
		if err := l.SetRate(4); err != nil {
			t.Fatal(err)
		}
		if got := l.Config().IntervalNanos; got != int64(250*time.Millisecond) {
			t.Fatalf("IntervalNanos after SetRate(4) = %d, want 250ms", got)
		}
		start := time.Now()
		for range 5 {
			if err := l.Wait(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
		}
		if got := time.Since(start); got > time.Second {
			t.Fatalf("5 permits at 4/s took %v, want at most 1s", got)
		}
	})
}

// TestNewFromConfigKeepsTheCompiledOptions: a Limiter made from a
// compiled Config runs that Config, and its SetRate keeps the Config's
// options as compiled, defaults included, where a Limiter from New lets
// the defaults follow the new rate (Strict's expiry: half an interval).
func TestNewFromConfigKeepsTheCompiledOptions(t *testing.T) {
	s := bucket.Spec{Algorithm: bucket.Strict, Rate: 10, MaxReserved: 4}
	c, err := bucket.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	fromConfig, err := NewFromConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := fromConfig.Config(); got.IntervalNanos != c.IntervalNanos || got.ExpiryNanos != c.ExpiryNanos {
		t.Fatalf("Config() interval %d expiry %d, want the compiled %d and %d", got.IntervalNanos, got.ExpiryNanos, c.IntervalNanos, c.ExpiryNanos)
	}
	fromSpec := mustLimiter(t, s)
	for _, l := range []*Limiter{fromConfig, fromSpec} {
		if err := l.SetRate(1); err != nil {
			t.Fatal(err)
		}
	}
	if got := fromConfig.Config().ExpiryNanos; got != c.ExpiryNanos {
		t.Errorf("NewFromConfig: expiry after SetRate(1) = %d, want the compiled %d", got, c.ExpiryNanos)
	}
	if got, want := fromSpec.Config().ExpiryNanos, bucket.DefaultExpiryNanos(int64(time.Second)); got != want {
		t.Errorf("New: expiry after SetRate(1) = %d, want the new rate's default %d", got, want)
	}
	if _, err := NewFromConfig(bucket.Config{}); err == nil {
		t.Error("NewFromConfig of a zero Config: no error")
	}
}

// jitterClock is a manual clock whose sleeps overshoot by oversleep, to test
// what synctest cannot produce: sleep jitter.
type jitterClock struct {
	mu        sync.Mutex
	now       int64
	oversleep int64
	base      time.Time
}

func (c *jitterClock) nowNanos() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *jitterClock) nanosAt(t time.Time) int64 { return int64(t.Sub(c.base)) }

func (c *jitterClock) sleep(_ <-chan struct{}, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now += int64(d) + c.oversleep
	}
	return true
}

// TestLimiterExpiredPermit checks that a Strict permit overslept past its
// expiry is not reported as acquired.
func TestLimiterExpiredPermit(t *testing.T) {
	tests := []struct {
		name      string
		oversleep time.Duration
		wantErr   bool
	}{
		{"oversleep within expiry", 9 * time.Millisecond, false},
		{"oversleep beyond expiry", 11 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, MaxReserved: 8, Expiry: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range []string{"TryAcquire", "Wait"} {
				clk := &jitterClock{oversleep: int64(tt.oversleep), base: time.Now()}
				l, err := newLimiterClock(c, c.Spec, clk)
				if err != nil {
					t.Fatal(err)
				}
				if ok, err := l.TryAcquire(1, 0); !ok || err != nil {
					t.Fatalf("first permit: %v, %v", ok, err)
				}
				if op == "TryAcquire" {
					_, err = l.TryAcquire(1, time.Minute)
				} else {
					err = l.Wait(context.Background(), 1)
				}
				if got := errors.Is(err, ErrPermitExpired); got != tt.wantErr {
					t.Fatalf("%s: error %v, want ErrPermitExpired: %v", op, err, tt.wantErr)
				}
			}
		})
	}
}

// grantLog records when permits were obtained, on the bubble's timeline.
type grantLog struct {
	mu    sync.Mutex
	times []int64
}

func (g *grantLog) add(at int64, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range n {
		g.times = append(g.times, at)
	}
}

// TestLimiterConcurrentDeadlines runs many goroutines doing Waits with
// assorted deadlines (and some TryAcquires and Reserve/Cancel) on one
// Limiter, under -race, and checks on the virtual timeline that every
// successful wait ended by its deadline, every deadline refusal was
// immediate, and the permits obtained respect the algorithm's stated bound.
func TestLimiterConcurrentDeadlines(t *testing.T) {
	const (
		goroutines = 32
		rounds     = 6
	)
	specs := map[string]bucket.Spec{
		"strict": {Algorithm: bucket.Strict, Rate: 10, MaxReserved: 16, Expiry: time.Hour},
		"bursty": {Algorithm: bucket.Bursty, Rate: 10, MaxBurstSeconds: 1},
		"warmup": {Algorithm: bucket.WarmingUp, Rate: 10, Warmup: time.Second},
		"hybrid": {Algorithm: bucket.Hybrid, Rate: 10},
	}
	for _, name := range sortedSpecNames(specs) {
		spec := specs[name]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mustLimiter(t, spec)
				start := time.Now()
				var log grantLog
				var wg sync.WaitGroup
				errc := make(chan error, goroutines*rounds)
				for g := range goroutines {
					wg.Go(func() {
						for r := range rounds {
							timeout := time.Duration((g*7+r*13)%20) * 100 * time.Millisecond
							if g%5 == 4 {
								if ok, err := l.TryAcquire(1, timeout); err != nil {
									errc <- err
								} else if ok {
									log.add(sinceNanos(start), 1)
								}
								continue
							}
							if g%7 == 6 {
								if res, err := l.Reserve(1); err != nil {
									errc <- err
								} else {
									res.Cancel()
								}
								continue
							}
							ctx, cancel := context.WithTimeout(context.Background(), timeout)
							begin := sinceNanos(start)
							err := l.Wait(ctx, 1)
							end := sinceNanos(start)
							cancel()
							switch {
							case err == nil:
								if end-begin > int64(timeout) {
									errc <- fmt.Errorf("wait of %v ended after %v", timeout, time.Duration(end-begin))
								}
								log.add(end, 1)
							case errors.Is(err, ErrWaitExceedsDeadline),
								timeout == 0 && errors.Is(err, context.DeadlineExceeded):
								// Immediate, except that Strict, when more
								// than MaxReserved are reserved ahead, sleeps
								// (reserving nothing) until the slot it was
								// told to come back at and may lose it.
								if took := end - begin; took > int64(timeout) || took != 0 && spec.Algorithm != bucket.Strict {
									errc <- fmt.Errorf("deadline refusal took %v (timeout %v): %v", time.Duration(took), timeout, err)
								}
							default:
								errc <- err
							}
						}
					})
				}
				wg.Wait()
				close(errc)
				for err := range errc {
					t.Error(err)
				}
				if err := boundViolation(l.Config(), log.times); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d permits obtained", len(log.times))
			})
		})
	}
}

// boundViolation checks the permits obtained at times (unsorted, one
// permit per entry, each obtained exactly at its grant's time since the
// bubble has no sleep jitter) against the bound each algorithm states in its
// doc comment: the most permits any window of length W may contain. It
// returns nil, or the first window that holds too many.
func boundViolation(c bucket.Config, times []int64) error {
	times = append([]int64(nil), times...)
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	iv := c.IntervalNanos
	bound := func(w int64) int64 {
		switch c.Spec.Algorithm {
		case bucket.Bursty: // floor((W + MaxStoredNanos)/I) + n_last
			return (w+c.MaxStoredNanos)/iv + 1
		case bucket.Hybrid: // floor((A + B + W + floor(B*W/A)) / I)
			a, b := c.ActiveNanos, c.BurstNanos
			hi, lo := bits.Mul64(uint64(b), uint64(w))
			bw, _ := bits.Div64(hi, lo, uint64(a)) // floor(B*W/A), no overflow
			return (a + b + w + int64(bw)) / iv
		default: // Strict, WarmingUp: floor(W/I) + n_last
			return w/iv + 1
		}
	}
	for i := range times {
		for j := i; j < len(times); j++ {
			w := times[j] - times[i]
			if count := int64(j - i + 1); count > bound(w) {
				return fmt.Errorf("%d permits in a window of %v (from %v), bound %d",
					count, time.Duration(w), time.Duration(times[i]), bound(w))
			}
		}
	}
	return nil
}

// TestBoundViolation checks that the bound checker of the concurrency test
// catches a window with one permit too many, for every algorithm.
func TestBoundViolation(t *testing.T) {
	specs := limiterSpecs()
	for _, name := range sortedSpecNames(specs) {
		c, err := bucket.Compile(specs[name])
		if err != nil {
			t.Fatal(err)
		}
		// Permits one interval apart, as many as the bound allows in the
		// window [0, 10 intervals], then one more inside it.
		iv := c.IntervalNanos
		var times []int64
		for k := int64(0); k <= 10; k++ {
			times = append(times, k*iv)
		}
		for extra := int64(0); boundViolation(c, times) == nil; extra++ {
			if extra > 1000 {
				t.Fatalf("%s: 1000 extra permits at 0 never violate the bound", name)
			}
			times = append(times, 0)
		}
		if err := boundViolation(c, times[:len(times)-1]); err != nil {
			t.Fatalf("%s: one permit fewer still violates: %v", name, err)
		}
	}
}

// TestLimiterHotPathAllocs checks that the operations that do not sleep
// allocate nothing (allocation counts, not time, so this is not a timed
// test).
func TestLimiterHotPathAllocs(t *testing.T) {
	for _, bs := range benchSpecs(limiterRate) {
		l := mustLimiter(t, bs.spec)
		ctx, cancel := context.WithCancel(context.Background())
		ops := map[string]func(){
			"TryAcquire": func() { l.TryAcquire(1, 0) },
			"Wait":       func() { l.Wait(context.Background(), 1) },
			"WaitCtx":    func() { l.Wait(ctx, 1) },
			"Reserve":    func() { l.Reserve(1) },
			"Cancel":     func() { r, _ := l.Reserve(1); r.Cancel() },
		}
		for _, op := range []string{"TryAcquire", "Wait", "WaitCtx", "Reserve", "Cancel"} {
			if a := testing.AllocsPerRun(200, ops[op]); a != 0 {
				t.Errorf("%s %s: %v allocs/op, want 0", bs.name, op, a)
			}
		}
		cancel()
	}
}
