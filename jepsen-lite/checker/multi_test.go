package checker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
)

// mop is one hand-made operation of the multi workload, completed at once.
type mop struct {
	f      string
	typ    history.Type
	id     string // request id (completion)
	in     any
	out    any
	noComp bool
}

// buildMulti lays out ops of one process, each invoked and completed 1 ms
// apart.
func buildMulti(t *testing.T, ops ...mop) []history.Op {
	t.Helper()
	var out []history.Op
	raw := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := int64(0)
	for _, o := range ops {
		now += ms
		out = append(out, history.Op{Type: history.Invoke, Process: 0, F: o.f, TimeNanos: now, Index: len(out), Value: raw(o.in)})
		if o.noComp {
			continue
		}
		now += ms
		out = append(out, history.Op{Type: o.typ, Process: 0, F: o.f, RequestID: o.id, TimeNanos: now, Index: len(out), Value: raw(o.out)})
	}
	return out
}

func multiReserve(id, rid string) mop {
	req := history.MultiReserveRequest{ReserveRequest: history.ReserveRequest{Limit: "rpm", Permits: 1},
		Limits: []history.LimitPermits{{Limit: "rpm", Permits: 1}, {Limit: "tpm", Permits: 10}, {Limit: "inf", Permits: 1}}}
	return mop{f: history.FReserve, typ: history.OK, id: id, in: req,
		out: history.MultiReserveResponse{ReserveResponse: history.ReserveResponse{Granted: true}, ReservationID: rid}}
}

func TestMultiDimensions(t *testing.T) {
	spec := fakeapi.MultiSpec{
		SpacingNanos:      50 * ms,
		TokenBound:        bound.Bound{Formula: "floor((W + 100ms)/10ms) + 5", Max: func(w int64) int64 { return (w+100*ms)/(10*ms) + 5 }},
		TokenWindowsNanos: []int64{50 * ms, 1000 * ms},
		MaxInFlight:       2,
	}
	i64 := func(v int64) *int64 { return &v }
	call := func(seq, start, end, tokens int64) fakeapi.Call {
		return fakeapi.Call{Seq: seq, Worker: "w", RequestID: "r", TimeNanos: start, SentNanos: i64(start), EndNanos: i64(end), Tokens: i64(tokens)}
	}
	tests := []struct {
		name  string
		calls []fakeapi.Call
		want  map[string]int
	}{
		{"valid", []fakeapi.Call{call(0, 0, 100*ms, 10), call(1, 50*ms, 150*ms, 10), call(2, 100*ms, 200*ms, 10)}, nil},
		// A start 30 ms after the previous: spacing.
		{"spacing", []fakeapi.Call{call(0, 0, 10*ms, 1), call(1, 30*ms, 40*ms, 1)}, map[string]int{fakeapi.DimSpacing: 1}},
		// 20 + 20 tokens within 50 ms: the bound for 50 ms is 20.
		{"tokens", []fakeapi.Call{call(0, 0, 10*ms, 10), call(1, 50*ms, 60*ms, 11)}, map[string]int{fakeapi.DimTokens: 1}},
		// Three calls in progress at once, cap 2.
		{"in flight", []fakeapi.Call{call(0, 0, 500*ms, 1), call(1, 60*ms, 500*ms, 1), call(2, 120*ms, 500*ms, 1)}, map[string]int{fakeapi.DimInFlight: 1}},
		// An end at the same instant as a start frees its slot first.
		{"end before start", []fakeapi.Call{call(0, 0, 120*ms, 1), call(1, 60*ms, 500*ms, 1), call(2, 120*ms, 500*ms, 1)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, atUse := range []bool{false, true} {
				r, err := MultiDimensions(tt.calls, spec, atUse)
				if err != nil {
					t.Fatal(err)
				}
				per := r.Details["violations_per_dimension"].(map[string]int)
				for _, d := range []string{fakeapi.DimSpacing, fakeapi.DimTokens, fakeapi.DimInFlight} {
					if per[d] != tt.want[d] {
						t.Fatalf("at use %v: %s violations %d, want %d: %v", atUse, d, per[d], tt.want[d], r.Violations)
					}
				}
				if r.Valid != (len(tt.want) == 0) {
					t.Fatalf("valid %v: %v", r.Valid, r.Violations)
				}
			}
		})
	}
	if _, err := MultiDimensions([]fakeapi.Call{{Worker: "w"}}, spec, false); err == nil {
		t.Fatal("a call without tokens was judged")
	}
}

func TestMultiGrants(t *testing.T) {
	limits := []string{"rpm", "tpm", "inf"}
	node := func(a, b, c uint64) MultiNodeCounts {
		return MultiNodeCounts{Node: "n1", GrantedRequests: map[string]uint64{"rpm": a, "tpm": b, "inf": c}}
	}
	refused := mop{f: history.FReserve, typ: history.Fail, id: "r9", in: multiReserve("", "").in,
		out: history.MultiReserveResponse{ReserveResponse: history.ReserveResponse{RetryAfterNanos: ms}, Blocking: "inf"}}
	dup := multiReserve("r1", "7")
	dup.out = history.MultiReserveResponse{ReserveResponse: history.ReserveResponse{Granted: true, Duplicate: true}, ReservationID: "8"}
	tests := []struct {
		name  string
		ops   []mop
		nodes []MultiNodeCounts
		want  string // "" = valid
	}{
		{"valid", []mop{multiReserve("r1", "7"), refused, multiReserve("r2", "8")}, []MultiNodeCounts{node(2, 2, 2)}, ""},
		{"partial grant", []mop{multiReserve("r1", "7")}, []MultiNodeCounts{node(1, 1, 2)}, "partial grant"},
		{"fewer granted than seen", []mop{multiReserve("r1", "7"), multiReserve("r2", "8")}, []MultiNodeCounts{node(1, 1, 1)}, "< 2 reservations"},
		{"no reservation id", []mop{multiReserve("r1", "")}, []MultiNodeCounts{node(1, 1, 1)}, "no reservation id"},
		{"one id, two requests", []mop{multiReserve("r1", "7"), multiReserve("r2", "7")}, []MultiNodeCounts{node(2, 2, 2)}, "granted to request"},
		{"replay names another reservation", []mop{multiReserve("r1", "7"), dup}, []MultiNodeCounts{node(1, 1, 1)}, "earlier as 7"},
		{"no node read", []mop{multiReserve("r1", "7")}, []MultiNodeCounts{{Node: "n1", Errors: []string{"down"}}}, "could not run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := MultiGrants(MultiGrantsInput{Ops: buildMulti(t, tt.ops...), Limits: limits, Nodes: tt.nodes})
			if err != nil {
				t.Fatal(err)
			}
			checkVerdict(t, r, tt.want)
		})
	}
}

func checkVerdict(t *testing.T, r Result, want string) {
	t.Helper()
	if want == "" {
		if !r.Valid {
			t.Fatalf("invalid: %v", r.Violations)
		}
		return
	}
	if r.Valid || !strings.Contains(strings.Join(r.Violations, "\n"), want) {
		t.Fatalf("valid %v, violations %v; want one containing %q", r.Valid, r.Violations, want)
	}
}

func TestMultiSettlements(t *testing.T) {
	act := []history.LimitPermits{{Limit: "tpm", Permits: 4}}
	limits := []history.SettledLimit{{Limit: "tpm", Reserved: 10, Actual: 4, Refunded: 6}}
	settle := func(mode string, attempt int, reqID string, typ history.Type, out history.SettleValue) mop {
		in := history.SettleValue{ReservationID: "7", Mode: mode, Attempt: attempt, Actual: act, SettleRequestID: reqID}
		out.ReservationID, out.Mode, out.Attempt, out.Actual, out.SettleRequestID = "7", mode, attempt, act, reqID
		return mop{f: history.FSettle, typ: typ, in: in, out: out}
	}
	release := func(attempt int, n int64) mop {
		return mop{f: history.FRelease, typ: history.OK, in: history.ReleaseValue{ReservationID: "7", Attempt: attempt},
			out: history.ReleaseValue{ReservationID: "7", Attempt: attempt, Released: n}}
	}
	raw1 := settle(history.SettleRaw, 1, "s1", history.OK, history.SettleValue{Limits: limits})
	raw2 := settle(history.SettleRaw, 2, "s1", history.OK, history.SettleValue{Limits: limits, Duplicate: true})
	again := settle(history.SettleAgain, 0, "", history.Fail, history.SettleValue{Code: 409})
	tests := []struct {
		name string
		ops  []mop
		want string
	}{
		{"valid probe", []mop{multiReserve("r1", "7"), raw1, raw2, again, release(1, 1), release(2, 0)}, ""},
		{"valid client settle", []mop{multiReserve("r1", "7"), settle(history.SettleClient, 0, "", history.OK, history.SettleValue{Limits: limits}), release(1, 1)}, ""},
		{"settled twice", []mop{raw1, settle(history.SettleClient, 0, "", history.OK, history.SettleValue{Limits: limits})}, "settled a second time"},
		{"retry not a duplicate", []mop{raw1, settle(history.SettleRaw, 2, "s1", history.OK, history.SettleValue{Limits: limits})}, "not answered as a duplicate"},
		{"replay differs", []mop{raw1, settle(history.SettleRaw, 2, "s1", history.OK, history.SettleValue{Duplicate: true,
			Limits: []history.SettledLimit{{Limit: "tpm", Reserved: 10, Actual: 4, Refunded: 0}}})}, "the first answer was"},
		{"again accepted as a duplicate", []mop{raw1, settle(history.SettleAgain, 0, "", history.OK, history.SettleValue{Duplicate: true, Limits: limits})}, "want 409"},
		{"again refused otherwise", []mop{raw1, settle(history.SettleAgain, 0, "", history.Fail, history.SettleValue{Code: 404})}, "want 409"},
		{"over-refund", []mop{settle(history.SettleClient, 0, "", history.OK, history.SettleValue{
			Limits: []history.SettledLimit{{Limit: "tpm", Reserved: 10, Actual: 4, Refunded: 7}}})}, "refund <= 6"},
		{"answer with another actual", []mop{settle(history.SettleClient, 0, "", history.OK, history.SettleValue{
			Limits: []history.SettledLimit{{Limit: "tpm", Reserved: 10, Actual: 5, Refunded: 5}}})}, "settled actual 4"},
		{"release frees two", []mop{release(1, 2)}, "holds one in-flight permit"},
		{"repeated release frees", []mop{release(1, 0), release(2, 1)}, "want 0"},
		{"released twice", []mop{release(1, 1), release(1, 1)}, "released 2 permits in all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := MultiSettlements(buildMulti(t, tt.ops...))
			if err != nil {
				t.Fatal(err)
			}
			checkVerdict(t, r, tt.want)
		})
	}
}
