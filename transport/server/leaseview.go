package server

import (
	"github.com/permitd/permitd/fsm"
)

// leaseview.go: the JSON answers of the lease endpoints, as the register's
// results and views are shown to clients.

// leasePolicyView is the answer to PUT /v1/limits/{name}/lease-policy:
// the effective capacities C and O (0 when not leased).
type leasePolicyView struct {
	Name                  string `json:"name"`
	Leased                bool   `json:"leased"`
	BurstPermits          int64  `json:"burst_permits"`
	MaxOutstandingPermits int64  `json:"max_outstanding_permits"`
}

// leaseAnswerView is the answer to a lease, renew or return.
type leaseAnswerView struct {
	// Status is "granted", "refused", "fenced" or "returned".
	Status  string `json:"status"`
	LeaseID uint64 `json:"lease_id"`
	Epoch   uint64 `json:"epoch"`
	// Permits, ExpiresInNanos and the share describe a grant.
	Permits          int64  `json:"permits"`
	ExpiresInNanos   int64  `json:"expires_in_ns"`
	ShareMilliPerSec int64  `json:"share_milli_per_sec"`
	CreditedPermits  int64  `json:"credited_permits"`
	RetryAfterNanos  int64  `json:"retry_after_ns,omitempty"`
	Duplicate        bool   `json:"duplicate"`
	Error            string `json:"error,omitempty"`
}

// leasePoolView is the answer to GET /v1/limits/{name}/leases: the pool's
// capacities, accounts (minted = free + outstanding + settled) and
// counters, and its leases sorted by id. Cluster times (_cluster_ns) are
// on the timeline of GET /v1/status's cluster_now_ns.
type leasePoolView struct {
	Name                  string      `json:"name"`
	IntervalNanos         int64       `json:"interval_ns"`
	BurstPermits          int64       `json:"burst_permits"`
	MaxOutstandingPermits int64       `json:"max_outstanding_permits"`
	BurstSpec             int64       `json:"burst_permits_spec"`
	MaxOutstandingSpec    int64       `json:"max_outstanding_permits_spec"`
	MintedPermits         int64       `json:"minted_permits"`
	FreePermits           int64       `json:"free_permits"`
	OutstandingPermits    int64       `json:"outstanding_permits"`
	SettledPermits        int64       `json:"settled_permits"`
	SpentPermits          int64       `json:"spent_permits"`
	StolenPermits         int64       `json:"stolen_permits"`
	ExpiredPermits        int64       `json:"expired_permits"`
	StolenInPermits       int64       `json:"stolen_in_permits"`
	ActiveLeases          int         `json:"active_leases"`
	LingeringLeases       int         `json:"lingering_leases"`
	LeasesOpened          uint64      `json:"leases_opened"`
	Renewals              uint64      `json:"renewals"`
	Returns               uint64      `json:"returns"`
	Expirations           uint64      `json:"expirations"`
	Fenced                uint64      `json:"fenced"`
	Leases                []leaseView `json:"leases"`
}

// leaseView is one lease of a leasePoolView.
type leaseView struct {
	LeaseID           uint64 `json:"lease_id"`
	Epoch             uint64 `json:"epoch"`
	Active            bool   `json:"active"`
	Holder            string `json:"holder"`
	Group             string `json:"group"`
	Weight            int64  `json:"weight"`
	DemandMilliPerSec int64  `json:"demand_milli_per_sec"`
	ShareMilliPerSec  int64  `json:"share_milli_per_sec"`
	Permits           int64  `json:"permits"`
	LingeringPermits  int64  `json:"lingering_permits"`
	GrantedAtNanos    int64  `json:"granted_at_cluster_ns"`
	ExpiresAtNanos    int64  `json:"expires_at_cluster_ns"`
	StolenInPermits   int64  `json:"stolen_in_permits"`
}

func newLeasePoolView(name string, p fsm.LeasePoolInfo, ls []fsm.LeaseInfo) leasePoolView {
	v := leasePoolView{Name: name, IntervalNanos: p.IntervalNanos, BurstPermits: p.BurstPermits,
		MaxOutstandingPermits: p.MaxOutstandingPermits, BurstSpec: p.BurstSpec, MaxOutstandingSpec: p.MaxOutstandingSpec,
		MintedPermits: p.MintedPermits, FreePermits: p.FreePermits, OutstandingPermits: p.OutstandingPermits,
		SettledPermits: p.SettledPermits, SpentPermits: p.SpentPermits, StolenPermits: p.StolenPermits,
		ExpiredPermits: p.ExpiredPermits, StolenInPermits: p.StolenInPermits, ActiveLeases: p.ActiveLeases,
		LingeringLeases: p.LingeringLeases, LeasesOpened: p.LeasesOpened, Renewals: p.Renewals, Returns: p.Returns,
		Expirations: p.Expirations, Fenced: p.Fenced, Leases: make([]leaseView, len(ls))}
	for i, l := range ls {
		v.Leases[i] = leaseView{LeaseID: l.ID, Epoch: l.Epoch, Active: l.Active, Holder: l.Holder, Group: l.Group,
			Weight: l.Weight, DemandMilliPerSec: l.DemandMilliPermitsPerSec, ShareMilliPerSec: l.ShareMilliPermitsPerSec,
			Permits: l.Permits, LingeringPermits: l.LingeringPermits, GrantedAtNanos: l.GrantedAtNanos,
			ExpiresAtNanos: l.ExpiresAtNanos, StolenInPermits: l.StolenInPermits}
	}
	return v
}
