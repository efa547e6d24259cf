package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
)

// sortedCalls returns the calls sorted by receive time (then sequence).
func sortedCalls(calls []fakeapi.Call) []fakeapi.Call {
	out := slices.Clone(calls)
	slices.SortStableFunc(out, func(a, b fakeapi.Call) int {
		if c := cmp.Compare(a.TimeNanos, b.TimeNanos); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return out
}

// dur renders nanoseconds as a duration for messages.
func dur(ns int64) string { return time.Duration(ns).String() }

// callString renders a call for messages.
func callString(c fakeapi.Call) string {
	if c.Permit != nil {
		return fmt.Sprintf("call #%d (%s, id %q, permit %d) at %s", c.Seq, c.Worker, c.RequestID, *c.Permit, dur(c.TimeNanos))
	}
	return fmt.Sprintf("call #%d (%s, id %q) at %s", c.Seq, c.Worker, c.RequestID, dur(c.TimeNanos))
}
