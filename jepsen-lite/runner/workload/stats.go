package workload

import (
	"math/rand/v2"
	"sync/atomic"
)

// WorkerStats counts what the workers did.
type WorkerStats struct {
	// Reserves by outcome.
	Granted int64 `json:"granted"`
	Refused int64 `json:"refused"`
	Failed  int64 `json:"failed"`
	Unknown int64 `json:"unknown"`
	// NotDelivered counts the failed reserves that certainly never
	// reached a server (client.ErrNotDelivered; a sidecar's refused
	// connection): recorded as fail, not info.
	NotDelivered int64 `json:"not_delivered"`
	// Grants not used: expired (strict: past expires_in, counted from the
	// send), stale (window: answer slower than MaxAnswerRTT), late
	// (window: woke up more than MaxLateUse after ready).
	SkippedExpired int64 `json:"skipped_expired"`
	SkippedStale   int64 `json:"skipped_stale"`
	SkippedLate    int64 `json:"skipped_late"`
	// API calls made and failed.
	APICalls  int64 `json:"api_calls"`
	APIErrors int64 `json:"api_errors"`
	// PermitsGranted sums the permits of the grants; MultiPermitGrants
	// counts the grants of more than one permit (--max-permits) and
	// MultiPermitTurns the turns strict workers took to get them (see
	// the package documentation).
	PermitsGranted    int64 `json:"permits_granted"`
	MultiPermitGrants int64 `json:"multi_permit_grants"`
	MultiPermitTurns  int64 `json:"multi_permit_turns"`
}

// counters are the workers' live counts behind WorkerStats.
type counters struct {
	granted, refused, failed, unknown, notDelivered atomic.Int64
	skippedExpired, skippedStale, skippedLate       atomic.Int64
	apiCalls, apiErrors                             atomic.Int64
	permitsGranted, multiPermitGrants, turns        atomic.Int64
}

func (c *counters) snapshot() WorkerStats {
	return WorkerStats{
		Granted: c.granted.Load(), Refused: c.refused.Load(), Failed: c.failed.Load(), Unknown: c.unknown.Load(), NotDelivered: c.notDelivered.Load(),
		SkippedExpired: c.skippedExpired.Load(), SkippedStale: c.skippedStale.Load(), SkippedLate: c.skippedLate.Load(),
		APICalls: c.apiCalls.Load(), APIErrors: c.apiErrors.Load(),
		PermitsGranted: c.permitsGranted.Load(), MultiPermitGrants: c.multiPermitGrants.Load(), MultiPermitTurns: c.turns.Load(),
	}
}

// permitDraws draws the number of permits of each reserve (Config.
// MaxPermits): 1 three times in four, else uniform in 2..max. Each worker
// has its own sequence, seeded by the run's seed and the worker's id, so
// the same seed asks for the same counts in the same order.
type permitDraws struct {
	rng *rand.Rand
	max int64
}

func newPermitDraws(seed uint64, id int, max int64) *permitDraws {
	return &permitDraws{rng: rand.New(rand.NewPCG(seed^0x7065726d697473, uint64(id))), max: max}
}

// next returns the next reserve's permit count.
func (d *permitDraws) next() int64 {
	if d.max <= 1 || d.rng.IntN(4) != 0 {
		return 1
	}
	return 2 + d.rng.Int64N(d.max-1)
}
