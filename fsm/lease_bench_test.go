package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkApplyRenew applies renewals on a limit of 12000 permits/s held
// by n leases in 8 groups, round robin, each stamped 100µs after the
// previous (so every lease renews well before its 10 s TTL). Its cost is
// dominated by the fair-share computation, O(groups + leases of the group).
func BenchmarkApplyRenew(b *testing.B) {
	for _, n := range []int{16, 256, 4096} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			h := newHarness(b)
			h.put(0, "hot", strict(b, 12000, 0))
			h.policy(0, LeasePolicy{Limit: "hot", Leased: true})
			grants := make([]LeaseResult, n)
			now := int64(time.Second)
			for i := range grants {
				grants[i] = h.lease(now, Lease{Limit: "hot", Holder: fmt.Sprint("w", i), Group: fmt.Sprint("g", i%8), Weight: 1,
					DemandMilliPermitsPerSec: int64(1000 + i%7*500), TTLNanos: 10 * sec})
			}
			log := &raft.Log{}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				now += 100_000
				h.renewSpent(log, now, "hot", &grants[i%n], 1000+int64(i%5)*300, 10*sec)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renewals/s")
		})
	}
}

// BenchmarkApplyRenewSaturatedFleet applies the renewals of a steady
// saturated fleet shaped as cmd/leased-scale -register-load's: n leases in
// 10 groups on a limit of 100 permits/s per lease with the default lease
// policy, group g asking for (g+1)/55 of 1.5 times the rate, each lease
// renewing every second at its own phase with a TTL of 2 s and reporting
// its grant spent. A renewal's cost grows with the size of its group
// (shareOf sorts nothing but reads every member's demand). Here each
// lease's own entitlement covers its draw, so a grant never walks the
// other leases' entitlements (surplusFor); the 1 000-holder runs of
// leased-scale do (3.5-5 µs a renewal on each node in their CPU
// profiles), under conditions this loop does not reproduce.
func BenchmarkApplyRenewSaturatedFleet(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 4000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			h := newHarness(b)
			h.put(0, "scale", strict(b, 100*float64(n), 0))
			h.policy(0, LeasePolicy{Limit: "scale", Leased: true})
			// Group g asks for (g+1)/55 of 1.5 times the rate, shared
			// equally by its members (leased-scale's groupDemands).
			demandOf := func(i int) int64 { return 150_000 * int64(n) * int64(i%10+1) / 55 / int64(n/10) }
			step := sec / int64(n) // n renewals a second, one lease after another
			now := sec
			grants := make([]LeaseResult, n)
			for i := range grants {
				now += step
				grants[i] = h.lease(now, Lease{Limit: "scale", Holder: fmt.Sprint("w", i), Group: fmt.Sprint("g", i%10), Weight: 1,
					DemandMilliPermitsPerSec: demandOf(i), TTLNanos: 2 * sec})
				if grants[i].Status != LeaseGranted {
					b.Fatalf("lease %d: %+v", i, grants[i])
				}
			}
			log := &raft.Log{}
			renew := func(i int) {
				now += step
				h.renewSpent(log, now, "scale", &grants[i%n], demandOf(i%n), 2*sec)
			}
			for i := range 3 * n { // three rounds: every lease has renewed at its share
				renew(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				renew(i)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renewals/s")
		})
	}
}

// renewSpent applies at nowNanos a renewal of grant g on limit that
// reports g spent, asks for demand milli-permits/s and ttlNanos, and
// puts the new grant in g; it fails the benchmark unless it is granted.
// The entry reuses log (not its data: the FSM may keep what it
// decodes) and applies straight to the FSM: no harness checks, and no
// t.Helper, whose cost would be measured too.
func (h *harness) renewSpent(log *raft.Log, nowNanos int64, limit string, g *LeaseResult, demand, ttlNanos int64) {
	data, err := AppendRenew(nil, at(nowNanos), Renew{Report: Report{Limit: limit, LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: g.Permits}, DemandMilliPermitsPerSec: demand, TTLNanos: ttlNanos})
	if err != nil {
		h.t.Fatal(err)
	}
	h.index++
	log.Index, log.Data = h.index, data
	res := h.f.Apply(log).(LeaseResult)
	if res.Status != LeaseGranted {
		h.t.Fatalf("renew of lease %d at %d: %+v", g.LeaseID, nowNanos, res)
	}
	*g = res
}

// BenchmarkShareOneOfThousand: one member's share in a group of a
// thousand with distinct demands, as a renewal needs it: waterFill over
// the group (sorting the claims) against unitShare (sorting the demands).
func BenchmarkShareOneOfThousand(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	demands := make([]int64, 1000)
	for i := range demands {
		demands[i] = 150_000 + rng.Int64N(100_000)
	}
	b.Run("waterFill", func(b *testing.B) {
		for i := range b.N {
			cs := make([]claim, len(demands))
			for j := range cs {
				cs[j] = claim{weight: 1, demand: demands[j]}
			}
			_ = waterFill(200_000, cs)
			_ = cs[i%1000].share
		}
	})
	b.Run("unitShare", func(b *testing.B) {
		var scratch []int64
		for i := range b.N {
			_, scratch = unitShare(200_000, demands, i%1000, scratch)
		}
	})
}
