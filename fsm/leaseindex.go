package fsm

import (
	"slices"
	"strings"
)

// leaseindex.go: the lease book's indexes. leases is by ID; byHolder and
// groups index the active leases and are derived from leases (Restore
// rebuilds them), so every change to a lease's activity or demand goes
// through these functions.

// find returns the lease with that ID, or nil.
func (p *leasePool) find(id uint64) *lease {
	i, ok := slices.BinarySearchFunc(p.leases, id, func(l *lease, id uint64) int { return cmpUint64(l.id, id) })
	if !ok {
		return nil
	}
	return p.leases[i]
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// addLease records a new active lease (its ID is the largest yet).
func (p *leasePool) addLease(l *lease) {
	p.leases = append(p.leases, l)
	p.activate(l)
}

// activate adds an active lease to the derived indexes.
func (p *leasePool) activate(l *lease) {
	p.byHolder[l.holder] = l
	i, ok := slices.BinarySearchFunc(p.groups, l.group, func(g *leaseGroup, name string) int { return strings.Compare(g.name, name) })
	if !ok {
		p.groups = slices.Insert(p.groups, i, &leaseGroup{name: l.group})
	}
	g := p.groups[i]
	j, _ := slices.BinarySearchFunc(g.leases, l.id, func(m *lease, id uint64) int { return cmpUint64(m.id, id) })
	g.leases = slices.Insert(g.leases, j, l)
	g.demand += l.demand
	g.sortedOK = false
}

// deactivate closes an active lease: it leaves the indexes and keeps only
// its identity and lingering permits. Its grant must have been settled.
func (p *leasePool) deactivate(l *lease) {
	delete(p.byHolder, l.holder)
	i, _ := slices.BinarySearchFunc(p.groups, l.group, func(g *leaseGroup, name string) int { return strings.Compare(g.name, name) })
	g := p.groups[i]
	j, _ := slices.BinarySearchFunc(g.leases, l.id, func(m *lease, id uint64) int { return cmpUint64(m.id, id) })
	g.leases = slices.Delete(g.leases, j, j+1)
	g.demand -= l.demand
	g.sortedOK = false
	if len(g.leases) == 0 {
		p.groups = slices.Delete(p.groups, i, i+1)
	}
	l.active = false
	l.weight, l.demand, l.share, l.permits, l.carry = 0, 0, 0, 0, 0
	l.entitled, l.entitledRem = 0, 0
}

// removeLease drops an inactive lease with nothing lingering.
func (p *leasePool) removeLease(l *lease) {
	if i, ok := slices.BinarySearchFunc(p.leases, l.id, func(m *lease, id uint64) int { return cmpUint64(m.id, id) }); ok {
		p.leases = slices.Delete(p.leases, i, i+1)
	}
}

// setDemand updates an active lease's demand and its group's sum.
func (p *leasePool) setDemand(l *lease, demand int64) {
	i, _ := slices.BinarySearchFunc(p.groups, l.group, func(g *leaseGroup, name string) int { return strings.Compare(g.name, name) })
	g := p.groups[i]
	g.demand += demand - l.demand
	if demand != l.demand {
		g.sortedOK = false
	}
	l.demand = demand
}
