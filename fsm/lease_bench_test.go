package fsm

import (
	"fmt"
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
			index := h.index
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				g := &grants[i%n]
				now += 100_000
				data, err := AppendRenew(nil, at(now), Renew{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: g.Permits}, DemandMilliPermitsPerSec: 1000 + int64(i%5)*300, TTLNanos: 10 * sec})
				if err != nil {
					b.Fatal(err)
				}
				index++
				log.Index, log.Data = index, data
				res := h.f.Apply(log).(LeaseResult)
				if res.Status != LeaseGranted {
					b.Fatalf("renew %d: %+v", i, res)
				}
				*g = res
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renewals/s")
		})
	}
}
