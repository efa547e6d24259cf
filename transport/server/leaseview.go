package server

import (
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
)

// leaseview.go: the register's lease pool and leases as the API shows
// them (api.LeasePool).

func newLeasePoolView(name string, p fsm.LeasePoolInfo, ls []fsm.LeaseInfo) api.LeasePool {
	v := api.LeasePool{Name: name, IntervalNanos: p.IntervalNanos, BurstPermits: p.BurstPermits,
		MaxOutstandingPermits: p.MaxOutstandingPermits, BurstSpec: p.BurstSpec, MaxOutstandingSpec: p.MaxOutstandingSpec,
		MintedPermits: p.MintedPermits, FreePermits: p.FreePermits, OutstandingPermits: p.OutstandingPermits,
		SettledPermits: p.SettledPermits, SpentPermits: p.SpentPermits, StolenPermits: p.StolenPermits,
		ExpiredPermits: p.ExpiredPermits, StolenInPermits: p.StolenInPermits, ActiveLeases: p.ActiveLeases,
		LingeringLeases: p.LingeringLeases, LeasesOpened: p.LeasesOpened, Renewals: p.Renewals, Returns: p.Returns,
		Expirations: p.Expirations, Fenced: p.Fenced, Leases: make([]api.LeaseState, len(ls))}
	for i, l := range ls {
		v.Leases[i] = api.LeaseState{LeaseID: l.ID, Epoch: l.Epoch, Active: l.Active, Holder: l.Holder, Group: l.Group,
			Weight: l.Weight, DemandMilliPerSec: l.DemandMilliPermitsPerSec, ShareMilliPerSec: l.ShareMilliPermitsPerSec,
			Permits: l.Permits, LingeringPermits: l.LingeringPermits, GrantedAtNanos: l.GrantedAtNanos,
			ExpiresAtNanos: l.ExpiresAtNanos, StolenInPermits: l.StolenInPermits}
	}
	return v
}
