package history

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	nem, err := w.Invoke(-1, "", FNemesis, "", NemesisValue{Fault: "partition", Targets: []string{"a1"}})
	require.NoError(t, err)
	_, err = w.Complete(inv, OK, "a2", "", ReserveResponse{Granted: true, WaitNanos: 7})
	require.NoError(t, err)
	_, err = w.Complete(nem, Info, "", "", nil)
	require.NoError(t, err)
	_, err = w.Invoke(1, "a3", FReserve, "r2", ReserveRequest{Limit: "api", Permits: 1})
	require.NoError(t, err)
	got := w.Outstanding()
	require.Len(t, got, 1, "Outstanding = %v, want the r2 invoke", got)
	require.Equal(t, "r2", got[0].RequestID, "Outstanding = %v, want the r2 invoke", got)
	require.NoError(t, w.Flush())
	ops, err := Read(&buf)
	require.NoError(t, err)
	require.Len(t, ops, 5)
	for i, op := range ops {
		assert.Equal(t, i, op.Index, "op %d: index", i)
		assert.Equal(t, int64(10*(i+1)), op.TimeNanos, "op %d: time", i)
	}
	assert.Equal(t, "a2", ops[2].Node, "completion fields: %v", ops[2])
	assert.Equal(t, "r1", ops[2].RequestID, "completion fields: %v", ops[2])
	assert.Empty(t, ops[3].Node, "completion fields: %v", ops[3])
	var resp ReserveResponse
	require.NoError(t, ops[2].DecodeValue(&resp))
	require.True(t, resp.Granted, "decoded %+v", resp)
	require.Equal(t, int64(7), resp.WaitNanos, "decoded %+v", resp)

	pairs, err := Pair(ops)
	require.NoError(t, err)
	require.Len(t, pairs, 3)
	require.Equal(t, []Type{OK, Info, Info}, []Type{pairs[0].Outcome(), pairs[1].Outcome(), pairs[2].Outcome()}, "outcomes")
	require.False(t, pairs[2].Completed, "the pending op is completed")
	r, ok := pairs[0].ReturnNanos()
	require.True(t, ok, "no return time")
	require.Equal(t, int64(30), r, "return time")
	require.Equal(t, int64(10), pairs[0].CallNanos(), "call time")
	_, ok = pairs[2].ReturnNanos()
	require.False(t, ok, "pending op has a return time")
	require.Len(t, Filter(pairs, FReserve), 2, "Filter reserve")
}

func TestWriterRejectsAndConcurrency(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, fakeClock())
	_, err := w.Record(Op{Type: OK, Process: 3, F: FReserve})
	require.ErrorIs(t, err, ErrInvalid, "completion without invoke")
	_, err = w.Complete(Op{Process: 1, F: FReserve}, Invoke, "", "", nil)
	require.ErrorIs(t, err, ErrInvalid, "completion typed invoke")
	_, err = w.Invoke(0, "", FReserve, "", func() {})
	require.Error(t, err, "unencodable value accepted")

	const procs, each = 4, 25
	var wg sync.WaitGroup
	for p := range procs {
		wg.Go(func() {
			for i := range each {
				inv, err := w.Invoke(p, "a1", FReserve, "", ReserveRequest{Limit: "x", Permits: 1})
				if !assert.NoError(t, err) {
					return
				}
				if _, err := w.Complete(inv, Fail, "", fmt.Sprintf("p%d-%d", p, i), ReserveResponse{RetryAfterNanos: 1}); !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, w.Flush())
	ops, err := Read(&buf)
	require.NoError(t, err)
	require.Len(t, ops, 2*procs*each)
	pairs, err := Pair(ops)
	require.NoError(t, err)
	for _, o := range pairs {
		require.Empty(t, o.Invoke.RequestID, "request ID from the completion: invoke")
		require.True(t, strings.HasPrefix(o.RequestID(), "p"), "request ID from the completion: pair %q", o.RequestID())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterStickyError(t *testing.T) {
	w := NewWriter(failWriter{}, fakeClock())
	_, err := w.Invoke(0, "", FReserve, "", nil)
	require.NoError(t, err) // buffered
	require.ErrorContains(t, w.Flush(), "disk full")
	_, err = w.Invoke(1, "", FReserve, "", nil)
	require.Error(t, err, "write after failure accepted")
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
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestReadLongLineAndBlanks(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	text := "\n{\"type\":\"invoke\",\"process\":0,\"f\":\"put\",\"value\":{\"limit\":\"" + long + "\"},\"time_ns\":0,\"index\":0}\n\n"
	ops, err := Read(strings.NewReader(text))
	require.NoError(t, err)
	var v LimitRequest
	require.NoError(t, ops[0].DecodeValue(&v), "long line")
	require.Len(t, v.Limit, len(long), "long line")
	huge := "{\"type\":\"invoke\",\"process\":0,\"f\":\"put\",\"value\":\"" + strings.Repeat("y", maxLineBytes) + "\",\"time_ns\":0,\"index\":0}"
	_, err = Read(strings.NewReader(huge))
	require.Error(t, err, "over-long line accepted")
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
		assert.Equal(t, tt.want, tt.r.Refused(), "%+v.Refused()", tt.r)
	}
}
