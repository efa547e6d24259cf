package history

// Operation is an invoke together with its completion, if any.
type Operation struct {
	// Invoke starts the operation.
	Invoke Op
	// Completion ends it; meaningful only when Completed.
	Completion Op
	// Completed is false for an invoke the history never completed.
	Completed bool
}

// Outcome is the completion's type, or Info for an operation never
// completed.
func (o Operation) Outcome() Type {
	if !o.Completed {
		return Info
	}
	return o.Completion.Type
}

// F is the operation's function.
func (o Operation) F() string { return o.Invoke.F }

// Process is the operation's process.
func (o Operation) Process() int { return o.Invoke.Process }

// RequestID is the invoke's request ID, or the completion's when the
// invoke has none.
func (o Operation) RequestID() string {
	if o.Invoke.RequestID == "" && o.Completed {
		return o.Completion.RequestID
	}
	return o.Invoke.RequestID
}

// CallNanos is the invoke's time.
func (o Operation) CallNanos() int64 { return o.Invoke.TimeNanos }

// ReturnNanos is the completion's time and true, or 0 and false when the
// operation was never completed.
func (o Operation) ReturnNanos() (int64, bool) {
	if !o.Completed {
		return 0, false
	}
	return o.Completion.TimeNanos, true
}

// Pair validates ops and joins every invoke with its completion. The
// result is in invoke order.
func Pair(ops []Op) ([]Operation, error) {
	if err := Validate(ops); err != nil {
		return nil, err
	}
	var out []Operation
	open := make(map[int]int) // process → position in out
	for _, op := range ops {
		if op.Type == Invoke {
			open[op.Process] = len(out)
			out = append(out, Operation{Invoke: op})
			continue
		}
		i := open[op.Process]
		delete(open, op.Process)
		out[i].Completion, out[i].Completed = op, true
	}
	return out, nil
}

// Filter returns the operations whose function is f.
func Filter(ops []Operation, f string) []Operation {
	var out []Operation
	for _, o := range ops {
		if o.F() == f {
			out = append(out, o)
		}
	}
	return out
}
