package api

// ReadableLimits is the answer to GET /v1/readable-limits: the explicit
// limits the token may read, sorted by name, and the keys of each
// template as one family (never one entry per key, so that the answer
// stays small with a million keys). Families is absent when no template
// has keys or the token may read none.
type ReadableLimits struct {
	Limits   []Limit       `json:"limits"`
	Families []LimitFamily `json:"families,omitempty"`
}

// LimitFamily is a template and the keys it created that live now: their
// configuration (each key's), how many there are, and their counters
// summed (those of the keys that left the family since the agent started
// included, so they only grow while it runs).
type LimitFamily struct {
	// Template is the prefix: the family's keys are named Template:key.
	Template string `json:"template"`
	LimitSpec
	IntervalNanos int64 `json:"interval_ns"`
	// Active is false for a deleted template whose keys still live.
	Active    bool  `json:"active"`
	Keys      int64 `json:"keys"`
	MaxKeys   int64 `json:"max_keys"`
	IdleNanos int64 `json:"idle_ns"`
	// GrantedRequests, GrantedPermits and RefusedRequests as a limit's
	// (LimitCounters), summed over the family.
	GrantedRequests uint64 `json:"granted_requests"`
	GrantedPermits  uint64 `json:"granted_permits"`
	RefusedRequests uint64 `json:"refused_requests"`
}
