package history

import (
	"encoding/json"
	"fmt"
)

// Type is the kind of a history entry.
type Type string

// The entry types.
const (
	// Invoke starts an operation.
	Invoke Type = "invoke"
	// OK completes an operation that took effect.
	OK Type = "ok"
	// Fail completes an operation that certainly did not take effect.
	Fail Type = "fail"
	// Info completes an operation whose outcome is unknown: it may still
	// take effect.
	Info Type = "info"
)

// valid reports whether t is one of the four types.
func (t Type) valid() bool {
	switch t {
	case Invoke, OK, Fail, Info:
		return true
	}
	return false
}

// Function names (Op.F) the checkers know.
const (
	// FReserve is a single reserve call on permitd (client.Reserve).
	FReserve = "reserve"
	// FAcquire is a blocking acquire (client.Acquire): possibly several
	// reserves under new request IDs until one is granted.
	FAcquire = "acquire"
	// FPut creates or reconfigures a limit.
	FPut = "put"
	// FDelete removes a limit.
	FDelete = "delete"
	// FAPICall is a worker's call to the fake third-party API.
	FAPICall = "api-call"
	// FNemesis is a fault: invoke at its start, completion at its end.
	FNemesis = "nemesis"
	// FPutTemplate and FDeleteTemplate put and delete a template (value:
	// a LimitRequest whose Limit is the prefix).
	FPutTemplate    = "put-template"
	FDeleteTemplate = "delete-template"
)

// Op is one line of a history.
type Op struct {
	// Type is invoke, ok, fail or info.
	Type Type `json:"type"`
	// Process is the worker process (>= 0) or a nemesis (< 0).
	Process int `json:"process"`
	// Node is the permitd node the request was sent to (or answered
	// from), empty when not applicable.
	Node string `json:"node,omitempty"`
	// F is the function, one of the F* constants or another name.
	F string `json:"f"`
	// Value is the function's argument (invoke) or result (completion).
	Value json.RawMessage `json:"value,omitempty"`
	// RequestID is the idempotency key of a reserve, and the key the
	// worker spends at the fake API.
	RequestID string `json:"request_id,omitempty"`
	// TimeNanos is monotonic time since the run started.
	TimeNanos int64 `json:"time_ns"`
	// Index is the entry's position in the history, 0-based.
	Index int `json:"index"`
}

// String renders op compactly for violation messages.
func (op Op) String() string {
	s := fmt.Sprintf("#%d %s p%d %s t=%dns", op.Index, op.Type, op.Process, op.F, op.TimeNanos)
	if op.Node != "" {
		s += " node=" + op.Node
	}
	if op.RequestID != "" {
		s += " id=" + op.RequestID
	}
	if len(op.Value) > 0 {
		s += " " + string(op.Value)
	}
	return s
}

// IsCompletion reports whether op completes an operation (ok, fail, info).
func (op Op) IsCompletion() bool { return op.Type == OK || op.Type == Fail || op.Type == Info }

// DecodeValue unmarshals op.Value into v. An absent value leaves v
// unchanged.
func (op Op) DecodeValue(v any) error {
	if len(op.Value) == 0 {
		return nil
	}
	if err := json.Unmarshal(op.Value, v); err != nil {
		return fmt.Errorf("history: op #%d (%s %s): value %s: %w", op.Index, op.Type, op.F, op.Value, err)
	}
	return nil
}

// MarshalValue encodes v for Op.Value.
func MarshalValue(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("history: cannot encode value %T: %w", v, err)
	}
	return b, nil
}
