package fsm

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
)

const sec = int64(time.Second)

// strict compiles a strict limit of rate permits per second that may reserve
// maxReserved permits ahead.
func strict(t testing.TB, rate float64, maxReserved int64) bucket.Config {
	t.Helper()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: rate, Per: time.Second, MaxReserved: maxReserved})
	if err != nil {
		t.Fatalf("Compile strict: %v", err)
	}
	return cfg
}

// bursty compiles a SmoothBursty limit of rate permits per second.
func bursty(t testing.TB, rate float64) bucket.Config {
	t.Helper()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Bursty, Rate: rate, Per: time.Second})
	if err != nil {
		t.Fatalf("Compile bursty: %v", err)
	}
	return cfg
}

// compile compiles any spec.
func compile(t testing.TB, s bucket.Spec) bucket.Config {
	t.Helper()
	cfg, err := bucket.Compile(s)
	if err != nil {
		t.Fatalf("Compile %+v: %v", s, err)
	}
	return cfg
}

// harness feeds entries to one FSM with consecutive raft indexes.
type harness struct {
	t     testing.TB
	f     *FSM
	index uint64
	// check, when set, runs after every applied entry (the lease tests
	// check the lease book's invariants there).
	check func(testing.TB, *FSM)
}

func newHarness(t testing.TB) *harness { return &harness{t: t, f: New()} }

func (h *harness) apply(data []byte) interface{} {
	h.t.Helper()
	h.index++
	res := h.f.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data})
	if h.check != nil {
		h.check(h.t, h.f)
	}
	return res
}

func (h *harness) put(nowNanos int64, name string, cfg bucket.Config) PutResult {
	h.t.Helper()
	b, err := AppendPut(nil, at(nowNanos), PutLimit{Name: name, Config: cfg})
	if err != nil {
		h.t.Fatalf("AppendPut(%q): %v", name, err)
	}
	res, ok := h.apply(b).(PutResult)
	if !ok {
		h.t.Fatalf("put %q: result is not a PutResult", name)
	}
	return res
}

func (h *harness) del(nowNanos int64, name string) DeleteResult {
	h.t.Helper()
	return h.delete(nowNanos, DeleteLimit{Name: name})
}

func (h *harness) forceDel(nowNanos int64, name string) DeleteResult {
	h.t.Helper()
	return h.delete(nowNanos, DeleteLimit{Name: name, Force: true})
}

func (h *harness) delete(nowNanos int64, d DeleteLimit) DeleteResult {
	h.t.Helper()
	b, err := AppendDelete(nil, at(nowNanos), d)
	if err != nil {
		h.t.Fatalf("AppendDelete(%+v): %v", d, err)
	}
	res, ok := h.apply(b).(DeleteResult)
	if !ok {
		h.t.Fatalf("delete %+v: result is not a DeleteResult", d)
	}
	return res
}

func (h *harness) reserve(nowNanos int64, rs ...Reserve) []ReserveResult {
	h.t.Helper()
	b, err := AppendReserveBatch(nil, at(nowNanos), rs)
	if err != nil {
		h.t.Fatalf("AppendReserveBatch: %v", err)
	}
	res, ok := h.apply(b).([]ReserveResult)
	if !ok || len(res) != len(rs) {
		h.t.Fatalf("reserve batch of %d: result %#v", len(rs), res)
	}
	// OnArrival is checked by the tests of arrival stamps
	// (TestStampFromAnotherTermPassesNoTime); the others compare the rest.
	for i := range res {
		res[i].OnArrival = false
	}
	return res
}

func (h *harness) reserve1(nowNanos int64, r Reserve) ReserveResult {
	h.t.Helper()
	return h.reserve(nowNanos, r)[0]
}

func (h *harness) noop(nowNanos int64) {
	h.t.Helper()
	if res := h.apply(AppendNoop(nil, at(nowNanos))); res != nil {
		h.t.Fatalf("noop returned %#v, want nil", res)
	}
}

// rsv builds a reserve.
func rsv(limit string, permits, maxWaitNanos int64, id string) Reserve {
	return Reserve{Limit: limit, Permits: permits, MaxWaitNanos: maxWaitNanos, RequestID: id}
}

// expected maps a pacer decision at nowNanos to the result the FSM must
// return: the test's own statement of the mapping.
func expected(d bucket.Decision, nowNanos int64) ReserveResult {
	if !d.Granted {
		return ReserveResult{Status: Refused, RetryAfterNanos: max(1, d.AtNanos-nowNanos), NowNanos: nowNanos}
	}
	res := ReserveResult{Status: Granted, WaitNanos: d.AtNanos - nowNanos, SpacingNanos: d.SpacingNanos, NowNanos: nowNanos}
	if d.ExpiresAtNanos != 0 {
		res.ExpiresInNanos = d.ExpiresAtNanos - nowNanos
	}
	return res
}

// mustPanic runs fn and returns the text of its panic, failing if it does
// not panic.
func mustPanic(t *testing.T, fn func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("did not panic")
		}
		if err, ok := r.(error); ok {
			msg = err.Error()
		} else {
			t.Fatalf("panic value %T %v is not an error", r, r)
		}
	}()
	fn()
	return ""
}

// at stamps an entry at nowNanos in term 1, the term the harness appends
// in.
func at(nowNanos int64) Stamp { return Stamp{Nanos: nowNanos, Term: 1} }
