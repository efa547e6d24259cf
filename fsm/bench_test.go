package fsm

import (
	"encoding/binary"
	"fmt"
	"testing"

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
			f.Apply(&raft.Log{Index: 1, Data: put})
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
			log := &raft.Log{}
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
