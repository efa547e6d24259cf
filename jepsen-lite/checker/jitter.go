package checker

import (
	"fmt"
	"slices"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
)

// Jitter is the measured client→API delivery jitter: the spread of the
// delays between a worker sending a call (its own clock, Call.SentNanos)
// and the API receiving it (Call.TimeNanos).
type Jitter struct {
	// Samples is the number of calls that carried a send time.
	Samples int `json:"samples"`
	// JitterNanos is the tolerance to use: max delay − min delay (per
	// worker, then the largest, unless the clocks are shared).
	JitterNanos int64 `json:"jitter_ns"`
	// P50Nanos and P99Nanos are percentiles of delay − min delay (of the
	// call's worker, unless shared), to show how much of JitterNanos is
	// outliers.
	P50Nanos int64 `json:"p50_ns"`
	P99Nanos int64 `json:"p99_ns"`
	// SharedClock echoes the argument.
	SharedClock bool `json:"shared_clock"`
}

// DeliveryJitter measures the delivery jitter of calls.
//
// A delay is TimeNanos − SentNanos. When workers and the API share one time
// base (sharedClock: same process, same Start), the delays are absolute and
// the jitter is max − min over all calls. Otherwise each worker's clock has
// its own unknown offset, which cancels in max − min of that worker's
// delays; the jitter is then the largest per-worker spread. Clock rates are
// assumed equal (one machine). Calls without SentNanos are skipped; with no
// sample at all DeliveryJitter returns an error.
func DeliveryJitter(calls []fakeapi.Call, sharedClock bool) (Jitter, error) {
	groups := make(map[string][]int64)
	n := 0
	for _, c := range calls {
		if c.SentNanos == nil {
			continue
		}
		key := c.Worker
		if sharedClock {
			key = ""
		}
		groups[key] = append(groups[key], c.TimeNanos-*c.SentNanos)
		n++
	}
	if n == 0 {
		return Jitter{}, fmt.Errorf("%w: no call carries sent_ns; allowed: calls whose workers send their clock", ErrInvalid)
	}
	j := Jitter{Samples: n, SharedClock: sharedClock}
	var spreads []int64
	for _, delays := range groups {
		lo, hi := slices.Min(delays), slices.Max(delays)
		j.JitterNanos = max(j.JitterNanos, hi-lo)
		for _, d := range delays {
			spreads = append(spreads, d-lo)
		}
	}
	slices.Sort(spreads)
	j.P50Nanos = spreads[(len(spreads)-1)/2]
	j.P99Nanos = spreads[(len(spreads)-1)*99/100]
	return j, nil
}
