package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
)

// keyed.go: the templated workload's checkers. Many keys ("prefix:k7"),
// each its own limit, created from a template on first use and dropped by
// the register when idle: KeyedBounds judges every key's calls against
// that key's bound in force, across drops and re-creations alike (a key
// dropped and created again is one limit to its callers, fsm/README.md
// "Templated keys and their drop"); KeysFull judges the refusals of a full
// key cap.

// KeyEpoch is a key's bound from FromNanos on: the invoke of the put that
// may have changed its configuration (0 for the first epoch). Bound (and
// SpacingNanos, when > 0: calls at least that far apart) must be the
// fastest configuration of this epoch and every earlier one: across a
// change, fsm/README.md bounds a limit with the smaller interval and the
// larger stored time of the two.
type KeyEpoch struct {
	FromNanos    int64
	Bound        bound.Bound
	SpacingNanos int64
}

// KeyedSpec is what KeyedBounds judges with.
type KeyedSpec struct {
	// Ops is the history: each call's key is the limit its grant (the
	// reserve whose request ID the call names) was made on.
	Ops []history.Op
	// Epochs are the bounds of the keys whose configuration changed (an
	// explicit put); every other key has Default. Each list is sorted by
	// FromNanos and starts at 0.
	Epochs  map[string][]KeyEpoch
	Default []KeyEpoch
	// WindowsNanos are the window lengths W judged (each > 0).
	WindowsNanos []int64
	// ToleranceNanos is the measured delivery jitter plus the workers'
	// use discipline (>= 0).
	ToleranceNanos int64
}

// KeyedWorst is the fullest window of one length over every key.
type KeyedWorst struct {
	WindowNanos int64  `json:"window_ns"`
	Key         string `json:"key"`
	Count       int64  `json:"count"`
	Bound       int64  `json:"bound"`
}

// KeyedBounds judges each key alone: for each epoch e of the key, the
// calls received before the next epoch's FromNanos, in every closed window
// of length W − tolerance, number at most e.Bound.Max(W), and (when
// e.SpacingNanos > 0) consecutive ones are at least e.SpacingNanos −
// tolerance apart. A window that straddles a change is judged, with the
// calls before the change only, by the earlier epoch's bound, and with
// them all by the later (faster) one: exact before a change, the stated
// bound across it. A call whose request ID names no grant, or a grant on
// another key than the call says, is a violation (conservation judges the
// rest of the spending).
//
// Details: keys (called), calls, epochs (judged prefixes), worst (the
// fullest window per W over all keys, against its key's bound), tolerance_ns.
func KeyedBounds(calls []fakeapi.Call, spec KeyedSpec) (Result, error) {
	if len(spec.WindowsNanos) == 0 || slices.ContainsFunc(spec.WindowsNanos, func(w int64) bool { return w <= 0 }) {
		return Result{}, fmt.Errorf("%w: window lengths %v; allowed: at least one, each > 0", ErrInvalid, spec.WindowsNanos)
	}
	if spec.ToleranceNanos < 0 {
		return Result{}, fmt.Errorf("%w: tolerance %d ns; allowed: >= 0", ErrInvalid, spec.ToleranceNanos)
	}
	if err := checkEpochs("default", spec.Default); err != nil {
		return Result{}, err
	}
	for k, es := range spec.Epochs {
		if err := checkEpochs(k, es); err != nil {
			return Result{}, err
		}
	}
	keyOf, err := grantKeys(spec.Ops)
	if err != nil {
		return Result{}, err
	}
	r := newResult("keyed-bounds")
	byKey := map[string][]fakeapi.Call{}
	for _, c := range sortedCalls(calls) {
		k, ok := keyOf[c.RequestID]
		switch {
		case !ok:
			r.violate("%s names no grant of any key", callString(c))
			continue
		case c.Key != "" && c.Key != k:
			r.violate("%s says key %q; its grant was on %q", callString(c), c.Key, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	worst := make([]KeyedWorst, len(spec.WindowsNanos))
	for i, w := range spec.WindowsNanos {
		worst[i].WindowNanos = w
	}
	judged := 0
	for _, k := range sortedKeys(byKey) {
		kc := byKey[k]
		epochs := spec.Default
		if es, ok := spec.Epochs[k]; ok {
			epochs = es
		}
		for e, ep := range epochs {
			end := int64(math.MaxInt64)
			if e+1 < len(epochs) {
				end = epochs[e+1].FromNanos
			}
			n, _ := slices.BinarySearchFunc(kc, end, func(c fakeapi.Call, t int64) int {
				return cmp.Compare(c.TimeNanos, t)
			})
			judged++
			judgeKeyEpoch(&r, k, e, kc[:n], ep, spec, worst)
		}
	}
	r.Details["keys"] = len(byKey)
	r.Details["calls"] = len(calls)
	r.Details["epochs"] = judged
	r.Details["worst"] = worst
	r.Details["tolerance_ns"] = spec.ToleranceNanos
	r.Details["rule"] = "per key and epoch: calls before the next change, in any closed window of length W - tolerance, <= the fastest bound so far; consecutive calls >= spacing - tolerance apart"
	return r, nil
}

// judgeKeyEpoch judges one key's calls (sorted, all before the next
// epoch) with epoch ep.
func judgeKeyEpoch(r *Result, key string, e int, calls []fakeapi.Call, ep KeyEpoch, spec KeyedSpec, worst []KeyedWorst) {
	for i, w := range spec.WindowsNanos {
		limit := ep.Bound.Max(w)
		count, _, _ := fullest(calls, max(w-spec.ToleranceNanos, 0), limit, func(first, last int, count int64) {
			r.violate("key %s (epoch %d): %d calls in [%s, %s] (span %s <= W - tolerance = %s - %s); bound %s = %d",
				key, e, count, dur(calls[first].TimeNanos), dur(calls[last].TimeNanos),
				dur(calls[last].TimeNanos-calls[first].TimeNanos), dur(w), dur(spec.ToleranceNanos), ep.Bound.Formula, limit)
		})
		if worst[i].Key == "" || count*worst[i].Bound > worst[i].Count*limit {
			worst[i] = KeyedWorst{WindowNanos: w, Key: key, Count: count, Bound: limit}
		}
	}
	if ep.SpacingNanos <= 0 {
		return
	}
	need := ep.SpacingNanos - spec.ToleranceNanos
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].TimeNanos - calls[i-1].TimeNanos; gap < need {
			r.violate("key %s (epoch %d): %s and %s are %s apart; need >= spacing - tolerance = %s - %s",
				key, e, callString(calls[i-1]), callString(calls[i]), dur(gap), dur(ep.SpacingNanos), dur(spec.ToleranceNanos))
		}
	}
}

func checkEpochs(key string, es []KeyEpoch) error {
	if len(es) == 0 || es[0].FromNanos != 0 {
		return fmt.Errorf("%w: epochs of %s: want at least one, the first from 0", ErrInvalid, key)
	}
	for i, e := range es {
		if err := e.Bound.Validate(); err != nil {
			return fmt.Errorf("%w: epoch %d of %s: %w", ErrInvalid, i, key, err)
		}
		if i > 0 && e.FromNanos < es[i-1].FromNanos {
			return fmt.Errorf("%w: epochs of %s: not sorted by FromNanos", ErrInvalid, key)
		}
	}
	return nil
}

// grantKeys maps each granted request ID to the limit its reserve named.
func grantKeys(ops []history.Op) (map[string]string, error) {
	pairs, err := history.Pair(ops)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	out := map[string]string{}
	for _, o := range history.Filter(pairs, history.FReserve) {
		if o.Outcome() != history.OK || o.RequestID() == "" {
			continue
		}
		var req history.ReserveRequest
		if err := o.Invoke.DecodeValue(&req); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		out[o.RequestID()] = req.Limit
	}
	return out, nil
}

// KeysFullInput is what KeysFull judges.
type KeysFullInput struct {
	Ops   []history.Op
	Calls []fakeapi.Call
	// Prefix is the template's: its keys are "Prefix:...".
	Prefix string
	// IdleNanos is the template's idle time: a key a reserve was granted
	// on is never dropped sooner (in cluster time, which never runs faster
	// than real time).
	IdleNanos int64
}

// KeysFull judges the answers "the key cap is full" (429 keys_full): each
// is a refusal (not granted, a retry_after of at least 1 ns, no API call
// spends its request ID), on a key of the template, never on a key that
// was surely live (a grant on it completed before the refusal was sent,
// and the refusal came back less than IdleNanos after that grant was
// sent: the key could not have been dropped) nor on a key made explicit
// by an acknowledged put before the refusal was sent (explicit limits are
// never dropped). It also counts the grants on a key whose previous grant
// on it ended more than IdleNanos before (a drop and a re-creation were
// possible between them).
//
// Details: keys_full (answers), keys_full_keys (distinct keys), grants,
// keys_granted, regrants_after_idle.
func KeysFull(in KeysFullInput) (Result, error) {
	if in.IdleNanos <= 0 || in.Prefix == "" {
		return Result{}, fmt.Errorf("%w: keys full: idle %d ns, prefix %q; allowed: idle > 0 and a prefix", ErrInvalid, in.IdleNanos, in.Prefix)
	}
	pairs, err := history.Pair(in.Ops)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	spent := map[string]bool{}
	for _, c := range in.Calls {
		spent[c.RequestID] = true
	}
	type span struct{ call, ret int64 }
	lastGrant := map[string]span{} // key → the latest grant completed so far (by completion)
	explicitAt := map[string]int64{}
	for _, o := range history.Filter(pairs, history.FPut) {
		var req history.LimitRequest
		if err := o.Invoke.DecodeValue(&req); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if ret, ok := o.ReturnNanos(); ok && o.Outcome() == history.OK {
			if at, seen := explicitAt[req.Limit]; !seen || ret < at {
				explicitAt[req.Limit] = ret
			}
		}
	}
	// Grants and refusals in completion order, so that "a grant completed
	// before the refusal was sent" is known when the refusal is judged.
	reserves := history.Filter(pairs, history.FReserve)
	slices.SortStableFunc(reserves, func(a, b history.Operation) int {
		ra, _ := a.ReturnNanos()
		rb, _ := b.ReturnNanos()
		return cmp.Compare(ra, rb)
	})
	r := newResult("keys-full")
	full, grants, regrants := 0, 0, 0
	fullKeys, granted := map[string]bool{}, map[string]bool{}
	seenIDs := map[string]bool{}
	judge := func(o history.Operation, req history.ReserveRequest, resp history.ReserveResponse) {
		ret, _ := o.ReturnNanos()
		switch {
		case resp.Granted || resp.RetryAfterNanos < 1:
			r.violate("op #%d: keys_full answer on %s with granted=%v retry_after=%dns; want a refusal with retry_after >= 1ns", o.Invoke.Index, req.Limit, resp.Granted, resp.RetryAfterNanos)
		case spent[o.RequestID()] && o.RequestID() != "":
			r.violate("op #%d: keys_full answer on %s, yet an API call spent its request ID %s", o.Invoke.Index, req.Limit, o.RequestID())
		case !strings.HasPrefix(req.Limit, in.Prefix+":"):
			r.violate("op #%d: keys_full answer on %s, not a key of template %s", o.Invoke.Index, req.Limit, in.Prefix)
		}
		if at, ok := explicitAt[req.Limit]; ok && at <= o.CallNanos() {
			r.violate("op #%d: keys_full answer on %s, an explicit limit since its put returned at %s", o.Invoke.Index, req.Limit, dur(at))
		}
		if g, ok := lastGrant[req.Limit]; ok && g.ret <= o.CallNanos() && ret-g.call < in.IdleNanos {
			r.violate("op #%d: keys_full answer on %s at [%s, %s], yet a grant on it at [%s, %s] was less than the idle time %s before: the key was live",
				o.Invoke.Index, req.Limit, dur(o.CallNanos()), dur(ret), dur(g.call), dur(g.ret), dur(in.IdleNanos))
		}
	}
	for _, o := range reserves {
		if !o.Completed {
			continue
		}
		var req history.ReserveRequest
		var resp history.ReserveResponse
		if err := o.Invoke.DecodeValue(&req); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if err := o.Completion.DecodeValue(&resp); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		ret, _ := o.ReturnNanos()
		switch {
		case resp.KeysFull:
			full++
			fullKeys[req.Limit] = true
			judge(o, req, resp)
		case o.Outcome() == history.OK && !seenIDs[o.RequestID()]:
			seenIDs[o.RequestID()] = true
			grants++
			granted[req.Limit] = true
			if g, ok := lastGrant[req.Limit]; ok && o.CallNanos()-g.ret > in.IdleNanos {
				regrants++
			}
			lastGrant[req.Limit] = span{o.CallNanos(), ret}
		}
	}
	r.Details["keys_full"] = full
	r.Details["keys_full_keys"] = len(fullKeys)
	r.Details["grants"] = grants
	r.Details["keys_granted"] = len(granted)
	r.Details["regrants_after_idle"] = regrants
	r.Details["rule"] = "a keys_full answer is a refusal (retry_after >= 1ns, no call spends it) on a key of the template that was not surely live (no grant on it less than the idle time before) nor explicit"
	return r, nil
}
