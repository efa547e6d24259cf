package checker

import (
	"testing"

	"github.com/permitd/permitd/jepsen-lite/history"
)

func TestDurability(t *testing.T) {
	const ok = history.OK
	put := func(p int, limit string, at int64, typ history.Type) opSpec {
		return opSpec{p: p, f: history.FPut, call: at, ret: at + ms, typ: typ, value: history.LimitRequest{Limit: limit}}
	}
	del := func(p int, limit string, at int64, typ history.Type) opSpec {
		return opSpec{p: p, f: history.FDelete, call: at, ret: at + ms, typ: typ, value: history.LimitRequest{Limit: limit}}
	}
	ops := []opSpec{
		put(0, "api", 0, ok),
		put(1, "lost", 0, history.Info), // unknown: need not survive
		{p: 2, id: "g1", call: 10 * ms, ret: 20 * ms, typ: ok, resp: granted(0)},
		{p: 3, id: "g2", permits: 2, maxWait: 5 * sec, call: 10 * ms, ret: 20 * ms, typ: ok, resp: granted(sec)},
		{p: 2, id: "g1", call: 30 * ms, ret: 40 * ms, typ: ok, resp: history.ReserveResponse{Granted: true, Duplicate: true}},
		{p: 4, id: "g3", call: 30 * ms, ret: 40 * ms, typ: history.Info},
		{p: 5, id: "g4", call: 30 * ms, ret: 40 * ms, typ: history.Fail, resp: refused(sec)},
	}
	node := func(name string, idx uint64, hash string, limits ...LimitCounters) NodeFinal {
		return NodeFinal{Name: name, Status: NodeStatus{AppliedIndex: idx, StateHash: hash}, Limits: limits}
	}
	good := LimitCounters{Name: "api", GrantedRequests: 2, GrantedPermits: 3}
	more := LimitCounters{Name: "api", GrantedRequests: 3, GrantedPermits: 4} // the info reserve was granted
	tests := []struct {
		name  string
		ops   []opSpec
		nodes []NodeFinal
		lag   bool
		valid bool
		want  string
	}{
		{"all agree", ops, []NodeFinal{node("a1", 9, "h", good), node("a2", 9, "h", good), node("a3", 9, "h", good)}, false, true, ""},
		{"more grants than acknowledged is fine", ops, []NodeFinal{node("a1", 9, "h", more)}, false, true, ""},
		{"hash differs at the same index", ops, []NodeFinal{node("a1", 9, "h", good), node("a2", 9, "x", good)}, false, false, "different state hashes"},
		{"a node lags", ops, []NodeFinal{node("a1", 9, "h", good), node("a2", 7, "old", good)}, false, false, "behind 9"},
		{"a lagging node allowed", ops, []NodeFinal{node("a1", 9, "h", good), node("a2", 7, "old", good)}, true, true, ""},
		{"limit missing on a node", ops, []NodeFinal{node("a1", 9, "h", good), node("a2", 9, "h")}, false, false, `limit "api" (put acknowledged by op #0) is missing on node a2`},
		{"grant lost", ops, []NodeFinal{node("a1", 9, "h", LimitCounters{Name: "api", GrantedRequests: 1, GrantedPermits: 3})}, false, false, "counts 1 granted requests"},
		{"permits lost", ops, []NodeFinal{node("a1", 9, "h", LimitCounters{Name: "api", GrantedRequests: 2, GrantedPermits: 2})}, false, false, "counts 2 granted permits"},
		{"deleted limit need not exist", append([]opSpec{put(6, "gone", 0, ok)}, append(ops, del(6, "gone", 50*ms, history.Info))...),
			[]NodeFinal{node("a1", 9, "h", good)}, false, true, ""},
		{"delete before the put does not excuse it", append([]opSpec{del(6, "back", 0, ok), put(6, "back", 10*ms, ok)}, ops...),
			[]NodeFinal{node("a1", 9, "h", good)}, false, false, `limit "back"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Durability(DurabilityInput{Ops: build(t, tt.ops...), Nodes: tt.nodes, AllowLagging: tt.lag})
			expect(t, r, err, tt.valid, tt.want)
		})
	}
	if _, err := Durability(DurabilityInput{}); err == nil {
		t.Fatal("no nodes accepted")
	}
}

func TestParseNodeState(t *testing.T) {
	st, err := ParseStatus([]byte(`{"id":"a1","state":"leader","applied_index":42,"state_hash":"abc","servers":[]}`))
	if err != nil || st != (NodeStatus{AppliedIndex: 42, StateHash: "abc"}) {
		t.Fatalf("ParseStatus = %+v, %v", st, err)
	}
	for _, bad := range []string{`{"applied_index":1}`, `{"state_hash":"x"}`, `nope`} {
		if _, err := ParseStatus([]byte(bad)); err == nil {
			t.Fatalf("ParseStatus(%s) accepted", bad)
		}
	}
	want := []LimitCounters{{Name: "api", GrantedRequests: 3, GrantedPermits: 4}, {Name: "b", GrantedRequests: 0}}
	for _, text := range []string{
		`{"limits":[{"name":"api","algorithm":"strict","granted_requests":3,"granted_permits":4,"refused_requests":1},{"name":"b","granted_requests":0}]}`,
		` [{"name":"api","granted_requests":3,"granted_permits":4},{"name":"b","granted_requests":0}]`,
	} {
		got, err := ParseLimits([]byte(text))
		if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("ParseLimits(%s) = %+v, %v", text, got, err)
		}
	}
	for _, bad := range []string{`{}`, `{"limits":[{"name":"x"}]}`, `[{"granted_requests":1}]`, `[`, `{"limits":3}`} {
		if _, err := ParseLimits([]byte(bad)); err == nil {
			t.Fatalf("ParseLimits(%s) accepted", bad)
		}
	}
}
