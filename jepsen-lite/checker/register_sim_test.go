package checker

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/history"
)

// simOp is one reserve of the simulated cluster.
type simOp struct {
	spec  opSpec
	tau   int64 // decision time (real)
	lost  bool  // answer lost: recorded as info
	noEff bool  // never reached the register
}

// simulate runs a correct strict register (interval I, max_reserved M)
// under procs concurrent clients: each op is decided at a random instant
// inside it, decisions apply in time order against a cluster timeline
// that lags real time by up to lag (growing in steps), some answers are
// lost (info, effect applied) and some requests never arrive (info, no
// effect). It returns the specs of the history.
func simulate(seed uint64, procs, perProc int, interval, maxRes, lag int64) []opSpec {
	rng := rand.New(rand.NewPCG(seed, 1))
	var ops []simOp
	for p := range procs {
		t := rng.Int64N(interval)
		for range perProc {
			t += rng.Int64N(interval / 2)
			call := t
			tau := call + rng.Int64N(20*ms)
			ret := tau + rng.Int64N(20*ms)
			maxWait := []int64{0, interval / 2, 3 * interval}[rng.IntN(3)]
			o := simOp{spec: opSpec{p: p, call: call, ret: ret, maxWait: maxWait}, tau: tau}
			switch x := rng.IntN(100); {
			case x < 3:
				o.lost = true
			case x < 5:
				o.noEff = true
			}
			ops = append(ops, o)
			t = ret
		}
	}
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(ops[a].tau - ops[b].tau) })
	var next, lagNow int64 = -1 << 62, 0
	for _, i := range order {
		o := &ops[i]
		if lagNow < lag && rng.IntN(50) == 0 {
			lagNow = min(lag, lagNow+rng.Int64N(lag+1)) // an election loses time
		}
		now := o.tau - lagNow
		at := max(next, now)
		wait := at - now
		ahead := ceilDiv(wait, interval) - 1 + 1
		switch {
		case o.noEff:
			o.spec.typ = history.Info
		case wait > o.spec.maxWait || ahead > maxRes:
			o.spec.typ, o.spec.resp = history.Fail, refused(wait)
		default:
			next = at + interval
			o.spec.typ, o.spec.resp = history.OK, granted(wait)
		}
		if o.lost {
			o.spec.typ, o.spec.resp = history.Info, history.ReserveResponse{Error: "timeout"}
		}
	}
	out := make([]opSpec, len(ops))
	for i, o := range ops {
		out[i] = o.spec
	}
	return out
}

func TestLinearizabilitySimulatedRegister(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	const interval = sec
	for seed := range uint64(6) {
		lag := int64(0)
		if seed%2 == 1 {
			lag = sec
		}
		specs := simulate(seed, 4, 40, interval, 2, lag)
		limits := map[string]RegisterSpec{"api": {IntervalNanos: interval, MaxReserved: 2, Fresh: true}}
		start := time.Now()
		r, err := Linearizability(LinearizabilityInput{Ops: build(t, specs...), Limits: limits, TimelineLagNanos: lag, Timeout: 10 * time.Second})
		expect(t, r, err, true, "")
		t.Logf("seed %d: %d ops in %v", seed, len(specs), time.Since(start))

		// Shorten one waited grant by half an interval: no order explains it.
		mutated := slices.Clone(specs)
		found := false
		for i, s := range mutated {
			if s.typ == history.OK && s.resp.WaitNanos >= interval/2+lag {
				mutated[i].resp.WaitNanos -= interval/2 + lag
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("seed %d: no grant waited %v to mutate", seed, time.Duration(interval/2+lag))
		}
		r, err = Linearizability(LinearizabilityInput{Ops: build(t, mutated...), Limits: limits, TimelineLagNanos: lag, Timeout: 10 * time.Second})
		expect(t, r, err, false, "")
	}
}
