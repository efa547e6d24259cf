package fsm

import "github.com/google/btree"

// names.go: the limits' names in order, as a B-tree: a key's creation or
// drop inside Apply costs a logarithm of the register's size, not a move
// of every name after it (a sorted slice of a million names moved up to
// 16 MB per key).

// nameIndexDegree is the B-tree's degree: nodes of 31 to 63 names, a
// depth of 4 at a million names.
const nameIndexDegree = 32

// nameIndex is a set of names, iterated in byte order. It is derived
// from the limits (not in snapshots; Restore rebuilds it).
type nameIndex struct {
	t *btree.BTreeG[string]
}

func newNameIndex() nameIndex {
	return nameIndex{t: btree.NewOrderedG[string](nameIndexDegree)}
}

// len returns how many names x holds.
func (x nameIndex) len() int { return x.t.Len() }

// insert adds name (nothing if it is there).
func (x nameIndex) insert(name string) { x.t.ReplaceOrInsert(name) }

// remove removes name (nothing if it is not there).
func (x nameIndex) remove(name string) { x.t.Delete(name) }

// has reports whether x holds name.
func (x nameIndex) has(name string) bool { return x.t.Has(name) }

// each calls fn with every name in order until fn returns false.
func (x nameIndex) each(fn func(name string) bool) { x.t.Ascend(fn) }

// from calls fn with every name >= start in order until fn returns false.
func (x nameIndex) from(start string, fn func(name string) bool) {
	x.t.AscendGreaterOrEqual(start, fn)
}
