package fsm

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// benchBatch returns 64 strict reserves of one permit on "api" with the
// given request-id prefix ("" = no ids).
func benchBatch(idPrefix string, salt int) []Reserve {
	rs := make([]Reserve, 64)
	for i := range rs {
		rs[i] = rsv("api", 1, sec, "")
		if idPrefix != "" {
			rs[i].RequestID = fmt.Sprintf("%s-%08d-%02d", idPrefix, salt, i)
		}
	}
	return rs
}

// BenchmarkApplyBatch64Strict applies entries of 64 one-permit reserves on
// one strict limit of 1e6 permits/s; each entry is stamped 64µs after the
// previous, so the reserves keep being granted.
func BenchmarkApplyBatch64Strict(b *testing.B) {
	for _, withIDs := range []bool{false, true} {
		b.Run(fmt.Sprintf("ids=%v", withIDs), func(b *testing.B) {
			f := New()
			put, err := AppendPut(nil, at(0), PutLimit{Name: "api", Config: strict(b, 1e6, 64)})
			if err != nil {
				b.Fatal(err)
			}
			f.Apply(&raft.Log{Index: 1, Term: 1, Data: put})
			// With ids, 4096 distinct entries are cycled and time advances
			// past the dedup window in one cycle, so no reserve is a duplicate.
			n := 1
			step := int64(64_000)
			if withIDs {
				n = 4096
				step = max(step, DedupWindowNanos/int64(n)+1)
			}
			entries := make([][]byte, n)
			for i := range entries {
				prefix := ""
				if withIDs {
					prefix = "req"
				}
				if entries[i], err = AppendReserveBatch(nil, at(0), benchBatch(prefix, i)); err != nil {
					b.Fatal(err)
				}
			}
			log := &raft.Log{Term: 1} // the term of the entries' stamps (at): their time is trusted
			b.ReportAllocs()
			b.ResetTimer()
			granted := 0
			for i := range b.N {
				data := entries[i%n]
				binary.BigEndian.PutUint64(data[2:], uint64(int64(i+1)*step))
				log.Index, log.Data = uint64(i+2), data
				res := f.Apply(log).([]ReserveResult)
				if res[63].Status == Granted {
					granted++
				}
			}
			b.StopTimer()
			if granted < b.N/2 {
				b.Fatalf("only %d of %d batches fully granted", granted, b.N)
			}
			b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds(), "reserves/s")
		})
	}
}

func BenchmarkAppendReserveBatch64(b *testing.B) {
	rs := benchBatch("req", 0)
	buf := make([]byte, 0, 8<<10)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendReserveBatch(buf[:0], at(1), rs); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeReserveBatch64(b *testing.B) {
	data, err := AppendReserveBatch(nil, at(1), benchBatch("req", 0))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePut(b *testing.B) {
	data, err := AppendPut(nil, at(1), PutLimit{Name: "api", Config: strict(b, 10, 5)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot encodes a state of 100 limits and 10000 request ids.
func BenchmarkSnapshot(b *testing.B) {
	h := newHarness(b)
	for i := range 100 {
		h.put(0, fmt.Sprintf("limit-%03d", i), strict(b, 1e6, 64))
	}
	for i := range 10000 / 64 {
		rs := benchBatch(fmt.Sprint("r", i), i)
		for j := range rs {
			rs[j].Limit = fmt.Sprintf("limit-%03d", (i+j)%100)
		}
		h.reserve(int64(i)*sec/100, rs...)
	}
	b.ReportAllocs()
	for b.Loop() {
		s, err := h.f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(s.(*fsmSnapshot).data)))
	}
}

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
			log := &raft.Log{Term: 1} // the term of the entries' stamps (at): their time is trusted
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
			log := &raft.Log{Term: 1} // the term of the entries' stamps (at): their time is trusted
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

// BenchmarkEdgeCheck compares what a node's edge check of a reserve reads
// on every reserve: Limit (a whole LimitInfo) against ReserveCheck (what
// the check needs).
func BenchmarkEdgeCheck(b *testing.B) {
	f := New()
	put, err := AppendPut(nil, at(0), PutLimit{Name: "api", Config: strict(b, 1e6, 64)})
	if err != nil {
		b.Fatal(err)
	}
	f.Apply(&raft.Log{Index: 1, Term: 1, Data: put})
	b.Run("Limit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if info, ok := f.Limit("api"); !ok || info.Leased || info.Config.MaxPermits() < 1 {
				b.Fatal("limit api not found, leased or granting nothing")
			}
		}
	})
	b.Run("ReserveCheck", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, leased, max := f.ReserveCheck("api"); !ok || leased || max < 1 {
				b.Fatal("limit api not found, leased or granting nothing")
			}
		}
	})
}
