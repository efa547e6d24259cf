package bound

import "fmt"

// Leased is the over-grant bound of a leased limit (fsm/README.md, "Leased
// limits"): in any window of real time of length W the whole fleet of
// workers spends at most
//
//	C + O + floor(W/I) + 1
//
// permits, where I is the limit's interval (one permit minted per I of
// cluster time), C its burst_permits (minting stops while the free pool
// holds C) and O its max_outstanding_permits (the most permits held by
// leases at once). The lease TTL and the workers' safety margin do not
// appear: they bound how long a permit stays spendable, not how many can
// be spent (the margin is what makes assumption 2 hold on the workers'
// clocks).
func Leased(intervalNanos, burstPermits, maxOutstandingPermits int64) (Bound, error) {
	if intervalNanos <= 0 {
		return Bound{}, fmt.Errorf("%w: leased interval %d ns; allowed: > 0", ErrInvalid, intervalNanos)
	}
	if burstPermits < 1 || maxOutstandingPermits < 1 {
		return Bound{}, fmt.Errorf("%w: leased burst_permits %d, max_outstanding_permits %d; allowed: >= 1 each", ErrInvalid, burstPermits, maxOutstandingPermits)
	}
	extra := satAdd(satAdd(burstPermits, maxOutstandingPermits), 1)
	return Bound{
		Formula: fmt.Sprintf("C+O+floor(W/I)+1 with I=%dns C=%d O=%d (fsm/README.md, Leased over-grant bound)", intervalNanos, burstPermits, maxOutstandingPermits),
		Max: func(w int64) int64 {
			return satAdd(max(w, 0)/intervalNanos, extra)
		},
	}, nil
}
