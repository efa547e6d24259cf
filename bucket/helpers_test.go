package bucket

import (
	"testing"
	"time"
)

const sec = int64(time.Second)

func mustCompile(t testing.TB, s Spec) Config {
	t.Helper()
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", s, err)
	}
	return c
}

// mustNew returns a pacer for s whose timeline starts at 0.
func mustNew(t testing.TB, s Spec) Pacer {
	t.Helper()
	return mustNewAt(t, s, 0)
}

// mustNewAt returns a pacer for s whose timeline starts at originNanos.
func mustNewAt(t testing.TB, s Spec, originNanos int64) Pacer {
	t.Helper()
	p, err := New(mustCompile(t, s), originNanos)
	if err != nil {
		t.Fatalf("New(%+v, %d): %v", s, originNanos, err)
	}
	return p
}

func mustReserve(t testing.TB, p Pacer, now, n, maxWait int64) Decision {
	t.Helper()
	d, err := p.Reserve(now, n, maxWait)
	if err != nil {
		t.Fatalf("Reserve(%d, %d, %d): %v", now, n, maxWait, err)
	}
	return d
}

// sleeper drives a pacer the way Guava's tests drive a RateLimiter with a
// fake stopwatch: acquire blocks until the grant's time, sleep advances the
// clock.
type sleeper struct {
	t   testing.TB
	p   Pacer
	now int64
}

// acquire reserves n permits with no wait limit, sleeps until they are due
// and returns the wait.
func (s *sleeper) acquire(n int64) int64 {
	s.t.Helper()
	d := mustReserve(s.t, s.p, s.now, n, 1<<62)
	if !d.Granted {
		s.t.Fatalf("acquire(%d) at %d refused: %+v", n, s.now, d)
	}
	w := d.AtNanos - s.now
	s.now = d.AtNanos
	return w
}

func (s *sleeper) sleep(d int64) { s.now += d }
