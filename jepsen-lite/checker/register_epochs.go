package checker

import (
	"cmp"
	"fmt"
	"slices"
)

// RegisterChange is a put that reconfigured a strict limit during the
// history, with the same algorithm: the register keeps its next free slot
// N, and the put's interval and max_reserved apply to every decision after
// it (README, "Algorithms"; bucket.StrictPacer.Reconfigure).
type RegisterChange struct {
	// OpIndex is the put's invoke index (for messages).
	OpIndex int
	// CallNanos is the put's invoke time. ReturnNanos is its ok
	// completion's time, or -1 when its outcome is unknown (info, or never
	// completed): it may take effect at any time after its invoke.
	CallNanos, ReturnNanos int64
	// IntervalNanos and MaxReserved are the configuration the put sent.
	IntervalNanos, MaxReserved int64
}

// known reports whether the put's outcome is known (it completed ok).
func (c RegisterChange) known() bool { return c.ReturnNanos >= 0 }

// EpochReport is one configuration epoch of a limit, as Linearizability
// checked it (Details["epochs"]).
type EpochReport struct {
	// Key names the epoch in Details["per_limit"]: the limit's name for
	// the first epoch, "limit@epochK" for the others.
	Key string `json:"key"`
	// FromNanos and ToNanos bound the epoch: an operation belongs to it
	// if it was invoked after FromNanos and returned before ToNanos (-1:
	// the start or the end of the history).
	FromNanos int64 `json:"from_ns"`
	ToNanos   int64 `json:"to_ns"`
	// IntervalNanos, MaxReserved and Fresh are the model's specification
	// in the epoch.
	IntervalNanos int64 `json:"interval_ns"`
	MaxReserved   int64 `json:"max_reserved"`
	Fresh         bool  `json:"fresh"`
	// Ops and Pending count the operations checked in the epoch.
	Ops     int `json:"ops"`
	Pending int `json:"pending"`
	// Result is porcupine's verdict ("Ok", "Illegal", "Unknown"), or
	// "skipped" with SkippedWhy.
	Result     string `json:"result"`
	SkippedWhy string `json:"skipped_why,omitempty"`
}

// registerEpoch is one stretch of a limit's history with one known
// configuration.
type registerEpoch struct {
	report EpochReport
	spec   RegisterSpec
	h      *RegisterHistory
}

// splitEpochs cuts a limit's history at its reconfigurations (spec.Changes).
// Every ok put is a window [invoke, completion] during which the
// configuration is in flux; an epoch is a stretch between two such windows
// (overlapping windows merge), with the configuration of the last put
// before it. An operation belongs to an epoch when it was invoked after
// the epoch began and returned before it ended (both with tol of margin);
// one that overlaps a put is dropped: it may have been decided with
// either configuration. A pending operation may take effect at any later
// time, so it is pending in every epoch that ends after its invoke. Each
// epoch but the first starts from an unknown state (not Fresh: the
// register keeps N across the put, and the operations dropped around the
// put may have moved it). A put whose outcome is unknown may take effect
// at any time after its invoke: unless it put the epoch's own
// configuration, an epoch is checked only up to that invoke, and the rest
// of it is reported as skipped (its operations unchecked). It returns the
// epochs and how many operations it dropped.
func splitEpochs(h *RegisterHistory, spec RegisterSpec, tol int64) ([]registerEpoch, int) {
	var known, unknown []RegisterChange
	for _, c := range spec.Changes {
		if c.known() {
			known = append(known, c)
		} else {
			unknown = append(unknown, c)
		}
	}
	slices.SortStableFunc(known, func(a, b RegisterChange) int { return cmp.Compare(a.CallNanos, b.CallNanos) })
	groups := mergePutWindows(known)
	var epochs []registerEpoch
	for k := 0; k <= len(groups); k++ {
		e := newEpoch(h, spec, groups, k)
		if e.report.SkippedWhy != "" {
			epochs = append(epochs, e)
			continue
		}
		epochs = append(epochs, cutAtUnknownPut(h, e, unknown, tol)...)
	}
	dropped := assignOps(h, epochs, tol)
	return epochs, dropped
}

// putGroup is a run of overlapping put windows [invoke, completion]; its
// configuration is ambiguous if its puts differ.
type putGroup struct {
	from, to  int64
	i, m      int64
	ambiguous bool
	last      int // the last put's op index
}

// mergePutWindows merges the overlapping windows of the known puts (sorted
// by invoke time).
func mergePutWindows(known []RegisterChange) []putGroup {
	var groups []putGroup
	for _, c := range known {
		if n := len(groups); n > 0 && c.CallNanos <= groups[n-1].to {
			g := &groups[n-1]
			g.to = max(g.to, c.ReturnNanos)
			g.ambiguous = g.ambiguous || g.i != c.IntervalNanos || g.m != c.MaxReserved
			g.last = c.OpIndex
			continue
		}
		groups = append(groups, putGroup{from: c.CallNanos, to: c.ReturnNanos, i: c.IntervalNanos, m: c.MaxReserved, last: c.OpIndex})
	}
	return groups
}

// newEpoch is epoch k, between put groups k-1 and k (the first: from the
// history's start with spec; the last: to its end), without operations.
func newEpoch(h *RegisterHistory, spec RegisterSpec, groups []putGroup, k int) registerEpoch {
	e := registerEpoch{spec: RegisterSpec{IntervalNanos: spec.IntervalNanos, MaxReserved: spec.MaxReserved, Fresh: spec.Fresh}}
	e.report = EpochReport{Key: h.Limit, FromNanos: -1, ToNanos: -1}
	if k > 0 {
		g := groups[k-1]
		e.spec = RegisterSpec{IntervalNanos: g.i, MaxReserved: g.m}
		e.report.Key = fmt.Sprintf("%s@epoch%d", h.Limit, k)
		e.report.FromNanos = g.to
		if g.ambiguous {
			e.report.SkippedWhy = fmt.Sprintf("concurrent puts up to op #%d set different configurations: which one is in effect is unknown", g.last)
		}
	}
	if k < len(groups) {
		e.report.ToNanos = groups[k].from
	}
	e.report.IntervalNanos, e.report.MaxReserved, e.report.Fresh = e.spec.IntervalNanos, e.spec.MaxReserved, e.spec.Fresh
	e.h = &RegisterHistory{Limit: h.Limit, Clients: h.Clients}
	return e
}

// cutAtUnknownPut returns epoch e, cut at the earliest put of unknown
// outcome, invoked before the epoch ends, that would change its
// configuration: from its invoke on, the configuration is unknown, and
// that rest of e is skipped.
func cutAtUnknownPut(h *RegisterHistory, e registerEpoch, unknown []RegisterChange, tol int64) []registerEpoch {
	from, to := epochBounds(e.report, tol)
	var cut *RegisterChange
	for i, u := range unknown {
		if u.CallNanos < to && (u.IntervalNanos != e.spec.IntervalNanos || u.MaxReserved != e.spec.MaxReserved) && (cut == nil || u.CallNanos < cut.CallNanos) {
			cut = &unknown[i]
		}
	}
	if cut == nil {
		return []registerEpoch{e}
	}
	var epochs []registerEpoch
	why := fmt.Sprintf("put op #%d (interval %s, max_reserved %d) has an unknown outcome: it may have taken effect at any time after %s",
		cut.OpIndex, dur(cut.IntervalNanos), cut.MaxReserved, dur(cut.CallNanos))
	rest := e
	rest.h = &RegisterHistory{Limit: h.Limit, Clients: h.Clients}
	rest.report.Key += fmt.Sprintf(" after op #%d", cut.OpIndex)
	rest.report.SkippedWhy = why
	if cut.CallNanos > from {
		e.report.ToNanos = cut.CallNanos
		epochs = append(epochs, e)
		rest.report.FromNanos = cut.CallNanos
	}
	return append(epochs, rest)
}

// assignOps puts each of h's operations in the epoch it lies in and each
// pending operation in every epoch that ends after its invoke, and counts
// the epochs' operations. It returns how many operations lie in no epoch.
func assignOps(h *RegisterHistory, epochs []registerEpoch, tol int64) int {
	dropped := 0
	for _, op := range h.Ops {
		placed := false
		for i := range epochs {
			from, to := epochBounds(epochs[i].report, tol)
			if op.Call > from && op.Return < to {
				epochs[i].h.Ops = append(epochs[i].h.Ops, op)
				placed = true
				break
			}
		}
		if !placed {
			dropped++
		}
	}
	for _, p := range h.Pending {
		for i := range epochs {
			if _, to := epochBounds(epochs[i].report, tol); p.CallNanos < to {
				epochs[i].h.Pending = append(epochs[i].h.Pending, p)
			}
		}
	}
	for i := range epochs {
		epochs[i].report.Ops, epochs[i].report.Pending = len(epochs[i].h.Ops), len(epochs[i].h.Pending)
		if i == 0 {
			epochs[i].h.Replays = h.Replays
		}
	}
	return dropped
}

// epochBounds returns the open interval (from, to) an operation must lie
// in, margins included, to belong to the epoch.
func epochBounds(r EpochReport, tol int64) (from, to int64) {
	from, to = negInf, posInf
	if r.FromNanos >= 0 {
		from = r.FromNanos + tol
	}
	if r.ToNanos >= 0 {
		to = r.ToNanos - tol
	}
	return from, to
}
