package fsm

import "slices"

// leasebook.go: the lease book, the register side of the leased path. See
// doc.go ("Leases") for the model and the bound. This file holds the state;
// its arithmetic is in leasemint.go (minting), leasegrant.go (the size of a
// grant), leasesettle.go (reports), leaseexpiry.go (expiry) and
// leaseindex.go (the derived indexes).

// leasePool is the lease book of one leased limit.
//
// Accounts, all in whole permits: minted = free + outstanding + settled
// (settled = spent + stolen + expired) after every entry. outstanding is
// the sum of the active grants and of the lingering stolen permits of its
// leases.
type leasePool struct {
	// burstSpec and maxOutSpec are the policy's C and O (0 = default).
	burstSpec, maxOutSpec int64
	// accruedToNanos is the cluster time up to which minting has been
	// accounted: the next permit is minted at accruedToNanos + interval.
	accruedToNanos int64

	minted, free, outstanding int64
	spent, stolen, expired    int64
	stolenIn                  int64

	opened, renewals, returns, expirations, fenced uint64

	// leases holds every lease, active or lingering, by ID ascending (IDs
	// come from a global counter, so a new lease is appended).
	leases []*lease

	// Derived from leases (rebuilt by Restore): the active lease of each
	// holder, and the groups of active leases by name.
	byHolder map[string]*lease
	groups   []*leaseGroup
}

// leaseGroup aggregates the active leases of one group.
type leaseGroup struct {
	name string
	// demand is the sum of its leases' demands (at most MaxLeasesPerLimit *
	// MaxDemandMilliPermitsPerSec, far from overflowing).
	demand int64
	// leases are its active leases by ID ascending; the last one (the
	// newest) sets the group's weight.
	leases []*lease
	// sorted are the leases' demands, ascending, when sortedOK (derived:
	// never in a snapshot; reset by every change of the group's members
	// or of a member's demand, leaseindex.go).
	sorted   []int64
	sortedOK bool
}

func (g *leaseGroup) weight() int64 { return g.leases[len(g.leases)-1].weight }

// sortedDemands returns the group's demands in ascending order, sorting
// them only after they changed.
func (g *leaseGroup) sortedDemands() []int64 {
	if !g.sortedOK {
		g.sorted = g.sorted[:0]
		for _, m := range g.leases {
			g.sorted = append(g.sorted, m.demand)
		}
		slices.Sort(g.sorted)
		g.sortedOK = true
	}
	return g.sorted
}

// lease is one lease. Inactive leases (returned or expired) hold nothing
// but lingering permits and are dropped when those have lingered out.
type lease struct {
	limit string
	pool  *leasePool
	id    uint64
	epoch uint64

	active bool
	holder string
	group  string
	weight int64
	demand int64
	share  int64
	// permits is the current grant; carry the fraction of a permit the
	// holder's share earned but no grant has paid yet, as a numerator over
	// capacity*interval (see grant).
	permits int64
	carry   int64
	// entitled is what the lease may still take from the pool, net of
	// what it credits back, as of the moment the pool had minted mintMark
	// permits in all: its share's fraction of every minted permit accrues
	// into it (entitledRem is the fraction of a permit, a numerator over
	// the capacity r), its grants' net intake is taken out of it, and it
	// never exceeds the lease's fair grant (see entitlementAt).
	entitled    int64
	entitledRem int64
	mintMark    int64

	grantedAtNanos, expiresAtNanos int64
	stolenIn                       int64

	// linger holds permits of earlier grants given to other holders, by
	// untilNanos strictly ascending, at most maxLingerGrants entries.
	linger []lingerGrant

	heapIndex int

	// capMemo caches the lease's entitlement cap (derived: never in a
	// snapshot, recomputed whenever an input differs).
	capMemo capMemo
}

// capMemo is an entitlement cap and the inputs it was computed from: the
// lease's share and grant span, and the limit's interval, O and capacity.
// A grant walks every other lease's entitlement, and the cap costs two of
// an entitlement's three 128-bit divisions; its inputs change only at the
// lease's own grants and at a change of the limit.
type capMemo struct {
	set                                          bool
	share, spanNanos, intervalNanos, o, capacity int64
	value                                        int64
}

// lingerGrant is a number of stolen-out permits that other holders may
// spend until untilNanos (the expiry of the grant they came from).
type lingerGrant struct {
	untilNanos, permits int64
}

// maxLingerGrants bounds a lease's linger list. An overflow merges the two
// earliest entries into the later one, which only keeps permits counted as
// outstanding for longer: safe.
const maxLingerGrants = 4
