package api

// lease.go: the answers of a leased limit's endpoints (see package fsm's
// Leases section): a lease, renew or return, the lease policy, and the
// lease pool with its leases.

// LeasePolicyResult is the answer to PUT /v1/limits/{name}/lease-policy:
// the effective capacities C and O (defaults resolved; 0 when not leased).
type LeasePolicyResult struct {
	Name                  string `json:"name"`
	Leased                bool   `json:"leased"`
	BurstPermits          int64  `json:"burst_permits"`
	MaxOutstandingPermits int64  `json:"max_outstanding_permits"`
}

// LeaseAnswer is the answer to a lease, renew or return: 200 "granted" or
// "returned", 429 "refused" (with RetryAfterNanos), 409 "fenced".
type LeaseAnswer struct {
	// Status is "granted", "refused", "fenced" or "returned".
	Status  string `json:"status"`
	LeaseID uint64 `json:"lease_id"`
	Epoch   uint64 `json:"epoch"`
	// Permits, ExpiresInNanos (from when the holder sent the request) and
	// the share (thousandths of a permit per second) describe a grant.
	Permits          int64 `json:"permits"`
	ExpiresInNanos   int64 `json:"expires_in_ns"`
	ShareMilliPerSec int64 `json:"share_milli_per_sec"`
	// CreditedPermits (renew, return) went back to the free pool.
	CreditedPermits int64 `json:"credited_permits"`
	// RetryAfterNanos (refused) counts from the answer.
	RetryAfterNanos int64 `json:"retry_after_ns,omitempty"`
	// Duplicate: the register had decided this request ID already and
	// replayed that decision.
	Duplicate bool `json:"duplicate"`
	// Error explains a refusal or a fencing.
	Error string `json:"error,omitempty"`
}

// LeasePool is the answer to GET /v1/limits/{name}/leases: a leased
// limit's pool, its capacities, its accounts (Minted = Free + Outstanding
// + Settled) and counters, and its leases sorted by id. Cluster times
// (_cluster_ns) are on the timeline of Status.ClusterNanos.
type LeasePool struct {
	Name                  string       `json:"name"`
	IntervalNanos         int64        `json:"interval_ns"`
	BurstPermits          int64        `json:"burst_permits"`
	MaxOutstandingPermits int64        `json:"max_outstanding_permits"`
	BurstSpec             int64        `json:"burst_permits_spec"`
	MaxOutstandingSpec    int64        `json:"max_outstanding_permits_spec"`
	MintedPermits         int64        `json:"minted_permits"`
	FreePermits           int64        `json:"free_permits"`
	OutstandingPermits    int64        `json:"outstanding_permits"`
	SettledPermits        int64        `json:"settled_permits"`
	SpentPermits          int64        `json:"spent_permits"`
	StolenPermits         int64        `json:"stolen_permits"`
	ExpiredPermits        int64        `json:"expired_permits"`
	StolenInPermits       int64        `json:"stolen_in_permits"`
	ActiveLeases          int          `json:"active_leases"`
	LingeringLeases       int          `json:"lingering_leases"`
	LeasesOpened          uint64       `json:"leases_opened"`
	Renewals              uint64       `json:"renewals"`
	Returns               uint64       `json:"returns"`
	Expirations           uint64       `json:"expirations"`
	Fenced                uint64       `json:"fenced"`
	Leases                []LeaseState `json:"leases"`
}

// LeaseState is one lease of a LeasePool.
type LeaseState struct {
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
