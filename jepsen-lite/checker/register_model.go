package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// RegisterSpec describes one strict limit to check for linearizability.
type RegisterSpec struct {
	// IntervalNanos is the limit's interval I (> 0).
	IntervalNanos int64
	// MaxReserved is the limit's max_reserved M (>= 0): at most M slots
	// may be reserved ahead of now.
	MaxReserved int64
	// Fresh reports that the run created the limit before any reserve, so
	// no slot was given out before the history starts. Otherwise the
	// register's initial state is unknown (weaker check).
	Fresh bool
	// Changes are the puts that reconfigured the limit during the
	// history (after the one that created it). The model assumes a fixed
	// I and M, so Linearizability checks each configuration epoch
	// separately (see splitEpochs); nil: one epoch, the whole history.
	Changes []RegisterChange
}

// RegisterOutcome is what a reserve returned, as the model sees it.
type RegisterOutcome int

// The outcomes of the operations given to porcupine. Operations whose
// outcome is unknown are not porcupine operations: see PendingOp.
const (
	// Granted: an ok reserve (not a replay of a grant already in the
	// history).
	Granted RegisterOutcome = iota + 1
	// Refused: a fail reserve the register refused, with retry_after.
	Refused
)

// RegisterInput is the input of a porcupine operation on the register.
type RegisterInput struct {
	// Limit, Permits and MaxWaitNanos are the reserve's arguments.
	Limit        string
	Permits      int64
	MaxWaitNanos int64
	// CallNanos and ReturnNanos are the op's invoke and completion times.
	CallNanos, ReturnNanos int64
	// OpIndex is the invoke's history index.
	OpIndex int
}

// RegisterOutput is the output of a porcupine operation on the register.
type RegisterOutput struct {
	// Outcome is Granted or Refused.
	Outcome RegisterOutcome
	// WaitNanos is the granted wait_ns (Granted).
	WaitNanos int64
	// RetryAfterNanos is the refusal's retry_after_ns (Refused).
	RetryAfterNanos int64
	// Duplicate marks a Granted answer that the server flagged as a
	// replay: its wait is relative to the replay, not to the decision.
	Duplicate bool
}

// PendingOp is a reserve whose outcome is unknown (info, or never
// completed). It may have been granted at any time after its invoke, or
// never.
type PendingOp struct {
	// OpIndex is the invoke's history index, Process its process.
	OpIndex int
	Process int
	// Permits asked for.
	Permits int64
	// CallNanos is the invoke's time.
	CallNanos int64
	// ReturnNanos is the info completion's time, -1 if never completed.
	ReturnNanos int64
}

// RegisterHistory is one limit's reserves, prepared for porcupine.
type RegisterHistory struct {
	// Limit names the limit.
	Limit string
	// Ops are the grants and refusals.
	Ops []porcupine.Operation
	// Pending are the operations with unknown outcome.
	Pending []PendingOp
	// Replays counts answers that replay a decision already in Ops (ok
	// with duplicate=true for a request ID already granted, duplicate
	// refusals); they are left out.
	Replays int
	// FloorRefusals counts refusals with retry_after at the node's floor
	// of 1 ns, counted among Pending (see RegisterOperations).
	FloorRefusals int
	// Clients maps porcupine client IDs back to history processes.
	Clients []int
}

// Infinite bounds, far from overflow when a few intervals are added.
const (
	negInf = math.MinInt64 / 4
	posInf = math.MaxInt64 / 4
)

// regBox is one region of the model's state:
//
//	[Lo, Hi]: the register's next free slot N, in run time shifted by the
//	          cluster timeline's lag, lies in this range;
//	K:        pending operations already assumed to have taken effect.
//
// (The model does not order the operations' reference instants: an
// answer's durations count from the moment it left the node, and answers
// leave in another order than the decisions were taken.)
type regBox struct {
	Lo, Hi int64
	K      int
}

// covers reports whether every history b allows, a allows too.
func (a regBox) covers(b regBox) bool {
	return a.Lo <= b.Lo && a.Hi >= b.Hi && a.K <= b.K
}

// regState is a canonical (sorted, no box covering another) set of boxes:
// the union of the states the history can be in.
type regState []regBox

// maxBoxes bounds a state; past it the boxes are merged into their hull,
// which only widens the state (the check gets weaker, never wrong).
const maxBoxes = 32

// registerModel is the sequential specification of one limit; see the
// Linearizability doc for what it checks.
type registerModel struct {
	spec             RegisterSpec
	toleranceNanos   int64
	timelineLagNanos int64
	// pendingCalls are the pending operations' invoke times, sorted.
	pendingCalls []int64
	// minPermits is the fewest permits a pending operation asked for.
	minPermits int64
}

func newRegisterModel(spec RegisterSpec, pending []PendingOp, tol, lag int64) registerModel {
	m := registerModel{spec: spec, toleranceNanos: tol, timelineLagNanos: lag, minPermits: math.MaxInt64}
	for _, p := range pending {
		m.pendingCalls = append(m.pendingCalls, p.CallNanos)
		m.minPermits = min(m.minPermits, p.Permits)
	}
	slices.Sort(m.pendingCalls)
	return m
}

// initState is the state before any operation.
func (m registerModel) initState() regState {
	if m.spec.Fresh {
		return regState{{Lo: negInf, Hi: negInf}}
	}
	return regState{{Lo: negInf, Hi: posInf}}
}

// localFault returns why an answer is impossible whatever the state: a
// grant waiting longer than allowed or reserving more than M ahead, or a
// refusal of a request that would have fit. "" if none.
//
// The node subtracts from an answer's durations the time it held the
// answer (at most the operation's duration, plus tol on either end): a
// grant's wait and a refusal's retry_after were that much longer at the
// decision. A shorter wait only makes a grant's checks easier to pass, so
// grants are checked as answered; a refusal is a fault only if the request
// would have fit even with the longest possible hold added back.
func localFault(spec RegisterSpec, tol int64, in RegisterInput, out RegisterOutput) string {
	ahead := func(wait int64) int64 { return ceilDiv(wait, spec.IntervalNanos) - 1 + in.Permits }
	switch out.Outcome {
	case Granted:
		if out.WaitNanos < 0 {
			return fmt.Sprintf("granted with negative wait %s", dur(out.WaitNanos))
		}
		if out.WaitNanos > in.MaxWaitNanos {
			return fmt.Sprintf("granted with wait %s > max_wait %s", dur(out.WaitNanos), dur(in.MaxWaitNanos))
		}
		if a := ahead(out.WaitNanos); a > spec.MaxReserved {
			return fmt.Sprintf("granted with wait %s: ceil(wait/I)-1+n = %d slots ahead > max_reserved %d", dur(out.WaitNanos), a, spec.MaxReserved)
		}
	case Refused:
		if out.RetryAfterNanos <= 0 {
			return fmt.Sprintf("refused with retry_after %s; a refusal means the next slot is in the future", dur(out.RetryAfterNanos))
		}
		held := satAdd(max(in.ReturnNanos-in.CallNanos, 0), 2*tol)
		if w := satAdd(out.RetryAfterNanos, held); w <= in.MaxWaitNanos && ahead(w) <= spec.MaxReserved {
			return fmt.Sprintf("refused although the slot %s ahead (at most %s at the decision, before the node took off the %s it may have held the answer) fits: wait <= max_wait %s and ceil(wait/I)-1+n = %d <= max_reserved %d",
				dur(out.RetryAfterNanos), dur(w), dur(held), dur(in.MaxWaitNanos), ahead(w), spec.MaxReserved)
		}
	default:
		return fmt.Sprintf("unknown outcome %d", out.Outcome)
	}
	return ""
}

// step applies one operation to every box of s: as it is, and after one
// more pending operation took effect just before it, if one can have.
func (m registerModel) step(s regState, in RegisterInput, out RegisterOutput) (bool, regState) {
	if localFault(m.spec, m.toleranceNanos, in, out) != "" {
		return false, nil
	}
	var next regState
	for _, b := range s {
		next = append(next, m.stepBox(b, in, out)...)
		if m.pendingAvailable(b, in) {
			next = append(next, m.stepBox(m.pendingEffect(b), in, out)...)
		}
	}
	if len(next) == 0 {
		return false, nil
	}
	return true, canonical(next)
}

// pendingAvailable reports whether a pending operation not yet assumed
// effective could have taken effect before in's decision: its decision
// τi >= its invoke − tol, and τi <= τ <= in's return + tol.
func (m registerModel) pendingAvailable(b regBox, in RegisterInput) bool {
	limit := satAdd(in.ReturnNanos, 2*m.toleranceNanos)
	n := sort.Search(len(m.pendingCalls), func(i int) bool { return m.pendingCalls[i] > limit })
	return n > b.K
}

// pendingEffect is b after one more pending operation was granted: N
// moves to at least max(N, τi − L) + n·I and its upper end is unknown. It
// uses the earliest invoke and the fewest permits of all pending
// operations, which can only make the state wider.
func (m registerModel) pendingEffect(b regBox) regBox {
	t := satAdd(m.pendingCalls[0], -m.toleranceNanos)
	aLo := max(b.Lo, satAdd(t, -m.timelineLagNanos))
	return regBox{Lo: satAdd(aLo, satMul(m.minPermits, m.spec.IntervalNanos)), Hi: posInf, K: b.K + 1}
}

// stepBox returns the boxes b can move to. τ is the real time the
// answer's durations count from (when the node sent it: its decision time
// plus the time it held the answer, which it subtracted), L the timeline's
// lag (0 <= L <= Lag), "at" the granted slot in the model's frame: the
// register's cluster-time now, moved forward by the held time, is τ − L.
func (m registerModel) stepBox(b regBox, in RegisterInput, out RegisterOutput) []regBox {
	tol, lag, nI := m.toleranceNanos, m.timelineLagNanos, satMul(in.Permits, m.spec.IntervalNanos)
	ta := satAdd(in.CallNanos, -tol)  // earliest τ
	tb := satAdd(in.ReturnNanos, tol) // latest τ
	w := out.WaitNanos
	switch {
	case out.Outcome == Granted && out.Duplicate:
		// at = τ' − L' + W' for the replay; at >= N at the decision.
		aLo, aHi := max(b.Lo, satAdd(satAdd(ta, -lag), w)), satAdd(tb, w)
		if aLo > aHi {
			return nil
		}
		return []regBox{{Lo: satAdd(aLo, nI), Hi: satAdd(aHi, nI), K: b.K}}
	case out.Outcome == Granted && w > 0:
		// It waited: at = N = τ − L + W.
		aLo, aHi := max(b.Lo, satAdd(satAdd(ta, -lag), w)), min(b.Hi, satAdd(tb, w))
		if aLo > aHi {
			return nil
		}
		return []regBox{{Lo: satAdd(aLo, nI), Hi: satAdd(aHi, nI), K: b.K}}
	case out.Outcome == Granted:
		// No wait: at = τ − L >= N.
		aLo, aHi := max(b.Lo, satAdd(ta, -lag)), tb
		if aLo > aHi {
			return nil
		}
		return []regBox{{Lo: satAdd(aLo, nI), Hi: satAdd(aHi, nI), K: b.K}}
	default: // Refused: N = τ − L + R, unchanged.
		r := out.RetryAfterNanos
		nLo, nHi := max(b.Lo, satAdd(satAdd(ta, -lag), r)), min(b.Hi, satAdd(tb, r))
		if nLo > nHi {
			return nil
		}
		return []regBox{{Lo: nLo, Hi: nHi, K: b.K}}
	}
}

// canonical removes boxes another box covers, merges past maxBoxes, and
// sorts.
func canonical(boxes []regBox) regState {
	slices.SortFunc(boxes, func(a, b regBox) int {
		if c := cmp.Compare(a.Lo, b.Lo); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Hi, a.Hi); c != 0 {
			return c
		}
		return cmp.Compare(a.K, b.K)
	})
	var out regState
	for _, b := range boxes {
		covered := false
		for _, o := range out {
			if o.covers(b) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, b)
		}
	}
	if len(out) > maxBoxes {
		h := out[0]
		for _, b := range out[1:] {
			h = regBox{Lo: min(h.Lo, b.Lo), Hi: max(h.Hi, b.Hi), K: min(h.K, b.K)}
		}
		out = regState{h}
	}
	return out
}

// Model returns the porcupine model.
func (m registerModel) Model() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return m.initState() },
		Step: func(state, input, output any) (bool, any) {
			return m.step(state.(regState), input.(RegisterInput), output.(RegisterOutput))
		},
		Equal: func(a, b any) bool { return slices.Equal(a.(regState), b.(regState)) },
		Hash: func(state any) uint64 {
			h := uint64(14695981039346656037)
			for _, b := range state.(regState) {
				for _, v := range [3]int64{b.Lo, b.Hi, int64(b.K)} {
					h ^= uint64(v)
					h *= 1099511628211
				}
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			return describeRegisterOp(input.(RegisterInput), output.(RegisterOutput))
		},
		DescribeState: func(state any) string {
			s := state.(regState)
			parts := make([]string, len(s))
			for i, b := range s {
				parts[i] = fmt.Sprintf("N∈[%s, %s]", inf(b.Lo), inf(b.Hi))
				if b.K > 0 {
					parts[i] += fmt.Sprintf(" (%d pending took effect)", b.K)
				}
			}
			return strings.Join(parts, " ∪ ")
		},
	}
}

func describeRegisterOp(in RegisterInput, out RegisterOutput) string {
	call := fmt.Sprintf("#%d reserve(%s, n=%d, max_wait=%s)", in.OpIndex, in.Limit, in.Permits, dur(in.MaxWaitNanos))
	switch out.Outcome {
	case Granted:
		s := call + " → granted wait=" + dur(out.WaitNanos)
		if out.Duplicate {
			s += " (replayed)"
		}
		return s
	case Refused:
		return call + " → refused retry_after=" + dur(out.RetryAfterNanos)
	}
	return call + " → ?"
}

func inf(v int64) string {
	switch {
	case v <= negInf:
		return "-∞"
	case v >= posInf:
		return "+∞"
	}
	return dur(v)
}

// satAdd adds, saturating at the infinities.
func satAdd(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || s > posInf {
		return posInf
	}
	if (b < 0 && s > a) || s < negInf {
		return negInf
	}
	return s
}

// satMul multiplies non-negative numbers, saturating at posInf.
func satMul(a, b int64) int64 {
	if a != 0 && b > posInf/a {
		return posInf
	}
	return a * b
}

// ceilDiv is ceil(a/b) for b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}
