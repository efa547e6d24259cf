package fsm

import (
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

const ms = int64(time.Millisecond)

// perSec converts permits per second to the milli-permits per second of
// demands and shares.
func perSec(n int64) int64 { return n * 1000 }

// hot compiles a strict limit of 1000 permits per second (I = 1 ms).
func hot(t testing.TB) bucket.Config { return strict(t, 1000, 0) }

// leased returns a harness with limit "hot" (1000/s) leased with C = burst
// and O = maxOut at time 0, checking the lease book after every entry.
func leased(t testing.TB, burst, maxOut int64) *harness {
	t.Helper()
	h := newHarness(t)
	h.check = checkLeaseBook
	h.put(0, "hot", hot(t))
	if res := h.policy(0, LeasePolicy{Limit: "hot", Leased: true, BurstPermits: burst, MaxOutstandingPermits: maxOut}); !res.Applied {
		t.Fatalf("policy: %+v", res)
	}
	return h
}

func (h *harness) policy(nowNanos int64, p LeasePolicy) LeasePolicyResult {
	h.t.Helper()
	b, err := AppendLeasePolicy(nil, at(nowNanos), p)
	if err != nil {
		h.t.Fatalf("AppendLeasePolicy: %v", err)
	}
	res, ok := h.apply(b).(LeasePolicyResult)
	if !ok {
		h.t.Fatalf("policy: result is not a LeasePolicyResult")
	}
	return res
}

func (h *harness) lease(nowNanos int64, q Lease) LeaseResult {
	h.t.Helper()
	b, err := AppendLease(nil, at(nowNanos), q)
	if err != nil {
		h.t.Fatalf("AppendLease: %v", err)
	}
	return h.leaseResult(b)
}

func (h *harness) renew(nowNanos int64, q Renew) LeaseResult {
	h.t.Helper()
	b, err := AppendRenew(nil, at(nowNanos), q)
	if err != nil {
		h.t.Fatalf("AppendRenew: %v", err)
	}
	return h.leaseResult(b)
}

func (h *harness) ret(nowNanos int64, q Return) LeaseResult {
	h.t.Helper()
	b, err := AppendReturn(nil, at(nowNanos), q)
	if err != nil {
		h.t.Fatalf("AppendReturn: %v", err)
	}
	return h.leaseResult(b)
}

func (h *harness) leaseResult(b []byte) LeaseResult {
	h.t.Helper()
	res, ok := h.apply(b).(LeaseResult)
	if !ok {
		h.t.Fatalf("entry type %d: result is not a LeaseResult", b[0])
	}
	return res
}

// lq builds a lease request on "hot" with a TTL of one second.
func lq(holder, group string, weight, demandPerSec int64, id string) Lease {
	return Lease{Limit: "hot", Holder: holder, Group: group, Weight: weight,
		DemandMilliPermitsPerSec: perSec(demandPerSec), TTLNanos: sec, RequestID: id}
}

// rq builds a renew on "hot" for the grant res, with a TTL of one second.
func rq(res LeaseResult, spent, demandPerSec int64, id string) Renew {
	return Renew{Report: Report{Limit: "hot", LeaseID: res.LeaseID, Epoch: res.Epoch, SpentPermits: spent}, DemandMilliPermitsPerSec: perSec(demandPerSec), TTLNanos: sec, RequestID: id}
}

// accounts returns the four accounts of a limit.
func accounts(f *FSM, name string) [4]int64 {
	m, fr, o, s := f.LeaseAccounts(name)
	return [4]int64{m, fr, o, s}
}

// checkLeaseBook checks, on the FSM's internal state, every invariant of
// the lease book: conservation (minted = free + outstanding + settled, all
// >= 0), outstanding = what the leases hold, the bound's invariants
// (outstanding <= O, and free + outstanding <= C + O, which hold while a
// pool's C, O and I are unchanged, as in the tests that use this check),
// the derived indexes (holders, groups, expiry heap) and the read API's
// agreement.
func checkLeaseBook(t testing.TB, f *FSM) {
	t.Helper()
	checkBook(t, f, true)
}

// checkBook is checkLeaseBook, with the capacity invariants only if
// capacities is set (a restored snapshot may have been taken right after a
// change of C, O or I, which they do not survive).
func checkBook(t testing.TB, f *FSM, capacities bool) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := &f.st
	total := 0
	for _, name := range s.names.all() {
		lim := s.limits[name]
		p := lim.pool
		if p == nil {
			continue
		}
		for _, v := range []int64{p.minted, p.free, p.outstanding, p.spent, p.stolen, p.expired, p.stolenIn} {
			if v < 0 {
				t.Fatalf("limit %q: negative account in %+v", name, *p)
			}
		}
		if p.minted != p.free+p.outstanding+p.spent+p.stolen+p.expired {
			t.Fatalf("limit %q: conservation broken: minted %d != free %d + outstanding %d + spent %d + stolen %d + expired %d",
				name, p.minted, p.free, p.outstanding, p.spent, p.stolen, p.expired)
		}
		interval := lim.conf.cfg.IntervalNanos
		c, o := p.burst(interval), p.maxOutstanding(interval)
		if capacities && (p.outstanding > o || p.free+p.outstanding > c+o) {
			t.Fatalf("limit %q: free %d + outstanding %d exceeds C %d + O %d (or outstanding > O)", name, p.free, p.outstanding, c, o)
		}
		var held int64
		active := 0
		demand := map[string]int64{}
		for i, ls := range p.leases {
			if i > 0 && ls.id <= p.leases[i-1].id {
				t.Fatalf("limit %q: lease ids out of order", name)
			}
			if ls.pool != p || ls.heapIndex < 0 || ls.heapIndex >= len(s.expiries) || s.expiries[ls.heapIndex] != ls {
				t.Fatalf("limit %q: lease %d is not indexed", name, ls.id)
			}
			held += ls.permits + ls.lingeringPermits()
			for k, g := range ls.linger {
				if g.permits < 1 || g.untilNanos <= s.lastNowNanos || (k > 0 && g.untilNanos <= ls.linger[k-1].untilNanos) {
					t.Fatalf("limit %q: lease %d linger %+v", name, ls.id, ls.linger)
				}
			}
			if ls.active {
				active++
				demand[ls.group] += ls.demand
				if p.byHolder[ls.holder] != ls || ls.expiresAtNanos <= s.lastNowNanos || ls.permits < 0 {
					t.Fatalf("limit %q: active lease %d: holder index or expiry wrong", name, ls.id)
				}
				if ls.entitled < 0 || ls.entitled > ls.expiresAtNanos-ls.grantedAtNanos || ls.entitledRem < 0 ||
					ls.entitledRem >= milliPermitsPerSecNanos || (ls.share == 0 && ls.entitled+ls.entitledRem != 0) {
					t.Fatalf("limit %q: active lease %d: entitled %d, remainder %d (share %d)", name, ls.id, ls.entitled, ls.entitledRem, ls.share)
				}
			} else if ls.permits != 0 || ls.entitled != 0 || ls.entitledRem != 0 || len(ls.linger) == 0 {
				t.Fatalf("limit %q: inactive lease %d holds %d permits, %d lingering entries", name, ls.id, ls.permits, len(ls.linger))
			}
		}
		if held != p.outstanding {
			t.Fatalf("limit %q: outstanding %d, leases hold %d", name, p.outstanding, held)
		}
		if len(p.byHolder) != active || len(p.groups) != len(demand) {
			t.Fatalf("limit %q: %d holders indexed for %d active leases, %d groups for %d", name, len(p.byHolder), active, len(p.groups), len(demand))
		}
		for i, g := range p.groups {
			if g.demand != demand[g.name] || (i > 0 && g.name <= p.groups[i-1].name) {
				t.Fatalf("limit %q: group %q demand %d, want %d (or groups unsorted)", name, g.name, g.demand, demand[g.name])
			}
		}
		total += len(p.leases)
		// The read API agrees (minting brought up to lastNow, which only
		// moves permits from "not minted" to free).
		v := p.info(name, s.lastNowNanos, interval)
		if v.MintedPermits != v.FreePermits+v.OutstandingPermits+v.SettledPermits || v.OutstandingPermits != p.outstanding ||
			v.SettledPermits != p.spent+p.stolen+p.expired || v.MintedPermits < p.minted {
			t.Fatalf("limit %q: view %+v disagrees with the pool", name, v)
		}
	}
	if len(s.expiries) != total {
		t.Fatalf("expiry heap holds %d leases, pools %d", len(s.expiries), total)
	}
	for i := 1; i < len(s.expiries); i++ {
		if s.expiries.Less(i, (i-1)/2) {
			t.Fatalf("expiry heap order broken at %d", i)
		}
	}
}
