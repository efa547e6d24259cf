package fsm

import (
	"maps"
	"slices"

	"github.com/permitd/permitd/bucket"
)

// walk_caps_test.go: the reachable-state walk's check of the in-flight
// caps' bound by the register's own accounting, its live reservations:
// at every instant x, the enforced permits held on a name (granted by a
// reservation served at or before x, neither expired nor released by x),
// whatever incarnation of the limit granted them (reservation.go,
// "Holds"), number at most the MaxInFlight in force when the last of them
// was granted. The walk keeps a ledger of every enforced hold it sees
// granted (from the register's records after each step) with the instants
// of its releases, and checks held(x) at every instant a hold is served:
// the held permits only grow there.

// capLedger is the walk's record of the enforced holds granted on every
// name, by reservation.
type capLedger struct {
	holds map[uint64][]*ledgerHold
	// lastNow is the register's time after the previous step,
	// lastNowBefore the one before the step being checked.
	lastNow, lastNowBefore int64
}

// ledgerHold is one enforced hold of a reservation on one limit.
type ledgerHold struct {
	limit               string
	permits             int64
	servedAt, expiresAt int64
	releases            []ledgerRelease
	released            int64
	// maxInFlight is the cap in force when the hold was granted (the
	// larger before and after the step that granted it); step orders the
	// grants, and bornIndex is the pacer incarnation that granted it.
	maxInFlight int64
	step        int
	bornIndex   uint64
}

type ledgerRelease struct{ atNanos, permits int64 }

// heldAt returns the permits h holds at instant x.
func (h *ledgerHold) heldAt(x int64) int64 {
	if x < h.servedAt || x >= h.expiresAt {
		return 0
	}
	n := h.permits
	for _, r := range h.releases {
		if r.atNanos <= x {
			n -= r.permits
		}
	}
	return n
}

// caps returns every enforced (not shadow) cap's MaxInFlight.
func (w *walker) caps() map[string]int64 {
	m := map[string]int64{}
	for name, l := range w.f.st.limits {
		if l.conf.cfg.Spec.Algorithm == bucket.Concurrency && !l.shadow {
			m[name] = l.conf.cfg.Spec.MaxInFlight
		}
	}
	return m
}

// checkCapBound updates the ledger with what step number step (caps
// before it: capsBefore) granted and released, and checks the bound at
// every instant a hold on a name that got a new grant is served. It
// labels a check that counted holds of two incarnations of one limit
// ("cap-carried").
func (w *walker) checkCapBound(kind string, step int, capsBefore map[string]int64) []string {
	if w.ledger.holds == nil {
		w.ledger.holds = map[uint64][]*ledgerHold{}
	}
	s := &w.f.st
	now := s.lastNowNanos
	capsAfter := w.caps()
	touched := map[string]bool{}
	ids := slices.Sorted(maps.Keys(s.reservations.byID))
	for _, id := range ids {
		rv := s.reservations.byID[id]
		if !rv.granted() {
			continue
		}
		known, seen := w.ledger.holds[id]
		k := 0
		for _, p := range rv.parts {
			if p.holdExpiresAtNanos == 0 || p.shadow {
				continue
			}
			if !seen {
				h := &ledgerHold{limit: p.limit, permits: p.permits, servedAt: rv.servedAtNanos, expiresAt: p.holdExpiresAtNanos,
					maxInFlight: max(capsBefore[p.limit], capsAfter[p.limit]), step: step, bornIndex: p.bornIndex}
				w.ledger.holds[id] = append(w.ledger.holds[id], h)
				touched[p.limit] = true
				known = w.ledger.holds[id]
			}
			h := known[k]
			k++
			if d := p.releasedPermits - h.released; d > 0 {
				h.releases = append(h.releases, ledgerRelease{atNanos: now, permits: d})
				h.released = p.releasedPermits
			}
		}
	}
	var labels []string
	names := make([]string, 0, len(touched))
	for name := range touched {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var hs []*ledgerHold
		for _, id := range ids {
			for _, h := range w.ledger.holds[id] {
				if h.limit == name {
					hs = append(hs, h)
				}
			}
		}
		for _, at := range hs {
			x := at.servedAt
			var held, limit int64
			last := -1
			born := map[uint64]bool{}
			for _, h := range hs {
				n := h.heldAt(x)
				if n <= 0 {
					continue
				}
				held += n
				born[h.bornIndex] = true
				switch {
				case h.step > last:
					last, limit = h.step, h.maxInFlight
				case h.step == last:
					limit = max(limit, h.maxInFlight)
				}
			}
			if held > limit {
				w.t.Errorf("seed %d: %s: %d permits held on %q at instant %d, above the cap of %d in force at the last of their grants",
					w.seed, kind, held, name, x, limit)
			}
			if len(born) > 1 {
				labels = append(labels, "cap-carried")
			}
		}
	}
	// Holds that expired by now matter to no later check: every later
	// grant is served at or after now.
	for id, hs := range w.ledger.holds {
		if _, live := s.reservations.byID[id]; !live && !slices.ContainsFunc(hs, func(h *ledgerHold) bool { return h.expiresAt > now }) {
			delete(w.ledger.holds, id)
		}
	}
	w.ledger.lastNowBefore, w.ledger.lastNow = w.ledger.lastNow, now
	return labels
}
