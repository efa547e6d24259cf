package fsm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/permitd/permitd/bucket"
)

// TestLeaseLifecycle walks one lease through lease, renew and return and
// checks every account after every step (the harness checks conservation
// after every entry too).
func TestLeaseLifecycle(t *testing.T) {
	h := newHarness(t)
	h.check = checkLeaseBook
	h.put(0, "hot", hot(t))
	pol := h.policy(0, LeasePolicy{Limit: "hot", Leased: true, BurstPermits: 100, MaxOutstandingPermits: 50})
	if pol != (LeasePolicyResult{Applied: true, BurstPermits: 100, MaxOutstandingPermits: 50}) {
		t.Fatalf("policy = %+v", pol)
	}
	if info, _ := h.f.Limit("hot"); !info.Leased {
		t.Fatalf("Limit(hot).Leased = false after the policy")
	}
	steps := []struct {
		desc string
		do   func() LeaseResult
		want LeaseResult
		acc  [4]int64 // minted, free, outstanding, settled
	}{
		{"lease at 30ms: share 500/s over a horizon of min(TTL, O*I) = 50ms is 25 permits",
			func() LeaseResult { return h.lease(30*ms, lq("w1", "g1", 1, 500, "")) },
			LeaseResult{Status: LeaseGranted, LeaseID: 1, Epoch: 1, Permits: 25, ExpiresInNanos: sec, ShareMilliPermitsPerSec: perSec(500)},
			[4]int64{30, 5, 25, 0}},
		{"renew at 60ms: 20 spent, 5 credited back, demand above the rate: share = rate, 50 fair but 40 free",
			func() LeaseResult {
				return h.renew(60*ms, Renew{Report: Report{Limit: "hot", LeaseID: 1, Epoch: 1, SpentPermits: 20}, DemandMilliPermitsPerSec: perSec(2000), TTLNanos: sec})
			},
			LeaseResult{Status: LeaseGranted, LeaseID: 1, Epoch: 2, Permits: 40, ExpiresInNanos: sec, ShareMilliPermitsPerSec: perSec(1000), CreditedPermits: 5},
			[4]int64{60, 0, 40, 20}},
		{"return at 100ms: all 40 spent",
			func() LeaseResult {
				return h.ret(100*ms, Return{Report: Report{Limit: "hot", LeaseID: 1, Epoch: 2, SpentPermits: 40}})
			},
			LeaseResult{Status: LeaseReturned, LeaseID: 1, Epoch: 2},
			[4]int64{100, 40, 0, 60}},
		{"a second lease gets what the pool holds up to O",
			func() LeaseResult { return h.lease(100*ms, lq("w2", "g1", 1, 5000, "")) },
			LeaseResult{Status: LeaseGranted, LeaseID: 2, Epoch: 1, Permits: 40, ExpiresInNanos: sec, ShareMilliPermitsPerSec: perSec(1000)},
			[4]int64{100, 0, 40, 60}},
		{"return with 10 unspent: credited",
			func() LeaseResult {
				return h.ret(110*ms, Return{Report: Report{Limit: "hot", LeaseID: 2, Epoch: 1, SpentPermits: 30}})
			},
			LeaseResult{Status: LeaseReturned, LeaseID: 2, Epoch: 1, CreditedPermits: 10},
			[4]int64{110, 20, 0, 90}},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Fatalf("%s:\n got %+v\nwant %+v", st.desc, got, st.want)
		}
		if got := accounts(h.f, "hot"); got != st.acc {
			t.Fatalf("%s: accounts (minted, free, outstanding, settled) = %v, want %v", st.desc, got, st.acc)
		}
	}
	// Minting stops at C: 2 s later the pool holds C = 100, and only the
	// permits up to C were minted.
	h.noop(2 * sec)
	if got, want := accounts(h.f, "hot"), [4]int64{190, 100, 0, 90}; got != want {
		t.Fatalf("after idling: accounts %v, want %v", got, want)
	}
	pool, ok := h.f.LeasePool("hot")
	if !ok || pool.SpentPermits != 90 || pool.LeasesOpened != 2 || pool.Renewals != 1 || pool.Returns != 2 || pool.ActiveLeases != 0 {
		t.Fatalf("LeasePool = %+v, %v", pool, ok)
	}
	if ls := h.f.Leases("hot"); len(ls) != 0 {
		t.Fatalf("Leases after both returned = %+v, want none", ls)
	}
}

// TestLinearizedOrLeased checks that a limit is either linearized or
// leased: reserves on a leased limit and leases on a linearized one are
// Invalid, and leasing can be turned off only when no lease holds permits.
func TestLinearizedOrLeased(t *testing.T) {
	h := leased(t, 10, 10)
	h.put(0, "lin", hot(t))
	if got := h.reserve1(sec, rsv("hot", 1, 0, "")); got.Status != Invalid || !strings.Contains(got.Detail, `limit "hot" is leased`) {
		t.Fatalf("reserve on a leased limit = %+v, want Invalid", got)
	}
	if got := h.lease(sec, Lease{Limit: "lin", Holder: "w", Group: "g", Weight: 1, TTLNanos: sec}); got.Status != LeaseInvalid ||
		!strings.Contains(got.Detail, `limit "lin" is not leased`) {
		t.Fatalf("lease on a linearized limit = %+v, want Invalid", got)
	}
	if got := h.lease(sec, Lease{Limit: "none", Holder: "w", Group: "g", Weight: 1, TTLNanos: sec}); got.Status != LeaseUnknownLimit {
		t.Fatalf("lease on a missing limit = %+v", got)
	}
	if got := h.policy(sec, LeasePolicy{Limit: "none", Leased: true}); !got.UnknownLimit || got.Applied {
		t.Fatalf("policy on a missing limit = %+v", got)
	}
	g := h.lease(sec, lq("w", "g", 1, 100, ""))
	if got := h.policy(sec, LeasePolicy{Limit: "hot"}); got.Applied || !strings.Contains(got.Detail, "1 lease still holds permits (it ends in ") {
		t.Fatalf("turning leasing off with a live lease = %+v, want refused", got)
	}
	h.ret(sec, Return{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: g.Permits}})
	if got := h.policy(sec, LeasePolicy{Limit: "hot"}); !got.Applied {
		t.Fatalf("turning leasing off = %+v", got)
	}
	if _, ok := h.f.LeasePool("hot"); ok || h.f.Leases("hot") != nil {
		t.Fatalf("pool still visible after leasing was turned off")
	}
	if got := h.reserve1(2*sec, rsv("hot", 1, 0, "")); got.Status != Granted {
		t.Fatalf("reserve once linearized again = %+v", got)
	}
	// Rates that cannot be leased.
	h.put(0, "slow", strict(t, 1.0/120, 0))
	h.put(0, "inf", compile(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: math.Inf(1)}))
	for _, name := range []string{"slow", "inf"} {
		if got := h.policy(2*sec, LeasePolicy{Limit: name, Leased: true}); got.Applied || got.Detail == "" {
			t.Fatalf("leasing %q = %+v, want refused", name, got)
		}
	}
	// A put that would make a leased limit unleasable is refused.
	h.policy(2*sec, LeasePolicy{Limit: "hot", Leased: true})
	before, _ := h.f.Limit("hot")
	if got := h.put(2*sec, "hot", strict(t, 1.0/120, 0)); got.Detail == "" || got.Version != before.Version {
		t.Fatalf("put of an unleasable rate on a leased limit = %+v, want refused", got)
	}
}

// TestLeasePolicyDefaultsAndPacerHandover checks the default capacities
// (one second of permits) and that a new pool mints only after the permits
// the pacer already reserved ahead.
func TestLeasePolicyDefaultsAndPacerHandover(t *testing.T) {
	h := newHarness(t)
	h.check = checkLeaseBook
	h.put(0, "api", strict(t, 10, 20)) // I = 100ms, up to 20 slots ahead
	for range 10 {
		if got := h.reserve1(0, rsv("api", 1, 10*sec, "")); got.Status != Granted {
			t.Fatalf("reserve = %+v", got)
		}
	}
	// Slots 0, 100ms, ..., 900ms are taken: the pacer's next one is 1s.
	got := h.policy(0, LeasePolicy{Limit: "api", Leased: true})
	if got != (LeasePolicyResult{Applied: true, BurstPermits: 10, MaxOutstandingPermits: 10}) {
		t.Fatalf("policy with defaults = %+v, want C = O = 10 (one second at 10/s)", got)
	}
	h.noop(sec)
	if m, _, _, _ := h.f.LeaseAccounts("api"); m != 0 {
		t.Fatalf("minted %d by 1s, want 0: the pacer's reservations run until then", m)
	}
	h.noop(sec + 250*ms)
	if m, _, _, _ := h.f.LeaseAccounts("api"); m != 2 {
		t.Fatalf("minted %d by 1.25s, want 2", m)
	}
	// A rate change mints up to now at the old rate, then at the new one,
	// and the defaults follow the rate.
	h.put(sec+250*ms, "api", strict(t, 100, 20))
	h.noop(sec + 300*ms)
	if m, _, _, _ := h.f.LeaseAccounts("api"); m != 2+5 {
		t.Fatalf("minted %d by 1.3s after going to 100/s at 1.25s, want 7", m)
	}
	if p, _ := h.f.LeasePool("api"); p.BurstPermits != 100 || p.MaxOutstandingPermits != 100 || p.IntervalNanos != 10*ms {
		t.Fatalf("pool after the rate change = %+v", p)
	}
}

// TestLeaseFencing checks that a renew or return with a stale epoch, of an
// expired or returned lease, or of a lease that never existed, is Fenced
// and changes nothing.
func TestLeaseFencing(t *testing.T) {
	h := leased(t, 1000, 1000)
	h.noop(sec)
	g1 := h.lease(sec, lq("w1", "g", 1, 100, ""))
	g2 := h.renew(sec+10*ms, rq(g1, 1, 100, ""))
	if g2.Status != LeaseGranted || g2.Epoch != 2 {
		t.Fatalf("renew = %+v", g2)
	}
	fenced := func(desc string, res LeaseResult, want string) {
		t.Helper()
		if res.Status != LeaseFenced || !strings.Contains(res.Detail, want) {
			t.Fatalf("%s = %+v, want Fenced containing %q", desc, res, want)
		}
	}
	before := h.f.StateHash()
	fenced("renew with the superseded epoch", h.renew(sec+20*ms, rq(g1, 0, 100, "")), "is at epoch 2, not 1")
	fenced("return with the superseded epoch", h.ret(sec+20*ms, Return{Report: Report{Limit: "hot", LeaseID: 1, Epoch: 1}}), "is at epoch 2, not 1")
	fenced("renew with a future epoch", h.renew(sec+20*ms, Renew{Report: Report{Limit: "hot", LeaseID: 1, Epoch: 3}, TTLNanos: sec}), "not 3")
	fenced("renew of a lease that never existed", h.renew(sec+20*ms, Renew{Report: Report{Limit: "hot", LeaseID: 99, Epoch: 1}, TTLNanos: sec}), "lease 99 is not live")
	if p, _ := h.f.LeasePool("hot"); p.Fenced != 4 {
		t.Fatalf("fenced counter %d, want 4", p.Fenced)
	}
	// Only the counter changed.
	h2 := leased(t, 1000, 1000)
	h2.noop(sec)
	h2.lease(sec, lq("w1", "g", 1, 100, ""))
	h2.renew(sec+10*ms, rq(g1, 1, 100, ""))
	if before != h2.f.StateHash() {
		t.Fatalf("replicas differ before the fenced commands")
	}

	over := h.renew(sec+30*ms, rq(g2, g2.Permits+1, 100, ""))
	if over.Status != LeaseInvalid || !strings.Contains(over.Detail, "spent + stolen out <= the grant") {
		t.Fatalf("renew reporting more than the grant = %+v, want Invalid", over)
	}
	// Expiry: the grant of epoch 2 ends at 1.01s + 1s.
	exp := g2
	h.noop(sec + 10*ms + sec)
	fenced("renew after expiry", h.renew(2*sec+20*ms, rq(exp, 0, 100, "")), "is not live")
	fenced("return after expiry", h.ret(2*sec+20*ms, Return{Report: Report{Limit: "hot", LeaseID: exp.LeaseID, Epoch: exp.Epoch}}), "is not live")
	// Returned leases are fenced too.
	g3 := h.lease(3*sec, lq("w1", "g", 1, 100, ""))
	h.ret(3*sec, Return{Report: Report{Limit: "hot", LeaseID: g3.LeaseID, Epoch: g3.Epoch}})
	fenced("return after return", h.ret(3*sec, Return{Report: Report{Limit: "hot", LeaseID: g3.LeaseID, Epoch: g3.Epoch}}), "is not live")
	fenced("renew after return", h.renew(3*sec, rq(g3, 0, 1, "")), "is not live")
}

// TestLeaseExpiryOnClusterTime checks that grants expire only when the
// clamped cluster time reaches them, that an expired grant is settled (never
// credited back), and that a leader whose clock is behind (entries stamped
// earlier, clamped) keeps every lease live until its TTL has run out on the
// continued timeline.
func TestLeaseExpiryOnClusterTime(t *testing.T) {
	h := leased(t, 1000, 1000)
	h.noop(10 * sec)
	g := h.lease(10*sec, lq("w1", "g", 1, 200, ""))
	if g.Permits != 200 || g.ExpiresInNanos != sec {
		t.Fatalf("lease = %+v", g)
	}
	// A new leader continues the timeline from 10s but its entries are
	// stamped behind (its monotonic clock started later): clamped to 10s.
	for _, stamp := range []int64{0, 5 * sec, 9 * sec} {
		h.noop(stamp)
		if h.f.LastNowNanos() != 10*sec || len(h.f.Leases("hot")) != 1 {
			t.Fatalf("entry stamped %d: now %d, leases %d; want 10s and the lease live", stamp, h.f.LastNowNanos(), len(h.f.Leases("hot")))
		}
	}
	h.noop(11*sec - 1)
	if ls := h.f.Leases("hot"); len(ls) != 1 || !ls[0].Active {
		t.Fatalf("lease 1ns before its expiry: %+v", ls)
	}
	// A renew stamped behind the timeline is decided at the clamped time,
	// where the lease is still live, and its new grant runs from there.
	g2 := h.renew(3*sec, rq(g, 50, 200, ""))
	if g2.Status != LeaseGranted || g2.ExpiresInNanos != sec || g2.CreditedPermits != 150 {
		t.Fatalf("renew stamped behind = %+v", g2)
	}
	ls := h.f.Leases("hot")
	if len(ls) != 1 || ls[0].GrantedAtNanos != 11*sec-1 || ls[0].ExpiresAtNanos != 12*sec-1 {
		t.Fatalf("leases after the renew: %+v", ls)
	}
	_, _, _, settledBefore := h.f.LeaseAccounts("hot")
	h.noop(12*sec - 1) // exactly the expiry: closed
	if ls := h.f.Leases("hot"); len(ls) != 0 {
		t.Fatalf("lease still present at its expiry: %+v", ls)
	}
	p, _ := h.f.LeasePool("hot")
	if p.ExpiredPermits != g2.Permits || p.SettledPermits != settledBefore+g2.Permits || p.OutstandingPermits != 0 || p.Expirations != 1 {
		t.Fatalf("after expiry: %+v; want the %d permits of the grant settled as expired", p, g2.Permits)
	}
	// The holder's late renew is fenced, and the expired permits never
	// came back to free: only minting refills it.
	_, free, _, _ := h.f.LeaseAccounts("hot")
	if got := h.renew(12*sec-1, rq(g2, 0, 200, "")); got.Status != LeaseFenced {
		t.Fatalf("late renew = %+v", got)
	}
	if _, free2, _, _ := h.f.LeaseAccounts("hot"); free2 != free {
		t.Fatalf("free went from %d to %d on a fenced renew", free, free2)
	}
}

// TestLeaseDedup checks request IDs on lease commands: a retry gets the
// first answer (its expiry re-expressed), changes nothing, and an ID used
// by another kind of command is Invalid.
func TestLeaseDedup(t *testing.T) {
	h := leased(t, 1000, 1000)
	h.noop(sec)
	first := h.lease(sec, lq("w1", "g", 1, 100, "L1"))
	hash := h.f.StateHash()
	again := h.lease(sec+300*ms, lq("w1", "g", 1, 100, "L1"))
	want := first
	want.Duplicate = true
	want.ExpiresInNanos = first.ExpiresInNanos - 300*ms
	if again != want {
		t.Fatalf("duplicate lease = %+v, want %+v", again, want)
	}
	if n := len(h.f.Leases("hot")); n != 1 {
		t.Fatalf("%d leases after a duplicate, want 1", n)
	}
	// Only the time moved.
	h2 := leased(t, 1000, 1000)
	h2.noop(sec)
	h2.lease(sec, lq("w1", "g", 1, 100, "L1"))
	h2.noop(sec + 300*ms)
	if h2.f.StateHash() == hash || h2.f.StateHash() != h.f.StateHash() {
		t.Fatalf("a duplicate lease changed more than the time")
	}

	r1 := h.renew(sec+400*ms, rq(first, 10, 100, "R1"))
	r2 := h.renew(sec+500*ms, rq(first, 10, 100, "R1"))
	if !r2.Duplicate || r2.Epoch != r1.Epoch || r2.Permits != r1.Permits || r2.CreditedPermits != r1.CreditedPermits ||
		r2.ExpiresInNanos != r1.ExpiresInNanos-100*ms {
		t.Fatalf("duplicate renew = %+v, first %+v", r2, r1)
	}
	// Without the ID the same renew is fenced (its epoch is stale).
	if got := h.renew(sec+500*ms, rq(first, 10, 100, "")); got.Status != LeaseFenced {
		t.Fatalf("renew retried without an id = %+v", got)
	}
	// Replayed after the expiry: the grant reports -1.
	if got := h.renew(sec+400*ms+2*sec, rq(first, 10, 100, "R1")); !got.Duplicate || got.ExpiresInNanos != -1 {
		t.Fatalf("duplicate renew after expiry = %+v, want ExpiresInNanos -1", got)
	}
	// IDs are shared between reserves and lease commands.
	h.put(0, "lin", hot(t))
	h.reserve1(4*sec, rsv("lin", 1, 0, "X"))
	if got := h.lease(4*sec, lq("w9", "g", 1, 1, "X")); got.Status != LeaseInvalid || !got.Duplicate || !strings.Contains(got.Detail, "used by a reserve") {
		t.Fatalf("lease reusing a reserve's id = %+v", got)
	}
	if got := h.reserve1(4*sec, rsv("lin", 1, 0, "L1")); got.Status != Invalid || !got.Duplicate || !strings.Contains(got.Detail, "used by a lease") {
		t.Fatalf("reserve reusing a lease's id = %+v", got)
	}
	if got := h.ret(4*sec, Return{Report: Report{Limit: "hot", LeaseID: 1, Epoch: 1}, RequestID: "R1"}); got.Status != LeaseInvalid || !strings.Contains(got.Detail, "used by a renew, not a return") {
		t.Fatalf("return reusing a renew's id = %+v", got)
	}
	// Outcomes other than grants are recorded too.
	f1 := h.ret(4*sec, Return{Report: Report{Limit: "hot", LeaseID: 77, Epoch: 1}, RequestID: "F"})
	f2 := h.ret(4*sec, Return{Report: Report{Limit: "hot", LeaseID: 77, Epoch: 1}, RequestID: "F"})
	if f1.Status != LeaseFenced || !f2.Duplicate || f2.Detail != f1.Detail {
		t.Fatalf("fenced return and its duplicate: %+v, %+v", f1, f2)
	}
}

// TestLeaseHolderAndCapacityLimits checks that a holder holds one lease
// per limit and a limit at most MaxLeasesPerLimit.
func TestLeaseHolderAndCapacityLimits(t *testing.T) {
	h := leased(t, 1000, 1000)
	h.noop(sec)
	g := h.lease(sec, lq("w1", "g", 1, 100, ""))
	got := h.lease(sec+ms, lq("w1", "g", 1, 100, ""))
	if got.Status != LeaseRefused || got.LeaseID != g.LeaseID || got.Epoch != 1 || got.RetryAfterNanos != sec-ms ||
		!strings.Contains(got.Detail, `holder "w1" already holds lease 1`) {
		t.Fatalf("second lease of a holder = %+v", got)
	}
	for i := 2; i <= MaxLeasesPerLimit; i++ {
		if res := h.lease(sec+ms, lq(fmt.Sprint("w", i), "g", 1, 0, "")); res.Status != LeaseGranted {
			t.Fatalf("lease %d = %+v", i, res)
		}
		if i == 2 {
			h.check = nil // the book's full check is O(n) per entry; done below
		}
	}
	checkLeaseBook(t, h.f)
	full := h.lease(sec+ms, lq("one-too-many", "g", 1, 0, ""))
	if full.Status != LeaseRefused || full.RetryAfterNanos != sec-ms || !strings.Contains(full.Detail, "at most 4096") {
		t.Fatalf("lease beyond MaxLeasesPerLimit = %+v", full)
	}
	h.noop(2*sec + ms)
	checkLeaseBook(t, h.f)
	if n := len(h.f.Leases("hot")); n != 0 {
		t.Fatalf("%d leases after all expired", n)
	}
}

// TestLeaseShares checks the division of the rate among groups and holders
// as leases are granted and renewed.
func TestLeaseShares(t *testing.T) {
	h := leased(t, 100_000, 100_000) // capacities out of the way: shares decide
	h.noop(10 * sec)
	share := func(res LeaseResult) int64 { return res.ShareMilliPermitsPerSec / 1000 }
	now := 10 * sec
	a := h.lease(now, lq("a1", "alpha", 1, 5000, ""))
	if share(a) != 1000 {
		t.Fatalf("alone: share %d, want the whole rate", share(a))
	}
	b := h.lease(now, lq("b1", "beta", 3, 5000, ""))
	if share(b) != 750 {
		t.Fatalf("beta (weight 3) against alpha (1): share %d, want 750", share(b))
	}
	a = h.renew(now+ms, rq(a, 0, 5000, ""))
	if share(a) != 250 {
		t.Fatalf("alpha renewing against beta: share %d, want 250", share(a))
	}
	// A group that wants less than its fair share gets what it wants.
	a = h.renew(now+2*ms, rq(a, 0, 100, ""))
	b = h.renew(now+3*ms, rq(b, 0, 5000, ""))
	if share(a) != 100 || share(b) != 900 {
		t.Fatalf("alpha wanting 100: shares %d and %d, want 100 and 900", share(a), share(b))
	}
	// Within a group, max-min among holders.
	b2 := h.lease(now+4*ms, lq("b2", "beta", 3, 200, ""))
	b = h.renew(now+5*ms, rq(b, 0, 5000, ""))
	if share(b2) != 200 || share(b) != 700 {
		t.Fatalf("beta's holders: b2 %d (wants 200), b1 %d; want 200 and 700", share(b2), share(b))
	}
	// The grant is the share over the TTL: b1 gets 700 permits for 1s.
	if b.Permits != 700 {
		t.Fatalf("b1's grant %d, want 700", b.Permits)
	}
	// Beta stops renewing: once its leases expire, alpha gets the rate.
	now = b.ExpiresInNanos + now + 5*ms
	a = h.renew(now-sec/2, rq(a, 0, 5000, ""))
	if share(a) != 250 {
		t.Fatalf("alpha while beta's leases live: %d, want 250", share(a))
	}
	a = h.renew(now+10*ms, rq(a, 0, 5000, ""))
	if share(a) != 1000 || len(h.f.Leases("hot")) != 1 {
		t.Fatalf("alpha after beta's leases expired: share %d, leases %d; want 1000 and 1", share(a), len(h.f.Leases("hot")))
	}
	// Group weight is the newest lease's.
	c1 := h.lease(now+20*ms, lq("c1", "gamma", 1, 5000, ""))
	c2 := h.lease(now+20*ms, lq("c2", "gamma", 4, 5000, ""))
	a = h.renew(now+30*ms, rq(a, 0, 5000, ""))
	c1 = h.renew(now+30*ms, rq(c1, 0, 5000, ""))
	if share(a) != 200 || share(c1)+share(c2) < 799 {
		t.Fatalf("gamma with weight 4 (its newest lease): alpha %d, gamma %d+%d", share(a), share(c1), share(c2))
	}
}

// TestLeaseCarry checks that a share worth less than a permit per grant
// earns whole permits over several grants.
func TestLeaseCarry(t *testing.T) {
	h := leased(t, 1000, 1000)
	h.noop(sec)
	// 0.3 permits per second over 1s TTLs: 0, 0, 0, 1, 0, 0, 1, ...
	g := h.lease(sec, Lease{Limit: "hot", Holder: "w", Group: "g", Weight: 1, DemandMilliPermitsPerSec: 300, TTLNanos: sec})
	total := g.Permits
	for i := range 19 {
		g = h.renew(sec+int64(i+1)*ms, Renew{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: g.Permits}, DemandMilliPermitsPerSec: 300, TTLNanos: sec})
		total += g.Permits
	}
	if total != 6 {
		t.Fatalf("20 grants at 0.3 permits each gave %d permits, want 6", total)
	}
}

// TestLeaseStolenPermitsLinger checks that permits a donor gave away stay
// outstanding until the expiry of the grant they came from.
func TestLeaseStolenPermitsLinger(t *testing.T) {
	h := leased(t, 1000, 1000)
	h.noop(sec)
	d := h.lease(sec, lq("donor", "g1", 1, 100, ""))  // 100 permits until 2s
	tk := h.lease(sec, lq("taker", "g2", 1, 100, "")) // the taker
	d2 := h.renew(sec+500*ms, Renew{Report: Report{Limit: "hot", LeaseID: d.LeaseID, Epoch: d.Epoch, SpentPermits: 30, StolenOutPermits: 40}, DemandMilliPermitsPerSec: perSec(100), TTLNanos: sec})
	if d2.CreditedPermits != 30 {
		t.Fatalf("renew with 30 spent, 40 stolen out of 100: credited %d, want 30", d2.CreditedPermits)
	}
	h.renew(sec+600*ms, Renew{Report: Report{Limit: "hot", LeaseID: tk.LeaseID, Epoch: tk.Epoch, SpentPermits: tk.Permits, StolenInPermits: 40}, DemandMilliPermitsPerSec: perSec(100), TTLNanos: sec})
	info := h.f.Leases("hot")[0]
	if info.LingeringPermits != 40 {
		t.Fatalf("donor lease %+v, want 40 lingering", info)
	}
	// The donor returns its lease: it lingers (inactive) until 2s.
	h.ret(sec+700*ms, Return{Report: Report{Limit: "hot", LeaseID: d2.LeaseID, Epoch: d2.Epoch, SpentPermits: d2.Permits}})
	info = h.f.Leases("hot")[0]
	if info.Active || info.LingeringPermits != 40 {
		t.Fatalf("returned donor lease %+v, want inactive with 40 lingering", info)
	}
	if got := h.lease(sec+700*ms, lq("donor", "g1", 1, 100, "")); got.Status != LeaseGranted {
		t.Fatalf("the donor may open a new lease while its old one lingers: %+v", got)
	}
	p, _ := h.f.LeasePool("hot")
	if p.StolenPermits != 0 || p.LingeringLeases != 1 || p.StolenInPermits != 40 {
		t.Fatalf("pool before the donor's old grant expires: %+v", p)
	}
	h.noop(2 * sec)
	p, _ = h.f.LeasePool("hot")
	if p.StolenPermits != 40 || p.LingeringLeases != 0 {
		t.Fatalf("pool after the donor's old grant expired: %+v", p)
	}
}

// TestLeaseLingerMerge checks the bounded linger list: a lease that gives
// permits away in many consecutive grants keeps at most maxLingerGrants
// entries, merging the earliest into the next (later) one.
func TestLeaseLingerMerge(t *testing.T) {
	h := leased(t, 10_000, 10_000)
	h.noop(5 * sec)
	g := h.lease(5*sec, lq("d", "g", 1, 1000, ""))
	for i := range 6 {
		g = h.renew(5*sec+int64(i+1)*10*ms, Renew{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: g.Epoch, StolenOutPermits: 1}, DemandMilliPermitsPerSec: perSec(1000), TTLNanos: sec})
	}
	h.f.mu.RLock()
	linger := append([]lingerGrant(nil), h.f.st.limits["hot"].pool.leases[0].linger...)
	h.f.mu.RUnlock()
	want := []lingerGrant{{6*sec + 20*ms, 3}, {6*sec + 30*ms, 1}, {6*sec + 40*ms, 1}, {6*sec + 50*ms, 1}}
	if !reflect.DeepEqual(linger, want) {
		t.Fatalf("linger %+v, want %+v", linger, want)
	}
}

// TestLeaseDelete checks that deleting a leased limit drops its leases from
// the expiry index.
func TestLeaseDelete(t *testing.T) {
	h := leased(t, 1000, 1000)
	h.put(0, "other", hot(t))
	h.policy(0, LeasePolicy{Limit: "other", Leased: true})
	h.noop(sec)
	h.lease(sec, lq("w", "g", 1, 10, ""))
	h.lease(sec, Lease{Limit: "other", Holder: "w", Group: "g", Weight: 1, DemandMilliPermitsPerSec: 1, TTLNanos: sec})
	// Leases hold permits: the delete is refused unless forced.
	before := h.f.StateHash()
	if res := h.del(sec, "hot"); !res.Existed || !strings.Contains(res.Detail, "1 lease still holds permits") {
		t.Fatalf("unforced delete of a leased limit with leases = %+v", res)
	}
	if h.f.StateHash() == before {
		t.Fatalf("weak test: the refused delete applied nothing, not even its time")
	}
	if _, ok := h.f.Limit("hot"); !ok || len(h.f.Leases("hot")) == 0 {
		t.Fatalf("an unforced delete removed the limit or its leases")
	}
	if res := h.forceDel(sec, "hot"); !res.Existed || res.Detail != "" {
		t.Fatalf("forced delete = %+v", res)
	}
	h.noop(3 * sec)
	if len(h.f.Leases("other")) != 0 {
		t.Fatalf("the other limit's lease did not expire")
	}
	h.put(3*sec, "hot", hot(t))
	if got := h.lease(3*sec, lq("w", "g", 1, 10, "")); got.Status != LeaseInvalid {
		t.Fatalf("lease on the re-created (linearized) limit = %+v", got)
	}
}

// leaseSim drives random lease traffic against a harness: holders in three
// groups lease, renew (reporting spent and stolen permits), return, or go
// silent, with times that mostly advance and sometimes go back.
type leaseSim struct {
	h      *harness
	rng    *rand.Rand
	now    int64
	grants map[string]LeaseResult // by holder: its latest grant
	ids    int
}

func newLeaseSim(h *harness, seed uint64) *leaseSim {
	return &leaseSim{h: h, rng: rand.New(rand.NewPCG(seed, seed+1)), grants: map[string]LeaseResult{}}
}

// entry returns the next random entry's bytes and, for a grant, calls
// onGrant later through step.
func (s *leaseSim) entry() []byte {
	rng := s.rng
	if rng.IntN(8) == 0 {
		s.now -= rng.Int64N(200 * ms)
	} else {
		s.now += rng.Int64N(80 * ms)
	}
	holder := fmt.Sprint("w", rng.IntN(8))
	group := []string{"a", "b", "c"}[rng.IntN(3)]
	id := ""
	if rng.IntN(3) == 0 {
		s.ids++
		id = fmt.Sprint("q", s.ids-rng.IntN(2)) // sometimes a retry
	}
	ttl := []int64{MinLeaseTTLNanos, 300 * ms, sec}[rng.IntN(3)]
	demand := perSec(rng.Int64N(1500))
	g, have := s.grants[holder]
	var b []byte
	var err error
	switch k := rng.IntN(10); {
	case k == 0:
		b = AppendNoop(nil, at(s.now))
	case !have || k == 1:
		b, err = AppendLease(nil, at(s.now), Lease{Limit: "hot", Holder: holder, Group: group, Weight: 1 + rng.Int64N(3),
			DemandMilliPermitsPerSec: demand, TTLNanos: ttl, RequestID: id})
	case k < 8:
		spent := rng.Int64N(g.Permits + 1)
		out := rng.Int64N(g.Permits - spent + 1)
		if rng.IntN(3) > 0 {
			out = 0
		}
		epoch := g.Epoch
		if rng.IntN(10) == 0 {
			epoch++ // stale or future
		}
		var kept int64
		if left := g.Permits - spent - out; left > 0 && rng.IntN(2) == 0 {
			kept = rng.Int64N(left + 1)
		}
		b, err = AppendRenew(nil, at(s.now), Renew{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: epoch, SpentPermits: spent, StolenOutPermits: out, StolenInPermits: rng.Int64N(3)}, KeptPermits: kept, DemandMilliPermitsPerSec: demand, TTLNanos: ttl, RequestID: id})
	default:
		spent := rng.Int64N(g.Permits + 1)
		b, err = AppendReturn(nil, at(s.now), Return{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: spent}, RequestID: id})
	}
	if err != nil {
		s.h.t.Fatalf("leaseSim: %v", err)
	}
	return b
}

// observe records what an applied entry answered.
func (s *leaseSim) observe(b []byte, res any) {
	e, err := Decode(b)
	if err != nil {
		s.h.t.Fatal(err)
	}
	r, ok := res.(LeaseResult)
	if !ok {
		return
	}
	holder := e.Lease.Holder
	if e.Type != CmdLease {
		for hname, g := range s.grants {
			if g.LeaseID == e.Renew.LeaseID || g.LeaseID == e.Return.LeaseID {
				holder = hname
			}
		}
	}
	switch {
	case r.Status == LeaseGranted && r.ExpiresInNanos > 0:
		s.grants[holder] = r
	case r.Status == LeaseReturned || r.Status == LeaseFenced:
		delete(s.grants, holder)
	case r.Status == LeaseRefused && r.LeaseID != 0:
		s.grants[holder] = LeaseResult{LeaseID: r.LeaseID, Epoch: r.Epoch} // report 0 spent of ...
	}
}

// TestLeaseRandomConservation runs random lease traffic and checks the
// lease book (conservation, O and C + O, indexes) after every entry.
func TestLeaseRandomConservation(t *testing.T) {
	for seed := range uint64(4) {
		h := leased(t, 300, 200)
		s := newLeaseSim(h, seed)
		statuses := map[LeaseStatus]int{}
		for range 1500 {
			b := s.entry()
			res := h.apply(b)
			s.observe(b, res)
			if r, ok := res.(LeaseResult); ok {
				statuses[r.Status]++
			}
		}
		for _, st := range []LeaseStatus{LeaseGranted, LeaseRefused, LeaseFenced, LeaseReturned, LeaseInvalid} {
			if statuses[st] == 0 {
				t.Errorf("seed %d: weak test, no %s outcome in %v", seed, st, statuses)
			}
		}
		p, _ := h.f.LeasePool("hot")
		if p.SpentPermits == 0 || p.ExpiredPermits == 0 || p.StolenPermits == 0 || p.Expirations == 0 {
			t.Errorf("seed %d: weak test, pool %+v", seed, p)
		}
	}
}

// TestLeaseBound plays greedy holders, each spending its whole grant the
// moment it gets it (the worst case), some renewing often, some hoarding
// (renewing without spending), some vanishing, some keeping part of their
// grant across a renewal (the in-flight allowance) and spending it at the
// instant they send it, before the new grant arrives, and checks the
// stated bound C + O + floor(W/I) + 1 on every window of several lengths.
func TestLeaseBound(t *testing.T) {
	const c, o = 40, 60
	h := leased(t, c, o)
	rng := rand.New(rand.NewPCG(9, 9))
	type spend struct{ at, n int64 }
	var spends []spend
	type holder struct {
		g      LeaseResult
		hoards bool
		// spent is what the holder spent of its grant g; expiresAt g's
		// expiry; kept what the renewal under way kept (and spent).
		spent, expiresAt, kept int64
	}
	holders := map[string]*holder{}
	now := int64(0)
	for range 4000 {
		now += rng.Int64N(3 * ms)
		name := fmt.Sprint("w", rng.IntN(12))
		hd := holders[name]
		var res LeaseResult
		switch {
		case hd == nil || hd.g.Status != LeaseGranted:
			res = h.lease(now, Lease{Limit: "hot", Holder: name, Group: []string{"a", "b"}[rng.IntN(2)], Weight: 1,
				DemandMilliPermitsPerSec: perSec(rng.Int64N(2000)), TTLNanos: []int64{MinLeaseTTLNanos, 500 * ms}[rng.IntN(2)]})
			hd = &holder{hoards: rng.IntN(4) == 0}
			holders[name] = hd
		case rng.IntN(20) == 0:
			delete(holders, name) // vanishes: its grant expires
			continue
		default:
			var kept int64
			if left := hd.g.Permits - hd.spent; left > 0 && now < hd.expiresAt && rng.IntN(2) == 0 {
				// Keeps some and spends them at once, while in flight.
				kept = 1 + rng.Int64N(left)
				spends = append(spends, spend{now, kept})
			}
			hd.kept = kept
			res = h.renew(now, Renew{Report: Report{Limit: "hot", LeaseID: hd.g.LeaseID, Epoch: hd.g.Epoch, SpentPermits: hd.spent}, KeptPermits: kept,
				DemandMilliPermitsPerSec: perSec(rng.Int64N(2000)), TTLNanos: []int64{MinLeaseTTLNanos, 500 * ms}[rng.IntN(2)]})
		}
		hd.g, hd.spent, hd.expiresAt = res, 0, now+res.ExpiresInNanos
		if res.Status == LeaseGranted {
			hd.spent = min(hd.kept, res.Permits) // the kept permits are part of the new grant
			if n := res.Permits - hd.spent; n > 0 && !hd.hoards {
				spends = append(spends, spend{now, n}) // spent at once
				hd.spent += n
			}
		}
		if res.Status == LeaseFenced {
			delete(holders, name)
		}
	}
	interval := int64(ms)
	var total int64
	for _, w := range []int64{0, ms, 10 * ms, 100 * ms, sec, 5 * sec} {
		bound := c + o + w/interval + 1
		worst := int64(0)
		j, inWindow := 0, int64(0)
		for i := range spends {
			inWindow += spends[i].n
			for spends[i].at-spends[j].at > w {
				inWindow -= spends[j].n
				j++
			}
			worst = max(worst, inWindow)
		}
		if worst > bound {
			t.Errorf("window %dns: %d permits spent, above the bound %d", w, worst, bound)
		}
		t.Logf("window %v: worst %d, bound %d", w, worst, bound)
		total = worst
	}
	// The traffic used the rate: over 5s the holders got most of it.
	if total < 5*1000/2 {
		t.Errorf("weak test: at most %d permits in a 5s window", total)
	}
}

// TestLeaseBoundIsTight reaches the bound: a hoarder holds O permits
// (renewing without spending) while the free pool refills to C, then spends
// everything at once and reports it, and is granted the free C.
func TestLeaseBoundIsTight(t *testing.T) {
	const c, o = 40, 60
	h := leased(t, c, o)
	h.noop(sec) // free = C
	g := h.lease(sec, Lease{Limit: "hot", Holder: "hoarder", Group: "g", Weight: 1, DemandMilliPermitsPerSec: perSec(1000), TTLNanos: 500 * ms})
	g = h.renew(sec+100*ms, Renew{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: g.Epoch}, DemandMilliPermitsPerSec: perSec(1000), TTLNanos: 500 * ms})
	if g.Permits != o {
		t.Fatalf("hoarder holds %d, want O = %d", g.Permits, o)
	}
	h.noop(sec + 200*ms) // free back to C
	if _, free, out, _ := h.f.LeaseAccounts("hot"); free != c || out != o {
		t.Fatalf("free %d, outstanding %d; want C and O", free, out)
	}
	// At 1.2s the hoarder spends its O permits, reports them, and is
	// granted (and spends) the C free ones: C + O in a window of length 0.
	spent := g.Permits
	g = h.renew(sec+200*ms, Renew{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: g.Permits}, DemandMilliPermitsPerSec: perSec(1000), TTLNanos: 500 * ms})
	spent += g.Permits
	if spent != c+o {
		t.Fatalf("spent %d at one instant, want C + O = %d (the bound for W = 0 is C + O + 1)", spent, c+o)
	}
}

// TestLeasedReportsExistenceAndMode: FSM.Leased, the lease commands' edge
// check, agrees with the limit's view.
func TestLeasedReportsExistenceAndMode(t *testing.T) {
	h := newHarness(t)
	if exists, leased := h.f.Leased("hot"); exists || leased {
		t.Fatalf("Leased(unknown) = %v, %v", exists, leased)
	}
	h.put(0, "hot", strict(t, 1000, 0))
	if exists, leased := h.f.Leased("hot"); !exists || leased {
		t.Fatalf("Leased(linearized) = %v, %v", exists, leased)
	}
	h.policy(0, LeasePolicy{Limit: "hot", Leased: true})
	info, _ := h.f.Limit("hot")
	if exists, leased := h.f.Leased("hot"); !exists || !leased || !info.Leased {
		t.Fatalf("Leased(leased) = %v, %v (view: %v)", exists, leased, info.Leased)
	}
}

// TestLeaseDeleteRefusalReadable: the refused delete of a leased limit (and
// the refused unlease) says how long until its last lease ends as a
// duration (never a raw cluster time in nanoseconds), and the delete names
// how to force it (--force, ?force=true), at every instant of the leases'
// life.
func TestLeaseDeleteRefusalReadable(t *testing.T) {
	h := leased(t, 1000, 1000)
	h.noop(sec)
	h.lease(sec, lq("w", "g", 1, 10, ""))
	for now := int64(sec); ; now += 100 * ms {
		if got := h.policy(now, LeasePolicy{Limit: "hot"}); got.Detail != "" && (hasRawNanos(got.Detail) || !strings.Contains(got.Detail, "ends in ")) {
			t.Fatalf("unlease refusal at %d: %q; want a duration (\"ends in 1.5s\"), no raw nanoseconds", now, got.Detail)
		}
		res := h.del(now, "hot")
		if res.Detail == "" {
			if now == sec {
				t.Fatalf("weak test: the delete at the lease's start was not refused: %+v", res)
			}
			return
		}
		if hasRawNanos(res.Detail) || !strings.Contains(res.Detail, "ends in ") ||
			!strings.Contains(res.Detail, "--force") || !strings.Contains(res.Detail, "?force=true") {
			t.Fatalf("refusal at %d: %q; want a duration (\"ends in 1.5s\"), no raw nanoseconds, and --force / ?force=true named", now, res.Detail)
		}
		// Three significant digits at most, and the fix for running
		// workers, which renew their leases: stop them.
		_, rest, _ := strings.Cut(res.Detail, "ends in ")
		dur, _, _ := strings.Cut(rest, " ")
		if digits := strings.Count(strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return 'd'
			}
			return -1
		}, strings.TrimLeft(dur, "0.")), "d"); digits > 3 || !strings.Contains(res.Detail, "SIGTERM") {
			t.Fatalf("refusal at %d: %q; want the time to the lease's end in at most 3 significant digits, and SIGTERM named", now, res.Detail)
		}
	}
}

// hasRawNanos reports whether s holds a run of 10 or more digits: a
// cluster time in nanoseconds (1s is 10 digits), not a duration.
func hasRawNanos(s string) bool {
	run := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			run = 0
			continue
		}
		if run++; run >= 10 {
			return true
		}
	}
	return false
}
