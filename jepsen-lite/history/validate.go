package history

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error about a malformed history.
var ErrInvalid = errors.New("history: invalid history")

// validator checks ops one at a time against the rules of a history:
// known types, a function name, strictly increasing indexes, non-decreasing
// times, at most one outstanding operation per process, and completions
// that match an outstanding invoke of the same process and function (and
// request ID, when both carry one).
type validator struct {
	open      map[int]Op
	seen      bool
	lastIndex int
	lastTime  int64
}

func newValidator() *validator { return &validator{open: make(map[int]Op)} }

// add checks op and, if it is valid, records it.
func (v *validator) add(op Op) error {
	if !op.Type.valid() {
		return fmt.Errorf("%w: op #%d: type %q; allowed: invoke, ok, fail, info", ErrInvalid, op.Index, op.Type)
	}
	if op.F == "" {
		return fmt.Errorf("%w: op #%d: empty f; allowed: a function name such as %q", ErrInvalid, op.Index, FReserve)
	}
	if op.TimeNanos < 0 {
		return fmt.Errorf("%w: op #%d: time_ns %d; allowed: >= 0 (since the run started)", ErrInvalid, op.Index, op.TimeNanos)
	}
	if v.seen {
		if op.Index <= v.lastIndex {
			return fmt.Errorf("%w: op #%d after op #%d; allowed: strictly increasing indexes", ErrInvalid, op.Index, v.lastIndex)
		}
		if op.TimeNanos < v.lastTime {
			return fmt.Errorf("%w: op #%d at %d ns after an op at %d ns; allowed: non-decreasing times", ErrInvalid, op.Index, op.TimeNanos, v.lastTime)
		}
	}
	inv, outstanding := v.open[op.Process]
	switch {
	case op.Type == Invoke && outstanding:
		return fmt.Errorf("%w: op #%d: process %d invokes %s while op #%d (%s) is outstanding; allowed: one operation at a time per process", ErrInvalid, op.Index, op.Process, op.F, inv.Index, inv.F)
	case op.Type == Invoke:
		v.open[op.Process] = op
	case !outstanding:
		return fmt.Errorf("%w: op #%d: %s completion of %s by process %d without an outstanding invoke", ErrInvalid, op.Index, op.Type, op.F, op.Process)
	case inv.F != op.F:
		return fmt.Errorf("%w: op #%d: completion of %s by process %d, whose outstanding invoke #%d is %s", ErrInvalid, op.Index, op.F, op.Process, inv.Index, inv.F)
	case inv.RequestID != "" && op.RequestID != "" && inv.RequestID != op.RequestID:
		return fmt.Errorf("%w: op #%d: completion with request_id %q of invoke #%d with request_id %q; allowed: the same ID, or none on one side", ErrInvalid, op.Index, op.RequestID, inv.Index, inv.RequestID)
	default:
		delete(v.open, op.Process)
	}
	v.seen, v.lastIndex, v.lastTime = true, op.Index, op.TimeNanos
	return nil
}

// Validate checks that ops form a valid history (see the package doc).
// Invokes left without a completion are allowed; they count as info.
func Validate(ops []Op) error {
	v := newValidator()
	for _, op := range ops {
		if err := v.add(op); err != nil {
			return err
		}
	}
	return nil
}
