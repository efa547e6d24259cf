package runner

import (
	"slices"
	"strings"

	"github.com/permitd/permitd/jepsen-lite/history"
)

// Phase is a stretch of the run with one set of active faults, and the
// reserve latencies seen in it (by invoke time).
type Phase struct {
	// Name is "warmup", "quiet", "recovery", or the active faults
	// ("partition:isolate-leader + clock:skew-one").
	Name       string `json:"name"`
	StartNanos int64  `json:"start_ns"`
	EndNanos   int64  `json:"end_ns"`
	// Reserves invoked in the phase, by outcome.
	Reserves int `json:"reserves"`
	OK       int `json:"ok"`
	Fail     int `json:"fail"`
	Info     int `json:"info"`
	// Latency percentiles of the completed reserves (ok and fail), ns.
	P50Nanos int64 `json:"p50_ns"`
	P90Nanos int64 `json:"p90_ns"`
	P99Nanos int64 `json:"p99_ns"`
	MaxNanos int64 `json:"max_ns"`
	// APICalls made in the phase (api-call ok completions).
	APICalls int `json:"api_calls"`
}

// phases cuts the run at every fault start and end and at the final heal,
// and computes each stretch's latencies.
func phases(ops []history.Op, sum *Summary) []Phase {
	cuts := []int64{0, sum.HealNanos, sum.EndNanos}
	for _, r := range sum.Nemeses {
		cuts = append(cuts, r.StartNanos)
		if r.EndNanos > 0 {
			cuts = append(cuts, r.EndNanos)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	firstFault := sum.HealNanos
	for _, r := range sum.Nemeses {
		firstFault = min(firstFault, r.StartNanos)
	}
	var out []Phase
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		if b-a < 50e6 || a >= sum.EndNanos { // faults starting together: no phase between
			continue
		}
		var active []string
		for _, r := range sum.Nemeses {
			end := r.EndNanos
			if end == 0 {
				end = sum.EndNanos
			}
			if r.StartNanos <= a && end >= b {
				active = append(active, r.Event.Name())
			}
		}
		name := strings.Join(active, " + ")
		switch {
		case name != "":
		case a >= sum.HealNanos:
			name = "recovery"
		case a < firstFault:
			name = "warmup"
		default:
			name = "quiet"
		}
		out = append(out, Phase{Name: name, StartNanos: a, EndNanos: b})
	}
	pairs, err := history.Pair(ops)
	if err != nil {
		return out
	}
	lat := make([][]int64, len(out))
	find := func(t int64) int {
		for i, p := range out {
			if t >= p.StartNanos && t < p.EndNanos {
				return i
			}
		}
		return -1
	}
	for _, o := range pairs {
		i := find(o.CallNanos())
		if i < 0 {
			continue
		}
		p := &out[i]
		switch o.F() {
		case history.FReserve:
			p.Reserves++
			switch o.Outcome() {
			case history.OK:
				p.OK++
			case history.Fail:
				p.Fail++
			default:
				p.Info++
			}
			if ret, ok := o.ReturnNanos(); ok && o.Outcome() != history.Info {
				lat[i] = append(lat[i], ret-o.CallNanos())
			}
		case history.FAPICall:
			if o.Outcome() == history.OK {
				p.APICalls++
			}
		}
	}
	for i := range out {
		l := lat[i]
		if len(l) == 0 {
			continue
		}
		slices.Sort(l)
		q := func(f float64) int64 { return l[int(f*float64(len(l)-1))] }
		out[i].P50Nanos, out[i].P90Nanos, out[i].P99Nanos, out[i].MaxNanos = q(0.5), q(0.9), q(0.99), l[len(l)-1]
	}
	return out
}
