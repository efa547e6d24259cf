package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Clock returns monotonic nanoseconds since the start of the run.
type Clock func() int64

// SinceStart returns a Clock counting from start. Give the same start to
// the fake API (fakeapi.Config.Start) to share one time base.
func SinceStart(start time.Time) Clock {
	return func() int64 { return int64(time.Since(start)) }
}

// Writer appends ops to a history as JSON lines. It is safe for concurrent
// use; output is buffered until Flush or Close.
type Writer struct {
	mu    sync.Mutex
	dst   *bufio.Writer
	enc   *json.Encoder
	clock Clock
	next  int
	check *validator
	err   error // sticky: the first write error
}

// NewWriter returns a Writer to dst that stamps ops with clock.
func NewWriter(dst io.Writer, clock Clock) *Writer {
	bw := bufio.NewWriterSize(dst, 64<<10)
	return &Writer{dst: bw, enc: json.NewEncoder(bw), clock: clock, check: newValidator()}
}

// Record stamps op with the next Index and the clock's time, checks it
// against the history so far (a completion must match an outstanding
// invoke of the same process and function) and appends it. It returns the
// op as written. An op that breaks the rules is not written; a write error
// is returned now and by every later call.
func (w *Writer) Record(op Op) (Op, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return Op{}, w.err
	}
	op.Index = w.next
	op.TimeNanos = w.clock()
	if err := w.check.add(op); err != nil {
		return Op{}, err
	}
	w.next++
	if err := w.enc.Encode(op); err != nil {
		w.err = fmt.Errorf("history: writing op #%d: %w", op.Index, err)
		return Op{}, w.err
	}
	return op, nil
}

// Invoke records the invoke of f by process on node with value v and
// request ID reqID. It returns the op as written.
func (w *Writer) Invoke(process int, node, f, reqID string, v any) (Op, error) {
	return w.record(Invoke, process, node, f, reqID, v)
}

// Complete records the completion (ok, fail or info) of the operation
// started by inv, with value v. Node defaults to the invoke's when empty,
// and reqID to the invoke's request ID (permitd's client picks the ID, so a
// worker learns it only from the answer: pass Grant.RequestID here).
func (w *Writer) Complete(inv Op, typ Type, node, reqID string, v any) (Op, error) {
	if typ == Invoke {
		return Op{}, fmt.Errorf("%w: completion of op #%d with type invoke; allowed: ok, fail, info", ErrInvalid, inv.Index)
	}
	if node == "" {
		node = inv.Node
	}
	if reqID == "" {
		reqID = inv.RequestID
	}
	return w.record(typ, inv.Process, node, inv.F, reqID, v)
}

func (w *Writer) record(typ Type, process int, node, f, reqID string, v any) (Op, error) {
	op := Op{Type: typ, Process: process, Node: node, F: f, RequestID: reqID}
	if v != nil {
		b, err := MarshalValue(v)
		if err != nil {
			return Op{}, err
		}
		op.Value = b
	}
	return w.Record(op)
}

// Flush writes buffered ops to the destination.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if err := w.dst.Flush(); err != nil {
		w.err = fmt.Errorf("history: flushing: %w", err)
	}
	return w.err
}

// Outstanding returns the invokes that have no completion yet, in index
// order. A runner records them as info (or leaves them: readers treat
// them as info) when it stops.
func (w *Writer) Outstanding() []Op {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Op, 0, len(w.check.open))
	for _, op := range w.check.open {
		out = append(out, op)
	}
	sortByIndex(out)
	return out
}
