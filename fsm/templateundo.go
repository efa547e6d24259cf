package fsm

import (
	"container/heap"
	"slices"
)

// templateundo.go: undoing the creation of templated keys by a reserve
// that is then not decided on them (Invalid, Busy): a command that
// changes no limit leaves no key either (template.go creates them).

// decidedOn reports whether outcome o is a decision of the limits a
// reserve names (granted, refused by one of them, or waiting in a cap's
// queue), which keeps the keys the reserve created and touches them;
// any other outcome changes no limit.
func decidedOn(o outcome) bool {
	return o.status == Granted || o.status == Refused || o.status == Queued
}

// uncreateKey undoes createKey of templated key l in the decision that
// created it: nothing has touched l since, so the state is again the one
// before (its place in the drop heap aside, which the order (due time,
// name) makes unobservable), and the creation is no longer reported.
func (s *state) uncreateKey(l *limit) {
	heap.Remove(&s.keys, int(l.keySlot-1))
	s.ownTemplate(l).keys--
	s.removeLimit(l)
	for i, c := range slices.Backward(s.keyChanges) {
		if c.Kind == KeyCreated && c.Name == l.name {
			s.keyChanges = slices.Delete(s.keyChanges, i, i+1)
			break
		}
	}
}
