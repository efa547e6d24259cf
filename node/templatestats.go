package node

import (
	"sync"

	"github.com/permitd/permitd/fsm"
)

// templatestats.go: templates' families of keys as monitoring reads them.
// The register's state sums the counters of a template's live keys
// (fsm.FSM.TemplateStats); a key that leaves the family (dropped as idle,
// made explicit, deleted) takes its counters along, so a node adds back
// what the keys that left since it started had counted: the family's
// counters then only grow while the node runs (a restored snapshot starts
// them again, like the node's other observed counters).

// KeyFamilies sums, per template, the counters of the keys that left its
// family (fsm.KeyChange) since it was made or Reset. The zero value is
// ready; it is safe for concurrent use.
type KeyFamilies struct {
	mu   sync.Mutex
	left map[string]*familyLeft
}

// familyLeft is what the keys that left a family had counted.
type familyLeft struct {
	granted, refused, permits uint64
}

// Observe counts the keys that changes take out of their families (the
// changes of one applied entry: fsm.FSM.AppliedKeyChanges).
func (k *KeyFamilies) Observe(changes []fsm.KeyChange) {
	if len(changes) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range changes {
		if c.Kind == fsm.KeyCreated {
			continue
		}
		if k.left == nil {
			k.left = make(map[string]*familyLeft)
		}
		f := k.left[c.Template]
		if f == nil {
			f = &familyLeft{}
			k.left[c.Template] = f
		}
		f.granted += c.GrantedRequests
		f.refused += c.RefusedRequests
		f.permits += c.GrantedPermits
	}
}

// Reset forgets every count (the state was replaced by a snapshot).
func (k *KeyFamilies) Reset() {
	k.mu.Lock()
	k.left = nil
	k.mu.Unlock()
}

// Add adds to each of ts the counters of the keys that left its family,
// and forgets those of templates no longer in ts (gone with their last
// key): ts's counters then count the family's every key since k was made.
func (k *KeyFamilies) Add(ts []fsm.TemplateStats) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.left) == 0 {
		return
	}
	live := make(map[string]bool, len(ts))
	for i := range ts {
		t := &ts[i]
		live[t.Prefix] = true
		if f := k.left[t.Prefix]; f != nil {
			t.GrantedRequests += f.granted
			t.RefusedRequests += f.refused
			t.GrantedPermits += f.permits
		}
	}
	for p := range k.left {
		if !live[p] {
			delete(k.left, p)
		}
	}
}

// TemplateStats returns every template with its live keys counted, read
// from this node's state without going through the leader (for metrics
// and the status page), and its counters summed over its keys: the live
// ones and those that left the family since the node started.
func (n *Node) TemplateStats() []fsm.TemplateStats {
	ts := n.fsm.TemplateStats()
	n.families.Add(ts)
	return ts
}
