package bucket

import (
	"testing"
	"time"
)

// BenchmarkPacerDecision measures one pacer decision, the register's
// innermost step (every reserve a replica applies is one): each algorithm at
// 1 000 permits per second, arrivals every 0.7 intervals, so that grants
// and refusals alternate as under a load a little over the rate.
//
//	go test -run '^$' -bench PacerDecision -count 6 ./bucket
func BenchmarkPacerDecision(b *testing.B) {
	specs := []Spec{
		{Algorithm: Strict, Rate: 1000, MaxReserved: 4},
		{Algorithm: Bursty, Rate: 1000},
		{Algorithm: WarmingUp, Rate: 1000, Warmup: time.Second},
		{Algorithm: Hybrid, Rate: 1000},
		{Algorithm: Concurrency, MaxInFlight: 64, HoldTTL: 50 * time.Millisecond},
	}
	for _, spec := range specs {
		b.Run(spec.Algorithm.String(), func(b *testing.B) {
			c, err := Compile(spec)
			if err != nil {
				b.Fatal(err)
			}
			p, err := New(c, 0)
			if err != nil {
				b.Fatal(err)
			}
			stepNanos := int64(700 * time.Microsecond)
			granted := 0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				d, err := p.Reserve(int64(i)*stepNanos, 1, 0)
				if err != nil {
					b.Fatal(err)
				}
				if d.Granted {
					granted++
				}
			}
			if granted == 0 {
				b.Fatal("no decision granted")
			}
		})
	}
}
