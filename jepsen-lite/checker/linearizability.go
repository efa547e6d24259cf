package checker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/permitd/permitd/jepsen-lite/history"
)

// LinearizabilityInput is what Linearizability judges.
type LinearizabilityInput struct {
	// Ops is the history.
	Ops []history.Op
	// Limits are the strict limits to check, by name. Reserves of other
	// limits are skipped (counted in Details["skipped_ops"]).
	Limits map[string]RegisterSpec
	// ToleranceNanos (>= 0) widens every operation's interval by this
	// much on both sides: the error of the history's timestamps and the
	// clock-rate difference between client and leader.
	ToleranceNanos int64
	// TimelineLagNanos (>= 0) is how far the cluster timeline fell behind
	// real time over the run (elections lose time; the timeline never runs
	// ahead). Measure it as (run time elapsed) − (cluster_now_ns elapsed)
	// between the first and last /v1/status, plus margin. The lag at the
	// end bounds every earlier lag only because the timeline never
	// advances faster than real time between two stamps, so its lag never
	// shrinks: a register whose timeline catches up lost time fails here
	// (jepsen-lite seed 2367 found one).
	TimelineLagNanos int64
	// Timeout bounds the search per limit (0 = none). A timeout makes the
	// result invalid with an "unknown" violation: not proven either way.
	Timeout time.Duration
	// VisualizeDir, if set, receives one porcupine HTML visualization per
	// limit, linearizability-<limit>.html (and per later configuration
	// epoch, linearizability-<limit>-epochK.html), with pending operations
	// and nemeses as annotations.
	VisualizeDir string
}

// Linearizability checks, with porcupine, that the reserves of each strict
// limit are explained by one atomic register, the strict pacer of
// bucket/strict.go, taking effect at one instant inside each operation.
//
// # The model
//
// The register holds N, the next free slot. A reserve of n permits with
// max_wait decided at real time τ sees now = τ − L (L: the cluster
// timeline's lag, 0 <= L <= TimelineLagNanos, growing over time), takes
// the slot at = max(N, now), and
//
//   - grants, with wait W = at − now, if W <= max_wait and
//     ceil(W/I) − 1 + n <= M, moving N to at + n·I;
//   - refuses otherwise, with retry_after R = N − now >= 1.
//
// The client sees only relative durations, and they count from the moment
// the node sent the answer, not from the decision: the node subtracts the
// time it held the answer (README, "Grants are relative"). The model turns
// them into absolute run times through that moment τ, which it only knows
// to lie in [invoke − tol, complete + tol], and through L. So its state is
// a set of boxes (N within [Lo, Hi]); every step intersects a box with
// what the answer implies and fails when nothing is left:
//
//   - ok, W > 0: it waited, so N = at = τ − L + W, and N' = at + n·I;
//   - ok, W = 0: at <= τ − L and at >= N, and N' = at + n·I;
//   - fail with retry_after R (a refusal): N = τ − L + R, unchanged.
//
// Decisions are ordered but the moments their answers leave are not, so
// the model does not order the τ of successive operations.
//
// An operation whose outcome is unknown (info, or never completed) may
// have taken effect at any time after its invoke, or never. It is not
// given to porcupine as an operation (that makes the search exponential);
// instead, before each step, the model may assume that one more of the
// pending operations invoked before it took effect: N becomes at least
// max(N, τi − L) + n·I with no upper end. That is every placement of
// their effects: two effects in a row are never needed, since the second
// could only raise N's lower end.
//
// Whatever the state, a grant must have W <= max_wait and
// ceil(W/I) − 1 + n <= M, and a refusal must have R' > max_wait or
// ceil(R'/I) − 1 + n > M with R' = R + d, d the op's duration plus twice
// the tolerance (it was refused only because the register was full or the
// wait too long, as decided before the node took off the time it held the
// answer, at most d); these are reported one by one, with the op. A
// refusal with R = 1 ns, the node's floor, is a pending operation: the
// held time may have used up its retry time, or it is a grant that expired
// while the node held it, which permitd answers as such a refusal.
//
// # What it catches
//
// Two grants whose slots are closer than n·I in every order the history
// allows (a slot granted twice, a stale leader granting from an old N); a
// wait that no N consistent with the other answers explains; a refusal
// whose retry_after contradicts the grants around it; a refusal of a
// request that fit.
//
// # What it cannot catch
//
// It checks the register's answers, not their use: a client sleeping too
// long or too short is the fake API's concern (spacing, window). With a
// lag budget it cannot tell a slow timeline from a register that leaves
// slots unused. A wait or retry_after longer than the grants before it
// explain is accepted while a pending operation could have taken the
// slots in between. To stay sound, a pending operation's effect uses the
// earliest invoke and the fewest permits of all pending operations, and
// boxes are merged past 32: both only weaken the check. Replays
// (duplicate=true) of a request ID the history already granted, and
// duplicate refusals, are skipped. The model assumes a fixed I and M: a
// limit reconfigured during the history (RegisterSpec.Changes) is checked
// epoch by epoch, each with its own I and M and, after the first, an
// unknown initial N; operations that overlap a put are dropped (see
// splitEpochs). Acquire ops (several reserves under fresh IDs) are not
// register operations and are ignored; so are fail ops with an error (no
// effect) and limits not in Limits.
//
// # Cost
//
// The search is quick when I is much longer than the operations' latency
// (milliseconds for hundreds of concurrent reserves with I = 1 s and 20 ms
// operations). When I approaches the latency, many orders explain the
// answers equally well and the search can time out: a result of Unknown,
// reported as a violation, never as a pass.
//
// Details: per_limit ({limit: "Ok"|"Illegal"|"Unknown"}; a reconfigured
// limit's later epochs as "limit@epochK"), ops (checked), pending_ops
// (floor_refusals among them), replays, skipped_ops,
// dropped_across_reconfig (overlapping a put),
// unchecked_ops (in epochs skipped), epochs (reconfigured limits only:
// {limit: []EpochReport}), tolerance_ns, timeline_lag_ns, visualizations.
func Linearizability(in LinearizabilityInput) (Result, error) {
	if in.ToleranceNanos < 0 || in.TimelineLagNanos < 0 {
		return Result{}, fmt.Errorf("%w: tolerance %d ns, timeline lag %d ns; allowed: >= 0", ErrInvalid, in.ToleranceNanos, in.TimelineLagNanos)
	}
	for name, spec := range in.Limits {
		if spec.IntervalNanos <= 0 || spec.MaxReserved < 0 {
			return Result{}, fmt.Errorf("%w: limit %q: interval %d ns, max_reserved %d; allowed: interval > 0, max_reserved >= 0", ErrInvalid, name, spec.IntervalNanos, spec.MaxReserved)
		}
		for _, c := range spec.Changes {
			if c.IntervalNanos <= 0 || c.MaxReserved < 0 || c.CallNanos < 0 || (c.known() && c.ReturnNanos < c.CallNanos) {
				return Result{}, fmt.Errorf("%w: limit %q: change op #%d: interval %d ns, max_reserved %d, from %d ns to %d ns; allowed: interval > 0, max_reserved >= 0, 0 <= from <= to (or to = -1: unknown outcome)",
					ErrInvalid, name, c.OpIndex, c.IntervalNanos, c.MaxReserved, c.CallNanos, c.ReturnNanos)
			}
		}
	}
	byLimit, skipped, err := RegisterOperations(in.Ops, in.Limits)
	if err != nil {
		return Result{}, err
	}
	r := newResult("linearizability")
	perLimit := make(map[string]string, len(byLimit))
	epochReports := make(map[string][]EpochReport)
	var files []string
	total, pending, replays, dropped, unchecked, floor := 0, 0, 0, 0, 0, 0
	for _, name := range sortedKeys(byLimit) {
		whole := byLimit[name]
		pending, replays, floor = pending+len(whole.Pending), replays+whole.Replays, floor+whole.FloorRefusals
		epochs, d := splitEpochs(whole, in.Limits[name], in.ToleranceNanos)
		dropped += d
		for _, e := range epochs {
			if e.report.SkippedWhy != "" {
				e.report.Result = "skipped"
				unchecked += len(e.h.Ops)
				epochReports[name] = append(epochReports[name], e.report)
				continue
			}
			h, spec, key := e.h, e.spec, e.report.Key
			total += len(h.Ops)
			for _, op := range h.Ops {
				input, out := op.Input.(RegisterInput), op.Output.(RegisterOutput)
				if why := localFault(spec, in.ToleranceNanos, input, out); why != "" {
					r.violate("limit %q: %s: %s", key, describeRegisterOp(input, out), why)
				}
			}
			model := RegisterModel(h, spec, in.ToleranceNanos, in.TimelineLagNanos)
			res, info := porcupine.CheckOperationsVerbose(model, h.Ops, in.Timeout)
			perLimit[key] = string(res)
			e.report.Result = string(res)
			epochReports[name] = append(epochReports[name], e.report)
			switch res {
			case porcupine.Illegal:
				r.violate("limit %q: no linearization explains the %d reserves (%d pending); %s", key, len(h.Ops), len(h.Pending), stuckAt(info, h.Ops))
			case porcupine.Unknown:
				r.violate("limit %q: linearizability unknown: the search of %d reserves timed out after %s", key, len(h.Ops), in.Timeout)
			}
			if in.VisualizeDir != "" {
				info.AddAnnotations(annotations(h, in.Ops))
				path := filepath.Join(in.VisualizeDir, "linearizability-"+fileSafe(strings.ReplaceAll(key, "@", "-"))+".html")
				if err := os.MkdirAll(in.VisualizeDir, 0o755); err != nil {
					return Result{}, fmt.Errorf("checker: visualization: %w", err)
				}
				if err := porcupine.VisualizePath(model, info, path); err != nil {
					return Result{}, fmt.Errorf("checker: visualization of limit %q: %w", key, err)
				}
				files = append(files, path)
			}
		}
	}
	r.Details["per_limit"] = perLimit
	r.Details["ops"] = total
	r.Details["pending_ops"] = pending
	r.Details["replays"] = replays
	r.Details["skipped_ops"] = skipped
	r.Details["floor_refusals"] = floor
	r.Details["dropped_across_reconfig"] = dropped
	r.Details["unchecked_ops"] = unchecked
	for name := range epochReports {
		if len(in.Limits[name].Changes) == 0 {
			delete(epochReports, name)
		}
	}
	if len(epochReports) > 0 {
		r.Details["epochs"] = epochReports
	}
	r.Details["tolerance_ns"] = in.ToleranceNanos
	r.Details["timeline_lag_ns"] = in.TimelineLagNanos
	if files != nil {
		r.Details["visualizations"] = files
	}
	return r, nil
}

// RegisterModel returns the porcupine model Linearizability uses for one
// limit (see its doc), for callers that run porcupine themselves on h.Ops.
func RegisterModel(h *RegisterHistory, spec RegisterSpec, toleranceNanos, timelineLagNanos int64) porcupine.Model {
	return newRegisterModel(spec, h.Pending, toleranceNanos, timelineLagNanos).Model()
}

// stuckAt describes where the search got stuck: the longest partial
// linearization and the earliest op left out of it.
func stuckAt(info porcupine.LinearizationInfo, ops []porcupine.Operation) string {
	parts := info.PartialLinearizations()
	if len(parts) == 0 {
		return "no partial linearization"
	}
	var longest []int
	for _, p := range parts[0] {
		if len(p) > len(longest) {
			longest = p
		}
	}
	in := make(map[int]bool, len(longest))
	for _, id := range longest {
		in[id] = true
	}
	first := -1
	for id, op := range ops {
		if !in[id] && (first < 0 || op.Call < ops[first].Call) {
			first = id
		}
	}
	s := fmt.Sprintf("the longest linearizable subset has %d of %d ops", len(longest), len(ops))
	if first >= 0 {
		op := ops[first]
		s += fmt.Sprintf("; earliest op outside it: %s (invoked %s)", describeRegisterOp(op.Input.(RegisterInput), op.Output.(RegisterOutput)), dur(op.Call))
	}
	return s
}

// floorRetryAfter is the smallest retry_after a node answers: the time it
// held a refusal is taken off its retry_after down to this floor, and a
// grant that expired while held is answered as a refusal with it.
const floorRetryAfter = 1

// RegisterOperations splits the reserves of the limits in specs by limit
// into porcupine operations (grants, refusals), pending operations and
// replays. It returns how many reserve ops it skipped (other limits,
// definite errors).
func RegisterOperations(ops []history.Op, specs map[string]RegisterSpec) (map[string]*RegisterHistory, int, error) {
	pairs, err := history.Pair(ops)
	if err != nil {
		return nil, 0, fmt.Errorf("checker: linearizability: %w", err)
	}
	granted := make(map[string]bool) // request IDs already granted
	out := make(map[string]*RegisterHistory)
	skipped := 0
	for _, o := range pairs {
		if o.F() != history.FReserve {
			continue
		}
		var req history.ReserveRequest
		if err := o.Invoke.DecodeValue(&req); err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if _, ok := specs[req.Limit]; !ok {
			skipped++
			continue
		}
		if req.Permits == 0 {
			req.Permits = 1
		}
		if req.Permits < 0 || req.MaxWaitNanos < 0 {
			return nil, 0, fmt.Errorf("%w: op #%d: permits %d, max_wait %d ns; allowed: permits >= 1, max_wait >= 0", ErrInvalid, o.Invoke.Index, req.Permits, req.MaxWaitNanos)
		}
		var resp history.ReserveResponse
		if o.Completed {
			if err := o.Completion.DecodeValue(&resp); err != nil {
				return nil, 0, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
		}
		h := out[req.Limit]
		if h == nil {
			h = &RegisterHistory{Limit: req.Limit}
			out[req.Limit] = h
		}
		ret, _ := o.ReturnNanos()
		input := RegisterInput{Limit: req.Limit, Permits: req.Permits, MaxWaitNanos: req.MaxWaitNanos, CallNanos: o.CallNanos(), ReturnNanos: ret, OpIndex: o.Invoke.Index}
		var output RegisterOutput
		id := o.RequestID()
		switch o.Outcome() {
		case history.OK:
			if id != "" && granted[id] && resp.Duplicate {
				h.Replays++
				continue
			}
			if id != "" {
				granted[id] = true
			}
			output = RegisterOutput{Outcome: Granted, WaitNanos: resp.WaitNanos, Duplicate: resp.Duplicate}
		case history.Fail:
			switch {
			case !resp.Refused():
				skipped++ // certainly no effect, no information
				continue
			case resp.Duplicate:
				h.Replays++
				continue
			case resp.RetryAfterNanos == floorRetryAfter:
				// The node's floor: the time it held the answer used up the
				// retry time (the refusal then says little about N), or it is
				// a grant whose permit expired while the node held it, which
				// permitd reports as a refusal with retry_after 1 ns: the
				// slot was taken. Either way the effect is unknown.
				h.FloorRefusals++
				h.Pending = append(h.Pending, PendingOp{OpIndex: o.Invoke.Index, Process: o.Process(), Permits: req.Permits, CallNanos: o.CallNanos(), ReturnNanos: ret})
				continue
			}
			output = RegisterOutput{Outcome: Refused, RetryAfterNanos: resp.RetryAfterNanos}
		default:
			p := PendingOp{OpIndex: o.Invoke.Index, Process: o.Process(), Permits: req.Permits, CallNanos: o.CallNanos(), ReturnNanos: -1}
			if o.Completed {
				p.ReturnNanos = ret
			}
			h.Pending = append(h.Pending, p)
			continue
		}
		c := clientID(h, o.Process())
		h.Ops = append(h.Ops, porcupine.Operation{ClientId: c, Input: input, Call: o.CallNanos(), Output: output, Return: ret})
	}
	return out, skipped, nil
}

// clientID maps a process to a dense porcupine client ID.
func clientID(h *RegisterHistory, process int) int {
	for i, p := range h.Clients {
		if p == process {
			return i
		}
	}
	h.Clients = append(h.Clients, process)
	return len(h.Clients) - 1
}

// annotations shows pending operations on their client's line and
// nemeses on a "nemesis" line.
func annotations(h *RegisterHistory, ops []history.Op) []porcupine.Annotation {
	var out []porcupine.Annotation
	var end int64
	for _, op := range ops {
		end = max(end, op.TimeNanos)
	}
	for _, p := range h.Pending {
		stop := p.ReturnNanos
		if stop < 0 {
			stop = end
		}
		out = append(out, porcupine.Annotation{
			ClientId: clientID(h, p.Process), Start: p.CallNanos, End: stop,
			Description:     fmt.Sprintf("#%d reserve(n=%d) → unknown", p.OpIndex, p.Permits),
			Details:         "outcome unknown: may have taken effect at any time after its invoke",
			BackgroundColor: "#fde2b6",
		})
	}
	pairs, err := history.Pair(ops)
	if err != nil {
		return out
	}
	for _, o := range history.Filter(pairs, history.FNemesis) {
		stop, ok := o.ReturnNanos()
		if !ok {
			stop = end
		}
		out = append(out, porcupine.Annotation{
			Tag: "nemesis", Start: o.CallNanos(), End: stop,
			Description: string(o.Invoke.Value), BackgroundColor: "#f4b6b6",
		})
	}
	return out
}

// fileSafe maps a limit name to a file-name fragment.
func fileSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') {
			return r
		}
		return '_'
	}, name)
}
