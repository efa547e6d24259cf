package fsm

import "github.com/google/btree"

// names.go: the limits in name order, as a B-tree: a key's creation or
// drop inside Apply costs a logarithm of the register's size, not a move
// of every name after it (a sorted slice of a million names moved up to
// 16 MB per key). The tree holds the limits themselves, so that a walk
// in name order (a snapshot, a page) does not look each name up.

// nameIndexDegree is the B-tree's degree: nodes of 31 to 63 limits, a
// depth of 4 at a million.
const nameIndexDegree = 32

// nameIndex is a set of limits ordered by name. It is derived from the
// limits (not in snapshots; Restore rebuilds it).
type nameIndex struct {
	t *btree.BTreeG[*limit]
}

func newNameIndex() nameIndex {
	return nameIndex{t: btree.NewG(nameIndexDegree, func(a, b *limit) bool { return a.name < b.name })}
}

// len returns how many limits x holds.
func (x nameIndex) len() int { return x.t.Len() }

// insert adds l (replacing a limit of its name).
func (x nameIndex) insert(l *limit) { x.t.ReplaceOrInsert(l) }

// remove removes the limit of l's name (nothing if there is none).
func (x nameIndex) remove(l *limit) { x.t.Delete(l) }

// each calls fn with every limit in name order until fn returns false.
func (x nameIndex) each(fn func(l *limit) bool) { x.t.Ascend(fn) }

// from calls fn with every limit whose name is >= start, in name order,
// until fn returns false.
func (x nameIndex) from(start string, fn func(l *limit) bool) {
	x.t.AscendGreaterOrEqual(&limit{name: start}, fn)
}
