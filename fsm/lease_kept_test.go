package fsm

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestLeaseKeptPermits: a renewal that keeps k unspent permits of its
// grant (the in-flight allowance) gets exactly what the same renewal
// reporting them unspent would get, or k if that is less: the kept
// permits are credited and taken back first. The two registers agree on
// everything else (free + outstanding, settled), whatever the state the
// renewal meets: random fleets of leases, renewals and returns on pools
// of several capacities, then one renewal played both ways.
func TestLeaseKeptPermits(t *testing.T) {
	played := 0
	for trial := range 300 {
		seed := uint64(trial)
		rng := rand.New(rand.NewPCG(seed, 7))
		burst, maxOut := 1+rng.Int64N(400), 1+rng.Int64N(400)
		a, b := leased(t, burst, maxOut), leased(t, burst, maxOut)
		grants := map[string]LeaseResult{}
		now := int64(0)
		steps := 5 + rng.IntN(40)
		for range steps {
			now += rng.Int64N(200 * ms)
			holder := fmt.Sprint("w", rng.IntN(5))
			g, ok := grants[holder]
			var ra, rb LeaseResult
			if !ok || g.Status != LeaseGranted || g.ExpiresInNanos <= 0 {
				q := Lease{Limit: "hot", Holder: holder, Group: fmt.Sprint("g", rng.IntN(2)), Weight: 1 + rng.Int64N(2),
					DemandMilliPermitsPerSec: perSec(rng.Int64N(1500)), TTLNanos: sec}
				ra, rb = a.lease(now, q), b.lease(now, q)
			} else {
				q := rq(g, rng.Int64N(g.Permits+1), rng.Int64N(1500), "")
				ra, rb = a.renew(now, q), b.renew(now, q)
			}
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("seed %d: the two registers diverged before the kept renewal: %+v, %+v", seed, ra, rb)
			}
			if ra.Status == LeaseGranted {
				ra.ExpiresInNanos += now // absolute, to tell expiry below
				grants[holder] = ra
			} else {
				delete(grants, holder)
			}
		}
		// One live grant with unspent permits, renewed both ways.
		var holder string
		for h, g := range grants {
			if g.Status == LeaseGranted && g.ExpiresInNanos > now+ms && g.Permits > 0 && (holder == "" || h < holder) {
				holder = h
			}
		}
		if holder == "" {
			continue
		}
		g := grants[holder]
		now += ms
		spent := rng.Int64N(g.Permits)
		kept := 1 + rng.Int64N(g.Permits-spent)
		plain := rq(g, spent, rng.Int64N(1500), "")
		withKept := plain
		withKept.KeptPermits = kept
		ra, rb := a.renew(now, plain), b.renew(now, withKept)
		played++
		if ra.Status != LeaseGranted || rb.Status != LeaseGranted {
			t.Fatalf("seed %d: renewals not granted: %+v, %+v", seed, ra, rb)
		}
		if want := max(kept, ra.Permits); rb.Permits != want {
			t.Errorf("seed %d: kept %d of %d (spent %d): grant %d, want max(kept, %d without keeping) = %d",
				seed, kept, g.Permits, spent, rb.Permits, ra.Permits, want)
		}
		if rb.CreditedPermits != ra.CreditedPermits-kept {
			t.Errorf("seed %d: credited %d with %d kept, %d without", seed, rb.CreditedPermits, kept, ra.CreditedPermits)
		}
		ma, fa, oa, sa := a.f.LeaseAccounts("hot")
		mb, fb, ob, sb := b.f.LeaseAccounts("hot")
		if ma != mb || sa != sb || fa+oa != fb+ob {
			t.Errorf("seed %d: accounts (minted, free, outstanding, settled) %d %d %d %d without keeping, %d %d %d %d with",
				seed, ma, fa, oa, sa, mb, fb, ob, sb)
		}
	}
	if played < 200 {
		t.Fatalf("weak test: only %d of 300 trials reached a renewal with permits to keep", played)
	}
}

// TestLeaseKeptPermitsRejected: a renewal that keeps more than its grant
// holds unspent, or a negative number, is refused and changes nothing.
func TestLeaseKeptPermitsRejected(t *testing.T) {
	h := leased(t, 100, 100)
	h.noop(sec)
	g := h.lease(sec, lq("w", "g", 1, 100, ""))
	if g.Status != LeaseGranted || g.Permits < 10 {
		t.Fatalf("lease: %+v", g)
	}
	before := accounts(h.f, "hot")
	q := rq(g, 5, 100, "")
	q.StolenOutPermits = 3
	q.KeptPermits = g.Permits - 7
	res := h.renew(sec, q)
	if res.Status != LeaseInvalid || !strings.Contains(res.Detail, "spent + stolen out + kept <= the grant") {
		t.Fatalf("renewal keeping %d of %d with 5 spent and 3 stolen out: %+v, want Invalid naming the rule", q.KeptPermits, g.Permits, res)
	}
	if after := accounts(h.f, "hot"); after != before {
		t.Fatalf("a refused renewal changed the accounts: %v -> %v", before, after)
	}
	if l := h.f.Leases("hot"); len(l) != 1 || l[0].Epoch != g.Epoch {
		t.Fatalf("a refused renewal changed the lease: %+v", l)
	}
	q.KeptPermits = -1
	if _, err := AppendRenew(nil, at(sec), q); err == nil || !strings.Contains(err.Error(), "kept -1 permits (allowed: >= 0)") {
		t.Fatalf("AppendRenew with kept -1: %v", err)
	}
}
