package history

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeClock returns 10, 20, 30, ... on successive calls.
func fakeClock() Clock {
	var n atomic.Int64
	return func() int64 { return n.Add(10) }
}

func TestWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, fakeClock())
	inv, err := w.Invoke(0, "a1", FReserve, "r1", ReserveRequest{Limit: "api", Permits: 1, MaxWaitNanos: 5})
	if err != nil {
		t.Fatal(err)
	}
	nem, err := w.Invoke(-1, "", FNemesis, "", NemesisValue{Fault: "partition", Targets: []string{"a1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Complete(inv, OK, "a2", "", ReserveResponse{Granted: true, WaitNanos: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Complete(nem, Info, "", "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Invoke(1, "a3", FReserve, "r2", ReserveRequest{Limit: "api", Permits: 1}); err != nil {
		t.Fatal(err)
	}
	if got := w.Outstanding(); len(got) != 1 || got[0].RequestID != "r2" {
		t.Fatalf("Outstanding = %v, want the r2 invoke", got)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	ops, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 5 {
		t.Fatalf("read %d ops, want 5", len(ops))
	}
	for i, op := range ops {
		if op.Index != i || op.TimeNanos != int64(10*(i+1)) {
			t.Errorf("op %d: index %d time %d", i, op.Index, op.TimeNanos)
		}
	}
	if ops[2].Node != "a2" || ops[2].RequestID != "r1" || ops[3].Node != "" {
		t.Errorf("completion fields: %v / %v", ops[2], ops[3])
	}
	var resp ReserveResponse
	if err := ops[2].DecodeValue(&resp); err != nil || !resp.Granted || resp.WaitNanos != 7 {
		t.Fatalf("decoded %+v, %v", resp, err)
	}

	pairs, err := Pair(ops)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 3 {
		t.Fatalf("%d operations, want 3", len(pairs))
	}
	if pairs[0].Outcome() != OK || pairs[1].Outcome() != Info || pairs[2].Outcome() != Info || pairs[2].Completed {
		t.Fatalf("outcomes %v %v %v", pairs[0].Outcome(), pairs[1].Outcome(), pairs[2].Outcome())
	}
	if r, ok := pairs[0].ReturnNanos(); !ok || r != 30 || pairs[0].CallNanos() != 10 {
		t.Fatalf("times %d %d %v", pairs[0].CallNanos(), r, ok)
	}
	if _, ok := pairs[2].ReturnNanos(); ok {
		t.Fatal("pending op has a return time")
	}
	if got := Filter(pairs, FReserve); len(got) != 2 {
		t.Fatalf("Filter reserve: %d ops", len(got))
	}
}

func TestWriterRejectsAndConcurrency(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, fakeClock())
	if _, err := w.Record(Op{Type: OK, Process: 3, F: FReserve}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("completion without invoke: %v", err)
	}
	if _, err := w.Complete(Op{Process: 1, F: FReserve}, Invoke, "", "", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("completion typed invoke: %v", err)
	}
	if _, err := w.Invoke(0, "", FReserve, "", func() {}); err == nil {
		t.Fatal("unencodable value accepted")
	}

	const procs, each = 4, 25
	var wg sync.WaitGroup
	for p := range procs {
		wg.Go(func() {
			for i := range each {
				inv, err := w.Invoke(p, "a1", FReserve, "", ReserveRequest{Limit: "x", Permits: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := w.Complete(inv, Fail, "", fmt.Sprintf("p%d-%d", p, i), ReserveResponse{RetryAfterNanos: 1}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	ops, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2*procs*each {
		t.Fatalf("read %d ops, want %d", len(ops), 2*procs*each)
	}
	pairs, err := Pair(ops)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range pairs {
		if o.Invoke.RequestID != "" || !strings.HasPrefix(o.RequestID(), "p") {
			t.Fatalf("request ID from the completion: invoke %q, pair %q", o.Invoke.RequestID, o.RequestID())
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterStickyError(t *testing.T) {
	w := NewWriter(failWriter{}, fakeClock())
	if _, err := w.Invoke(0, "", FReserve, "", nil); err != nil {
		t.Fatal(err) // buffered
	}
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Flush: %v", err)
	}
	if _, err := w.Invoke(1, "", FReserve, "", nil); err == nil {
		t.Fatal("write after failure accepted")
	}
}

func TestReadInvalid(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"bad json", `{"type":`, "line 1"},
		{"unknown field", `{"type":"invoke","process":0,"f":"reserve","time_ns":0,"index":0,"extra":1}`, "unknown field"},
		{"trailing", `{"type":"invoke","process":0,"f":"reserve","time_ns":0,"index":0} {}`, "trailing data"},
		{"bad type", `{"type":"done","process":0,"f":"reserve","time_ns":0,"index":0}`, `type "done"`},
		{"no f", `{"type":"invoke","process":0,"time_ns":0,"index":0}`, "empty f"},
		{"negative time", `{"type":"invoke","process":0,"f":"x","time_ns":-1,"index":0}`, "time_ns -1"},
		{"completion first", `{"type":"ok","process":0,"f":"reserve","time_ns":0,"index":0}`, "without an outstanding invoke"},
		{"double invoke", "{\"type\":\"invoke\",\"process\":0,\"f\":\"reserve\",\"time_ns\":0,\"index\":0}\n{\"type\":\"invoke\",\"process\":0,\"f\":\"reserve\",\"time_ns\":1,\"index\":1}", "one operation at a time"},
		{"two completions", "{\"type\":\"invoke\",\"process\":0,\"f\":\"reserve\",\"time_ns\":0,\"index\":0}\n{\"type\":\"ok\",\"process\":0,\"f\":\"reserve\",\"time_ns\":1,\"index\":1}\n{\"type\":\"info\",\"process\":0,\"f\":\"reserve\",\"time_ns\":2,\"index\":2}", "line 3"},
		{"wrong f", "{\"type\":\"invoke\",\"process\":0,\"f\":\"reserve\",\"time_ns\":0,\"index\":0}\n{\"type\":\"ok\",\"process\":0,\"f\":\"put\",\"time_ns\":1,\"index\":1}", "whose outstanding invoke"},
		{"request id changes", "{\"type\":\"invoke\",\"process\":0,\"f\":\"reserve\",\"request_id\":\"a\",\"time_ns\":0,\"index\":0}\n{\"type\":\"ok\",\"process\":0,\"f\":\"reserve\",\"request_id\":\"b\",\"time_ns\":1,\"index\":1}", "the same ID"},
		{"index not increasing", "{\"type\":\"invoke\",\"process\":0,\"f\":\"reserve\",\"time_ns\":0,\"index\":3}\n{\"type\":\"ok\",\"process\":0,\"f\":\"reserve\",\"time_ns\":1,\"index\":3}", "strictly increasing"},
		{"time going back", "{\"type\":\"invoke\",\"process\":0,\"f\":\"reserve\",\"time_ns\":5,\"index\":0}\n{\"type\":\"ok\",\"process\":0,\"f\":\"reserve\",\"time_ns\":4,\"index\":1}", "non-decreasing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestReadLongLineAndBlanks(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	text := "\n{\"type\":\"invoke\",\"process\":0,\"f\":\"put\",\"value\":{\"limit\":\"" + long + "\"},\"time_ns\":0,\"index\":0}\n\n"
	ops, err := Read(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var v LimitRequest
	if err := ops[0].DecodeValue(&v); err != nil || len(v.Limit) != len(long) {
		t.Fatalf("long line: %d bytes, %v", len(v.Limit), err)
	}
	huge := "{\"type\":\"invoke\",\"process\":0,\"f\":\"put\",\"value\":\"" + strings.Repeat("y", maxLineBytes) + "\",\"time_ns\":0,\"index\":0}"
	if _, err := Read(strings.NewReader(huge)); err == nil {
		t.Fatal("over-long line accepted")
	}
}

func TestReserveResponseRefused(t *testing.T) {
	tests := []struct {
		r    ReserveResponse
		want bool
	}{
		{ReserveResponse{RetryAfterNanos: 5}, true},
		{ReserveResponse{Granted: true}, false},
		{ReserveResponse{Error: "limit \"x\": no permit", RetryAfterNanos: 5}, true},
		{ReserveResponse{Error: "503"}, false},
		{ReserveResponse{}, false},
	}
	for _, tt := range tests {
		if got := tt.r.Refused(); got != tt.want {
			t.Errorf("%+v.Refused() = %v", tt.r, got)
		}
	}
}
