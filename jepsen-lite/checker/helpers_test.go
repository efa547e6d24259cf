package checker

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
)

const ms = int64(time.Millisecond)
const sec = int64(time.Second)

// opSpec is one hand-made operation: an invoke at call and, unless typ is
// empty (never completed), a completion of type typ at ret.
type opSpec struct {
	p         int
	f         string // default reserve
	id        string
	limit     string // default "api"
	permits   int64  // default 1
	maxWait   int64
	call, ret int64
	typ       history.Type
	resp      history.ReserveResponse
	value     any // overrides the invoke value
}

// build turns specs into a valid history: entries sorted by time (invokes
// before completions at equal times), indexed from 0.
func build(t *testing.T, specs ...opSpec) []history.Op {
	t.Helper()
	type entry struct {
		op  history.Op
		seq int
	}
	var entries []entry
	for i, s := range specs {
		f := s.f
		if f == "" {
			f = history.FReserve
		}
		v := s.value
		if v == nil {
			limit, permits := s.limit, s.permits
			if limit == "" {
				limit = "api"
			}
			if permits == 0 {
				permits = 1
			}
			v = history.ReserveRequest{Limit: limit, Permits: permits, MaxWaitNanos: s.maxWait}
		}
		inv := history.Op{Type: history.Invoke, Process: s.p, F: f, RequestID: s.id, TimeNanos: s.call, Value: mustJSON(t, v)}
		entries = append(entries, entry{inv, 2 * i})
		if s.typ != "" {
			comp := history.Op{Type: s.typ, Process: s.p, F: f, RequestID: s.id, TimeNanos: s.ret, Value: mustJSON(t, s.resp)}
			entries = append(entries, entry{comp, 2*i + 1})
		}
	}
	slices.SortStableFunc(entries, func(a, b entry) int {
		if a.op.TimeNanos != b.op.TimeNanos {
			return int(a.op.TimeNanos - b.op.TimeNanos)
		}
		if (a.op.Type == history.Invoke) != (b.op.Type == history.Invoke) {
			if a.op.Type == history.Invoke {
				return 1 // completions first at equal times: a process may reinvoke
			}
			return -1
		}
		return a.seq - b.seq
	})
	ops := make([]history.Op, len(entries))
	for i, e := range entries {
		ops[i] = e.op
		ops[i].Index = i
	}
	if err := history.Validate(ops); err != nil {
		t.Fatalf("hand-made history is invalid: %v", err)
	}
	return ops
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func granted(wait int64) history.ReserveResponse {
	return history.ReserveResponse{Granted: true, WaitNanos: wait}
}

func refused(retry int64) history.ReserveResponse {
	return history.ReserveResponse{RetryAfterNanos: retry}
}

// calls makes API calls at the given times, with request IDs ids[i] (or
// none when ids is shorter).
func calls(times []int64, ids ...string) []fakeapi.Call {
	out := make([]fakeapi.Call, len(times))
	for i, at := range times {
		out[i] = fakeapi.Call{Seq: int64(i), Worker: "w", TimeNanos: at}
		if i < len(ids) {
			out[i].RequestID = ids[i]
		}
	}
	return out
}

// expect checks a result's validity and that some violation contains want.
func expect(t *testing.T, r Result, err error, valid bool, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("error: %v", err)
	}
	if r.Valid != valid {
		t.Fatalf("%s: valid = %v, want %v; violations: %q; details: %v", r.Name, r.Valid, valid, r.Violations, r.Details)
	}
	if valid != (r.ViolationsTotal() == 0) {
		t.Fatalf("valid %v with %d violations", r.Valid, r.ViolationsTotal())
	}
	if want == "" {
		return
	}
	for _, v := range r.Violations {
		if strings.Contains(v, want) {
			return
		}
	}
	t.Fatalf("%s: no violation contains %q: %q", r.Name, want, r.Violations)
}
