package worker

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

const ms = int64(time.Millisecond)

func TestLocalExpiry(t *testing.T) {
	tests := []struct {
		name                              string
		sentAt, expiresIn, ttl, margin, w int64
	}{
		{"fresh answer", 1000 * ms, 300 * ms, 300 * ms, 50 * ms, 1250 * ms},
		{"replayed answer, shorter", 1000 * ms, 120 * ms, 300 * ms, 50 * ms, 1070 * ms},
		{"never longer than the TTL", 1000 * ms, 900 * ms, 300 * ms, 50 * ms, 1250 * ms},
		{"expired replay", 1000 * ms, -1, 300 * ms, 50 * ms, 1000 * ms},
	}
	for _, tc := range tests {
		if got := localExpiry(tc.sentAt, tc.expiresIn, tc.ttl, tc.margin); got != tc.w {
			t.Errorf("%s: localExpiry = %v, want %v", tc.name, time.Duration(got), time.Duration(tc.w))
		}
	}
}

func TestGrantSpendable(t *testing.T) {
	g := &grant{permits: 10, spent: 3, stolenOut: 2, expiryNanos: 100}
	tests := []struct {
		name   string
		g      *grant
		now, w int64
	}{
		{"open", g, 50, 5},
		{"at expiry", g, 100, 0},
		{"closed", &grant{permits: 10, expiryNanos: 100, closed: true}, 50, 0},
		{"none", nil, 50, 0},
	}
	for _, tc := range tests {
		if got := tc.g.spendable(tc.now); got != tc.w {
			t.Errorf("%s: spendable = %d, want %d", tc.name, got, tc.w)
		}
	}
}

func TestLotsEarliestDeadlineFirst(t *testing.T) {
	var ls lots
	ls.add(lot{donor: "b", permits: 5, deadlineNanos: 300})
	ls.add(lot{donor: "a", permits: 3, deadlineNanos: 100})
	ls.add(lot{donor: "c", permits: 4, deadlineNanos: 200})
	if got := ls.total(150); got != 9 {
		t.Fatalf("total at 150 = %d, want 9 (the lot due at 100 has expired)", got)
	}
	var took []string
	ls.take(150, 6, func(l lot, k int64) { took = append(took, l.donor) })
	if len(took) != 2 || took[0] != "c" || took[1] != "b" || ls.total(150) != 3 {
		t.Fatalf("take(6) took from %v, left %d; want c then b, 3 left", took, ls.total(150))
	}
	if expired := ls.prune(250); expired != 3 {
		t.Fatalf("prune(250) = %d expired, want the 3 of the lot due at 100", expired)
	}
	if got := ls.total(250); got != 3 {
		t.Fatalf("total at 250 = %d, want 3", got)
	}
}

func TestDemandMeter(t *testing.T) {
	var m demandMeter
	m.add(10)
	if got := m.take(100 * ms); got != 100_000 {
		t.Fatalf("10 permits in 100 ms = %d milli/s, want 100000", got)
	}
	m.add(30)
	// The window spans the previous period too: 40 permits in 200 ms.
	if got := m.take(200 * ms); got != 200_000 {
		t.Fatalf("two periods = %d milli/s, want 200000", got)
	}
	m.add(5)
	// A window shorter than the minimum reports the last measurement.
	if got := m.measure(201*ms, 10*ms); got != 200_000 {
		t.Fatalf("short window = %d, want the last measurement 200000", got)
	}
	if got := withHeadroom(100_000); got != 110_000 {
		t.Errorf("withHeadroom(100000) = %d, want 110000", got)
	}
	if got := withHeadroom(fsm.MaxDemandMilliPermitsPerSec); got != fsm.MaxDemandMilliPermitsPerSec {
		t.Errorf("withHeadroom(max) = %d, want the maximum", got)
	}
	if got := perSecMilli(1<<62, 1); got != fsm.MaxDemandMilliPermitsPerSec {
		t.Errorf("perSecMilli overflow = %d, want the maximum", got)
	}
	if got := permitsOver(450_000, 150*ms); got != 68 {
		t.Errorf("permitsOver(450/s, 150 ms) = %d, want 68 (rounded up)", got)
	}
}

func TestPacerReservesChunksAllOrNothing(t *testing.T) {
	p := pacer{burstRatio: DefaultBurstRatio}
	if err := p.setRate(0, 1_000_000); err != nil { // 1000/s: one permit per chunk
		t.Fatal(err)
	}
	if p.maxChunk != 1 {
		t.Fatalf("maxChunk = %d, want 1 at 1000/s", p.maxChunk)
	}
	// 5 permits: the first at once, the fifth 4 ms later.
	at, ok, err := p.reserve(0, 5, int64(time.Second))
	if err != nil || !ok || at != 4*ms {
		t.Fatalf("reserve(5) = %v, %v, %v; want 4ms, true", time.Duration(at), ok, err)
	}
	// 10 more within 5 ms cannot be served: nothing is reserved.
	if _, ok, err := p.reserve(0, 10, 5*ms); err != nil || ok {
		t.Fatalf("reserve(10, 5ms) = %v, %v; want a refusal", ok, err)
	}
	if at, ok, _ := p.reserve(0, 1, int64(time.Second)); !ok || at != 5*ms {
		t.Fatalf("after the refusal the next permit is at %v, want 5ms (nothing was kept)", time.Duration(at))
	}
	if err := p.setRate(0, 0); err == nil {
		t.Errorf("setRate(0) accepted")
	}
	// Left idle for a second, the backlog is trimmed.
	p.trimBacklog(int64(time.Second), 40*ms)
	if p.p != nil {
		t.Errorf("trimBacklog kept a pacer idle for a second")
	}
}

func TestResolveConfig(t *testing.T) {
	reg := &fakeRegister{}
	ok := Config{Name: "w1", Group: "g", Limit: "api", Register: reg}
	s, err := resolve(ok)
	if err != nil {
		t.Fatal(err)
	}
	if s.ttlNanos != int64(DefaultTTL) || s.marginNanos != int64(200*time.Millisecond) || s.renewNanos != int64(time.Second) ||
		s.stealBias != DefaultStealBias || s.Weight != 1 || s.stealGraceNanos != 2*s.ttlNanos {
		t.Errorf("defaults: %+v", s)
	}
	// A register call waits up to TTL - margin (1.8 s by default), so that
	// a renewal outlives a leader election instead of failing at TTL/2.
	if s.requestNanos != s.ttlNanos-s.marginNanos {
		t.Errorf("a register call waits %v, want TTL - margin = %v", time.Duration(s.requestNanos), time.Duration(s.ttlNanos-s.marginNanos))
	}
	short := ok
	short.TTL = 300 * time.Millisecond
	if s, _ := resolve(short); s.marginNanos != int64(MinDefaultMargin) {
		t.Errorf("margin of a 300 ms TTL = %v, want the minimum %v", time.Duration(s.marginNanos), MinDefaultMargin)
	}
	none := ok
	none.StealBias = NoStealBias
	if s, _ := resolve(none); s.stealBias != 0 {
		t.Errorf("NoStealBias resolved to %v", s.stealBias)
	}
	bad := []struct {
		name string
		mod  func(*Config)
	}{
		{"no name", func(c *Config) { c.Name = "" }},
		{"bad group", func(c *Config) { c.Group = "a b" }},
		{"no register", func(c *Config) { c.Register = nil }},
		{"TTL too short", func(c *Config) { c.TTL = 50 * time.Millisecond }},
		{"margin too large", func(c *Config) { c.Margin = 3 * time.Second }},
		{"renew after expiry", func(c *Config) { c.RenewEvery = 1900 * time.Millisecond }},
		{"steal bias", func(c *Config) { c.StealBias = 1.5 }},
		{"burst ratio", func(c *Config) { c.BurstRatio = 0.5 }},
		{"weight", func(c *Config) { c.Weight = -1 }},
		{"negative retry", func(c *Config) { c.RetryEvery = -time.Second }},
		// Beyond MaxPeriod a deadline counted on the worker's clock
		// could wrap around: a StealGrace of math.MaxInt64 made the grace
		// look over at once.
		{"retry beyond MaxPeriod", func(c *Config) { c.RetryEvery = MaxPeriod + 1 }},
		{"request timeout beyond MaxPeriod", func(c *Config) { c.RequestTimeout = MaxPeriod + 1 }},
		{"steal timeout beyond MaxPeriod", func(c *Config) { c.StealTimeout = MaxPeriod + 1 }},
		{"steal grace beyond MaxPeriod", func(c *Config) { c.StealGrace = math.MaxInt64 }},
		{"rejoin beyond MaxPeriod", func(c *Config) { c.RejoinEvery = MaxPeriod + 1 }},
		{"unreachable after beyond MaxPeriod", func(c *Config) { c.UnreachableAfter = MaxPeriod + 1 }},
	}
	for _, tc := range bad {
		c := ok
		tc.mod(&c)
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New returned %v, want ErrInvalidConfig", tc.name, err)
		}
	}
}

// TestPacerMakesUpARenewalsDrySpell: a saturated worker whose permits ran
// out while its renewal waited (a leader election) for up to a quarter of
// a renewal period (what trimBacklog keeps) spends, once the new grant
// arrives, what its share would have spent over the dry spell as well
// within half a period: the default burst ratio catches up at least that
// fast (at 1.1 it took 2.4 periods, past the next renewal, whose credit
// then handed the spell's permits back to the register unspent).
func TestPacerMakesUpARenewalsDrySpell(t *testing.T) {
	const (
		shareMilli  = 100_000 // 100 permits/s
		renewNanos  = int64(time.Second)
		drySpell    = renewNanos/4 - 10*ms
		catchUpTime = renewNanos / 2
	)
	p := pacer{burstRatio: DefaultBurstRatio}
	if err := p.setRate(0, shareMilli); err != nil {
		t.Fatal(err)
	}
	// spend claims permits one at a time as fast as the pacer allows
	// from fromNanos until toNanos, and returns how many it got.
	spend := func(fromNanos, toNanos int64) int64 {
		n, now := int64(0), fromNanos
		for {
			at, ok, err := p.reserve(now, 1, unboundedWait)
			if err != nil || !ok {
				t.Fatalf("reserve at %v: %v, %v", time.Duration(now), ok, err)
			}
			if at >= toNanos {
				return n
			}
			n, now = n+1, max(now, at)
		}
	}
	spend(0, renewNanos) // saturated for a period
	grantNanos := renewNanos + drySpell
	p.trimBacklog(grantNanos, renewNanos/4)
	if p.p == nil {
		t.Fatalf("trimBacklog dropped a dry spell of %v (at most a quarter period is kept)", time.Duration(drySpell))
	}
	got := spend(grantNanos, grantNanos+catchUpTime)
	want := permitsOver(shareMilli, drySpell+catchUpTime) - 1
	if got < want {
		t.Errorf("after a dry spell of %v, %d permits in the next %v at burst ratio %v; want at least %d (the spell made up)",
			time.Duration(drySpell), got, time.Duration(catchUpTime), DefaultBurstRatio, want)
	}
}
