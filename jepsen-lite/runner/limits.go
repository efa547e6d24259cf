package runner

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/nemesis"
	"github.com/permitd/permitd/transport/client"
)

// restartResult is the restart-ready checker: every node restarted by
// reconfig:snapshot-restart answered /readyz 200 within its bound.
func restartResult(recs []NemesisRecord) checker.Result {
	r := checker.Result{Name: "restart-ready", Valid: true, Details: map[string]any{
		"rule":  fmt.Sprintf("a node killed -9 right after a forced snapshot and restarted from its data directory answers GET /readyz 200 within %v", nemesis.RestartReadyBound),
		"bound": int64(nemesis.RestartReadyBound),
	}}
	var restarts []RestartRecord
	var worst int64 = -1
	for _, rec := range recs {
		for _, rr := range rec.Restarts {
			restarts = append(restarts, rr)
			switch {
			case rr.KilledNanos == 0:
				// the sequence never got to a restart (Error says why)
			case rr.ReadyNanos < 0:
				why := "not ready within " + nemesis.RestartReadyBound.String()
				if rr.Exited {
					why = "exited instead of becoming ready"
				}
				r.Violations = append(r.Violations, fmt.Sprintf("%s, restarted at %v after a snapshot at applied index %d: %s (last answer: %s)",
					rr.Node, time.Duration(rr.KilledNanos), rr.SnapshotIndex, why, rr.LastAnswer))
			default:
				worst = max(worst, rr.ReadyAfterNanos)
			}
		}
	}
	r.Valid = len(r.Violations) == 0
	r.Details["violations_total"] = len(r.Violations)
	r.Details["restarts"] = restarts
	r.Details["slowest_ready_ns"] = worst
	if len(restarts) == 0 {
		r.Details["note"] = "no snapshot-restart in this run"
	}
	return r
}

// limitPut is one put of the run's limit in the history, with the
// configuration it sent.
type limitPut struct {
	OpIndex int
	// CallNanos and ReturnNanos bound it; ReturnNanos -1: outcome unknown.
	CallNanos, ReturnNanos int64
	OK                     bool
	// IntervalNanos (0: not set), MaxReserved and ExpiryNanos (-1: not
	// set), BurstPermits and MaxOutstanding (0: not set).
	IntervalNanos, MaxReserved, ExpiryNanos int64
	BurstPermits, MaxOutstanding            int64
}

// limitPuts reads the puts of limit name from the history, in invoke
// order. The configurations are the runner's own records (see nemesis.LimitSpec,
// putLimit, putLeasedLimit).
func limitPuts(ops []history.Op, name string) ([]limitPut, error) {
	pairs, err := history.Pair(ops)
	if err != nil {
		return nil, fmt.Errorf("nemesis: limit puts: %w", err)
	}
	var out []limitPut
	for _, o := range history.Filter(pairs, history.FPut) {
		var req history.LimitRequest
		if err := o.Invoke.DecodeValue(&req); err != nil {
			return nil, fmt.Errorf("nemesis: limit puts: %w", err)
		}
		if req.Limit != name {
			continue
		}
		p := limitPut{OpIndex: o.Invoke.Index, CallNanos: o.CallNanos(), ReturnNanos: -1, MaxReserved: -1, ExpiryNanos: -1}
		if ret, ok := o.ReturnNanos(); ok && o.Outcome() == history.OK {
			p.ReturnNanos, p.OK = ret, true
		}
		spec, err := recordedSpec(req)
		if err != nil {
			return nil, fmt.Errorf("nemesis: put op #%d: %w", p.OpIndex, err)
		}
		if spec.Per != 0 {
			if spec.Rate <= 0 {
				return nil, fmt.Errorf("nemesis: put op #%d: rate %v; want > 0", p.OpIndex, spec.Rate)
			}
			p.IntervalNanos = int64(math.Ceil(float64(spec.Per) / spec.Rate))
		}
		if spec.MaxReserved != nil {
			p.MaxReserved = *spec.MaxReserved
		}
		if spec.Expiry != nil {
			p.ExpiryNanos = int64(*spec.Expiry)
		}
		if lp, ok := req.Config["lease_policy"].(map[string]any); ok {
			c, _ := lp["burst_permits"].(float64)
			o, _ := lp["max_outstanding_permits"].(float64)
			p.BurstPermits, p.MaxOutstanding = int64(c), int64(o)
		}
		out = append(out, p)
	}
	return out, nil
}

// recordedSpec reads a put's recorded configuration as the client's spec
// it was made from (history.PutRequest).
func recordedSpec(req history.LimitRequest) (client.LimitSpec, error) {
	var spec client.LimitSpec
	b, err := json.Marshal(req.Config)
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	return spec, err
}

// registerChanges turns the puts after the one that created the limit
// (the first ok put) into the linearizability checker's configuration
// changes; a put without max_reserved keeps base's.
func registerChanges(puts []limitPut, base limitInfo) []checker.RegisterChange {
	var out []checker.RegisterChange
	created := false
	for _, p := range puts {
		if p.OK && !created {
			created = true
			continue
		}
		if p.IntervalNanos == 0 {
			continue // a lease policy without a rate: no change to I or M
		}
		m := p.MaxReserved
		if m < 0 {
			m = base.MaxReserved
		}
		out = append(out, checker.RegisterChange{OpIndex: p.OpIndex, CallNanos: p.CallNanos, ReturnNanos: p.ReturnNanos, IntervalNanos: p.IntervalNanos, MaxReserved: m})
	}
	return out
}

// fastestLimit returns li with the fastest configuration any put of the
// history may have set: the smallest interval, the largest expiry, C and
// O (README: across a change the bounds hold with those), and how many
// distinct configurations there were. The spacing and window bounds are
// judged with it.
func fastestLimit(li limitInfo, puts []limitPut) (limitInfo, int) {
	type key struct{ i, e, c, o int64 }
	seen := map[key]bool{{li.IntervalNanos, li.ExpiryNanos, li.BurstPermits, li.MaxOutstandingPermits}: true}
	out := li
	for _, p := range puts {
		if p.IntervalNanos > 0 {
			out.IntervalNanos = min(out.IntervalNanos, p.IntervalNanos)
		}
		if p.ExpiryNanos >= 0 {
			out.ExpiryNanos = max(out.ExpiryNanos, p.ExpiryNanos)
		}
		out.BurstPermits = max(out.BurstPermits, p.BurstPermits)
		out.MaxOutstandingPermits = max(out.MaxOutstandingPermits, p.MaxOutstanding)
		k := key{p.IntervalNanos, p.ExpiryNanos, p.BurstPermits, p.MaxOutstanding}
		if k.i == 0 {
			k.i = li.IntervalNanos
		}
		if k.e < 0 {
			k.e = li.ExpiryNanos
		}
		if k.c == 0 {
			k.c = li.BurstPermits
		}
		if k.o == 0 {
			k.o = li.MaxOutstandingPermits
		}
		seen[k] = true
	}
	return out, len(seen)
}
