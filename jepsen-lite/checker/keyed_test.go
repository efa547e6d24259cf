package checker

import (
	"strings"
	"testing"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
)

// keyedCall is a call at t spending grant id on key.
func keyedCall(seq int64, id, key string, t int64) fakeapi.Call {
	return fakeapi.Call{Seq: seq, Worker: "w", RequestID: id, Key: key, TimeNanos: t}
}

func strictEpoch(t *testing.T, from, i, e int64) KeyEpoch {
	t.Helper()
	b, err := bound.StrictWithExpiry(i, e)
	if err != nil {
		t.Fatal(err)
	}
	return KeyEpoch{FromNanos: from, Bound: b, SpacingNanos: i - e}
}

// TestKeyedBoundsCatchesAnOverGrantAcrossADrop feeds KeyedBounds the
// history of a strict key (1 per 200 ms, expiry 100 ms) whose first
// incarnation reserved four slots ahead (calls at 0, 200, 400, 600 ms) and
// that a broken register dropped before it was at rest and created again
// at 550 ms: the new incarnation grants at once, and its calls at 550 and
// 600 ms are too close to the old ones. Another key's calls at the same
// instants are no violation (keys are judged alone), and the history
// without the re-created key's grants is valid.
func TestKeyedBoundsCatchesAnOverGrantAcrossADrop(t *testing.T) {
	const k1, k2 = "jlt:k1", "jlt:k2"
	specs := []opSpec{
		{p: 0, id: "a", limit: k1, permits: 4, call: 0, ret: ms, typ: history.OK, resp: history.ReserveResponse{Granted: true, SpacingNanos: 200 * ms}},
		{p: 1, id: "b", limit: k2, permits: 4, call: 0, ret: ms, typ: history.OK, resp: history.ReserveResponse{Granted: true, SpacingNanos: 200 * ms}},
	}
	calls := []fakeapi.Call{}
	for j := int64(0); j < 4; j++ {
		calls = append(calls, keyedCall(2*j, "a", k1, j*200*ms+2*ms), keyedCall(2*j+1, "b", k2, j*200*ms+2*ms))
	}
	spec := KeyedSpec{Default: []KeyEpoch{strictEpoch(t, 0, 200*ms, 100*ms)}, WindowsNanos: []int64{200 * ms, sec}, ToleranceNanos: ms}
	spec.Ops = build(t, specs...)
	r, err := KeyedBounds(calls, spec)
	if err != nil || !r.Valid {
		t.Fatalf("the control history: %v %v; want valid", r, err)
	}
	// The re-created key: two grants at once, spent at 550 and 600 ms.
	specs = append(specs,
		opSpec{p: 2, id: "c", limit: k1, call: 548 * ms, ret: 549 * ms, typ: history.OK, resp: history.ReserveResponse{Granted: true}},
		opSpec{p: 3, id: "d", limit: k1, call: 549 * ms, ret: 550 * ms, typ: history.OK, resp: history.ReserveResponse{Granted: true}})
	spec.Ops = build(t, specs...)
	broken := append(calls, keyedCall(8, "c", k1, 550*ms), keyedCall(9, "d", k1, 602*ms+1))
	r, err = KeyedBounds(broken, spec)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid || !strings.Contains(r.Violations[0], "key jlt:k1") {
		t.Fatalf("an over-grant on a re-created key: %v; want violations of key jlt:k1", r)
	}
	for _, v := range r.Violations {
		if strings.Contains(v, k2) {
			t.Errorf("key %s judged with another key's calls: %s", k2, v)
		}
	}
	t.Logf("%d violations, first: %s", r.ViolationsTotal(), r.Violations[0])
}

// TestKeyedBoundsEpochs: a key put explicitly with a faster plan at 1 s
// is judged with its template's bound before the put (two calls 50 ms
// apart at 0.5 s break the 100 ms spacing) and with the faster one after
// it (the same gap at 1.5 s is allowed); a call naming no grant, or
// another key than its grant's, is a violation.
func TestKeyedBoundsEpochs(t *testing.T) {
	const k = "jlt:k3"
	tmpl := strictEpoch(t, 0, 200*ms, 100*ms)
	fast := strictEpoch(t, sec, 50*ms, 100*ms) // fastest of both: I 50 ms, expiry 100 ms
	ops := build(t,
		opSpec{p: 0, id: "a", limit: k, permits: 2, call: 0, ret: ms, typ: history.OK, resp: history.ReserveResponse{Granted: true}},
		opSpec{p: 0, id: "b", limit: k, permits: 2, call: 1400 * ms, ret: 1401 * ms, typ: history.OK, resp: history.ReserveResponse{Granted: true}})
	spec := KeyedSpec{Ops: ops, Default: []KeyEpoch{tmpl}, Epochs: map[string][]KeyEpoch{k: {tmpl, fast}}, WindowsNanos: []int64{200 * ms}}
	after := []fakeapi.Call{keyedCall(0, "b", k, 1500*ms), keyedCall(1, "b", k, 1550*ms)}
	if r, err := KeyedBounds(after, spec); err != nil || !r.Valid {
		t.Fatalf("calls 50 ms apart after the faster put: %v %v; want valid", r, err)
	}
	before := []fakeapi.Call{keyedCall(0, "a", k, 500*ms), keyedCall(1, "a", k, 550*ms)}
	r, err := KeyedBounds(before, spec)
	if err != nil || r.Valid || !strings.Contains(r.Violations[0], "epoch 0") {
		t.Fatalf("calls 50 ms apart before the put: %v %v; want an epoch-0 violation", r, err)
	}
	stray := []fakeapi.Call{keyedCall(0, "zz", k, 500*ms), keyedCall(1, "a", "jlt:other", 900*ms)}
	if r, err := KeyedBounds(stray, spec); err != nil || r.ViolationsTotal() != 2 {
		t.Fatalf("a call without a grant and one naming another key: %v %v; want 2 violations", r, err)
	}
}

// TestKeysFull: a keys_full refusal on a cold key is valid; one on a key
// granted less than the idle time before, on an explicit key, or one that
// grants, is a violation.
func TestKeysFull(t *testing.T) {
	full := history.ReserveResponse{RetryAfterNanos: 300 * ms, KeysFull: true, Error: "keys_full"}
	grant := history.ReserveResponse{Granted: true}
	base := []opSpec{
		{p: 0, id: "g1", limit: "jlt:k1", call: 0, ret: ms, typ: history.OK, resp: grant},
		{p: 1, id: "f1", limit: "jlt:k2", call: 10 * ms, ret: 11 * ms, typ: history.Fail, resp: full},
		{p: 0, id: "g2", limit: "jlt:k1", call: 2500 * ms, ret: 2501 * ms, typ: history.OK, resp: grant},
		{p: 1, id: "f2", limit: "jlt:k1", call: 4 * sec, ret: 4*sec + ms, typ: history.Fail, resp: full}, // 1.5 s after the last grant
	}
	in := KeysFullInput{Ops: build(t, base...), Prefix: "jlt", IdleNanos: sec}
	r, err := KeysFull(in)
	if err != nil || !r.Valid || r.Details["keys_full"] != 2 || r.Details["regrants_after_idle"] != 1 {
		t.Fatalf("keys_full on cold keys: %v %v %v; want valid, 2 answers, 1 grant after an idle gap", r, err, r.Details)
	}
	bad := []struct {
		name string
		op   opSpec
		want string
	}{
		{"live key", opSpec{p: 2, id: "f3", limit: "jlt:k1", call: 2600 * ms, ret: 2601 * ms, typ: history.Fail, resp: full}, "the key was live"},
		{"explicit key", opSpec{p: 2, id: "f3", limit: "jlt:k9", call: 5 * sec, ret: 5*sec + ms, typ: history.Fail, resp: full}, "explicit limit"},
		{"granted", opSpec{p: 2, id: "f3", limit: "jlt:k5", call: 5 * sec, ret: 5*sec + ms, typ: history.OK, resp: history.ReserveResponse{Granted: true, KeysFull: true}}, "want a refusal"},
	}
	for _, b := range bad {
		specs := append(append([]opSpec{}, base...), b.op,
			opSpec{p: 3, f: history.FPut, call: 3 * sec, ret: 3*sec + ms, typ: history.OK, value: history.LimitRequest{Limit: "jlt:k9"}})
		r, err := KeysFull(KeysFullInput{Ops: build(t, specs...), Prefix: "jlt", IdleNanos: sec})
		if err != nil || r.Valid || !strings.Contains(strings.Join(r.Violations, "\n"), b.want) {
			t.Errorf("%s: %v %v; want a violation saying %q", b.name, r, err, b.want)
		}
	}
}
