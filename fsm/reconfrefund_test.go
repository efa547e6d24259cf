package fsm

import (
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// TestNoExactRefundAcrossAReconfiguration: README "refunded exactly if
// nothing else has touched the limit since the grant (no other grant,
// settlement or reconfiguration)"; after one, strict, warmup and hybrid
// refunds are lost and bursty ones get no late refund (the marks are reset).
func TestNoExactRefundAcrossAReconfiguration(t *testing.T) {
	for _, mk := range []func(rate float64) bucket.Config{
		func(r float64) bucket.Config { return bursty(t, r) },
		func(r float64) bucket.Config {
			return compile(t, bucket.Spec{Algorithm: bucket.WarmingUp, Rate: r, Warmup: time.Second})
		},
		func(r float64) bucket.Config {
			return compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: r, BurstRatio: 100})
		},
	} {
		h := newHarness(t)
		h.put(0, "tpm", mk(100))
		res := h.reserve1(sec, tracked(10*sec, Part{"tpm", 40}))
		if res.Status != Granted {
			t.Fatalf("reserve: %+v", res)
		}
		h.put(sec+1, "tpm", mk(200)) // same algorithm, another rate
		before := pacerState(h, "tpm")
		s := h.settleCmd(sec+2, Settle{Reservation: res.ReservationID, Actual: []Part{{"tpm", 0}}})
		if s.Status != Settled || s.Parts[0].Refunded != 0 || pacerState(h, "tpm") != before {
			t.Errorf("%v: settle after a reconfiguration: %+v, want nothing refunded and the pacer unchanged", mk(1).Spec.Algorithm, s)
		}
	}
}
