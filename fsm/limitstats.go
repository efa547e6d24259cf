package fsm

import (
	"slices"
	"strings"

	"github.com/permitd/permitd/bucket"
)

// limitstats.go: the read the per-limit metrics are made of (one
// consistent view of many limits, taken under one read lock), and what a
// node that observes applied entries needs to name them: the entry just
// applied and a lease's group. Nothing here changes the state.

// LimitStats is one limit's numbers for monitoring, all read at the same
// applied index.
type LimitStats struct {
	// Info is the limit's view (its counters, configuration, lease
	// summary).
	Info LimitInfo
	// Concurrency reports an in-flight cap (bucket.Concurrency): then
	// InFlightPermits are the permits its holds keep at the state's
	// cluster time (LastNowNanos) and MaxInFlightPermits its cap.
	Concurrency                         bool
	InFlightPermits, MaxInFlightPermits int64
	// OpenReservations counts the live reservations with a part on the
	// limit that were granted and are neither settled nor final.
	OpenReservations int
	// LeaseOutstandingPermits (leased limits) are the permits its leases
	// hold: current grants and lingering given-away permits.
	LeaseOutstandingPermits int64
}

// LimitStats returns the stats of the first maxLimits explicit limits by
// name (all of them if maxLimits < 0), read under one lock so that they
// are consistent with each other, and the number of explicit limits there
// are. Keys created from templates are not among them: TemplateStats
// counts them as families.
func (f *FSM) LimitStats(maxLimits int) (stats []LimitStats, total int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := &f.st
	total = s.names.len() - s.keys.Len()
	n := total
	if maxLimits >= 0 {
		n = min(n, maxLimits)
	}
	stats = make([]LimitStats, n)
	open := s.reservations.open(s.lastNowNanos)
	i := 0
	visit := func(l *limit) (skipTo string) {
		if l.templated() {
			if prefix := l.templatePrefix(); s.explicitPrefixes[prefix] == 0 {
				// No explicit limit among the keys of its prefix: skip
				// them all. Names "prefix:..." sort before "prefix;"
				// (';' follows ':').
				return prefix + ";"
			}
			return ""
		}
		st := &stats[i]
		i++
		st.Info = l.info(s.lastNowNanos, open[l.name])
		st.InFlightPermits, st.OpenReservations = st.Info.InFlightPermits, st.Info.OpenReservations
		if l.conf.cfg.Spec.Algorithm == bucket.Concurrency {
			st.Concurrency = true
			st.MaxInFlightPermits = l.conf.cfg.Spec.MaxInFlight
		}
		if l.pool != nil {
			st.LeaseOutstandingPermits = l.pool.outstanding
		}
		return ""
	}
	for from := ""; i < n; {
		skipTo := ""
		s.names.from(from, func(l *limit) bool {
			if i == n {
				return false
			}
			skipTo = visit(l)
			return skipTo == ""
		})
		if skipTo == "" {
			break
		}
		from = skipTo
	}
	return stats, total
}

// maybeKeyName returns the limit called name if a template has name's
// prefix (it may be a templated key), else nil: the cheap test that lets
// a walk of every name skip templated keys without looking every name up.
func (s *state) maybeKeyName(name string) *limit {
	if len(s.templates) == 0 {
		return nil
	}
	i := strings.IndexByte(name, ':')
	if i <= 0 || s.templates[name[:i]] == nil {
		return nil
	}
	return s.limits[name]
}

// AppliedEntry returns the entry the latest Apply decoded (its command as
// applied, the zero Entry before any). It is the FSM's working copy: only
// the goroutine that calls Apply may read it, and only until its next
// Apply (a node observing what it applies reads it right after Apply).
func (f *FSM) AppliedEntry() *Entry { return &f.scratch }

// LeaseGroup returns the group of lease id on the limit called name, and
// false if the limit is not leased or has no such lease.
func (f *FSM) LeaseGroup(name string, id uint64) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.st.limits[name]
	if !ok || l.pool == nil {
		return "", false
	}
	ls := l.pool.leases
	i, found := slices.BinarySearchFunc(ls, id, func(x *lease, id uint64) int {
		switch {
		case x.id < id:
			return -1
		case x.id > id:
			return 1
		}
		return 0
	})
	if !found {
		return "", false
	}
	return ls[i].group, true
}
