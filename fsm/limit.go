package fsm

import (
	"fmt"
	"math"
	"strings"

	"github.com/permitd/permitd/bucket"
)

// limit.go: one named limit as the register keeps it (configuration,
// pacer, counters), the view of it the read API serves, how a put creates
// or reconfigures it and a delete removes it, and how it decides a reserve
// (a reserve in the reservation form, on several limits, is in multi.go).

// limit is one named limit: its configuration, the raft index that set it,
// its pacer and its counters.
type limit struct {
	name string
	// conf is the config the limit runs, shared with the other limits
	// that run the same (limitconfig.go); its pacer runs conf.cfg.
	conf    *limitConfig
	version uint64
	pacer   bucket.Pacer
	// pool is the lease book of a leased limit, nil for a linearized one.
	// A leased limit's pacer is kept (and reconfigured by puts) but grants
	// nothing.
	pool *leasePool

	// The counters (see LimitInfo). grantedRequests and grantedPermits
	// count every grant the register decided, those whose answer then
	// left as a refusal included (tallies.expiredRequests and
	// expiredPermits: learnt from a later CmdExpiredGrants,
	// expiredgrants.go); refusedRequests the refusals it decided. They
	// only grow.
	grantedRequests uint64
	grantedPermits  uint64
	refusedRequests uint64
	// rare holds the counters most limits never move (nil while they are
	// all 0): see tallies.
	rare *tallies
	// createdIndex is the raft index of the put that created the limit:
	// a grant decided before it was another limit's of the same name.
	createdIndex uint64

	// bornIndex is the raft index of the put that created the current
	// pacer (a put with another algorithm replaces it), seq the number of
	// changes the pacer's state has seen since (grants, charges, refunds,
	// releases, reconfigurations): together they tell a settlement whether
	// anything touched the pacer after a grant (reservation.go).
	bornIndex, seq uint64
	// refundMarks are the slacks of the grants and charges made since
	// change count marksFromSeq, for late refunds on a bucket.Refunder
	// pacer (settle.go, "Late refunds").
	refundMarks  []refundMark
	marksFromSeq uint64
	// lastServedNanos is the latest served time of a grant or charge on a
	// Refunder pacer: a late refund never moves its next free time
	// before it (settle.go, "Late refunds").
	lastServedNanos int64
	// shadow: the limit is in shadow mode (PutLimit.Shadow; state.shadows
	// holds its name then).
	shadow bool
	// explicitCounted: the limit is explicit and counted as such in
	// state.explicitPrefixes.
	explicitCounted bool
	// keySlot is 1 + the limit's place in the drop heap while it is a
	// key a template created (template.go), 0 for an explicit limit (an
	// explicit put makes a key explicit). An int32 next to shadow: the
	// struct keeps its size class.
	keySlot int32
}

// tallies are the counters of a limit that only expired grants,
// settlements and shadow mode move, kept apart so that a limit that
// never sees them (most keys of a large fleet) does not carry them.
// expiredRequests and expiredPermits: see limit; refundedPermits and
// chargedPermits are what settlements gave back to the rate pacer, and
// charged to it, on grants of the limit; shadowGranted counts the
// reserves it granted in shadow mode, shadowRefused and shadowWaited
// those of them it would have refused, or made wait, had it been
// enforced. They only grow.
type tallies struct {
	expiredRequests, expiredPermits uint64
	refundedPermits, chargedPermits uint64
	shadowGranted                   uint64
	shadowRefused, shadowWaited     uint64
}

// tally returns l's rare counters (all 0 if it has none).
func (l *limit) tally() tallies {
	if l.rare == nil {
		return tallies{}
	}
	return *l.rare
}

// tallying returns l's rare counters for an update, making them first if
// l has none.
func (l *limit) tallying() *tallies {
	if l.rare == nil {
		l.rare = &tallies{}
	}
	return l.rare
}

// LimitInfo is a read-only view of one limit.
type LimitInfo struct {
	Name    string
	Config  bucket.Config
	Version uint64
	// Template is the prefix of the template that created the limit, a
	// key dropped when idle; "" for an explicit limit.
	Template string
	// Counters since the limit was created (a put that reconfigures it
	// keeps them). They count reserves as their answers left the register
	// (duplicates and Invalid reserves are not counted):
	//
	//   - GrantedRequests, GrantedPermits: reserves answered as grants and
	//     their permits (in shadow mode every reserve on the limit). A
	//     refund does not lower them: see NetPermits.
	//   - RefusedRequests: reserves answered as refusals, ExpiredRequests
	//     included.
	//   - ExpiredRequests, ExpiredPermits: grants the register decided
	//     whose (first) permit expired while the node that held the answer
	//     waited to send it, so that the answer was a refusal. The register
	//     learns of them from that node, in a later entry
	//     (CmdExpiredGrants): until it is applied, and for good if that
	//     node fails first, such a grant is counted as granted.
	//   - RefundedPermits, ChargedPermits: what settlements gave back to
	//     the limit's rate, and charged to it as overrun (an in-flight
	//     cap's early releases are neither).
	//   - NetPermits = GrantedPermits + ExpiredPermits - RefundedPermits +
	//     ChargedPermits: the permits counted against the limit's rate
	//     (an expired answer's slots are spent all the same).
	GrantedRequests uint64
	GrantedPermits  uint64
	RefusedRequests uint64
	ExpiredRequests uint64
	ExpiredPermits  uint64
	RefundedPermits uint64
	ChargedPermits  uint64
	NetPermits      uint64
	// Leased reports that the limit's permits are handed out by lease
	// (see LeasePolicy): reserves on it are Invalid.
	Leased bool
	// Lease (Leased only) summarises the lease pool: its policy and how
	// many leases hold permits.
	Lease LeaseSummary
	// Shadow reports shadow mode (PutLimit.Shadow). ShadowGranted counts
	// the reserves the limit granted while in shadow mode (grants made
	// while it was enforced are not), ShadowWouldRefuse and
	// ShadowWouldWait those of them that enforcement would have refused,
	// or made wait (all since the limit was created).
	Shadow                             bool
	ShadowGranted                      uint64
	ShadowWouldRefuse, ShadowWouldWait uint64
	// InFlightPermits (an in-flight cap) is the permits its live holds
	// keep at the cluster time of the latest applied entry; 0 for the
	// other algorithms.
	InFlightPermits int64
	// OpenReservations is how many live reservations (multi-limit
	// reserves, Reserve.Track) name the limit and are not settled yet:
	// those that may still be settled or released.
	OpenReservations int
}

// LeaseSummary is the part of a leased limit's pool that a view of the
// limit shows (LeasePoolInfo has everything).
type LeaseSummary struct {
	// BurstPermits (C) and MaxOutstandingPermits (O) are the effective
	// capacities; BurstSpec and MaxOutstandingSpec the values the policy
	// set (0 = the default, one second of permits).
	BurstPermits, MaxOutstandingPermits int64
	BurstSpec, MaxOutstandingSpec       int64
	// Leases counts the leases that hold permits (active or lingering).
	Leases int
}

// info returns a read-only view of l.
func (l *limit) info(nowNanos int64, openReservations int) LimitInfo {
	t := l.tally()
	info := LimitInfo{
		InFlightPermits:   inFlight(l.pacer, nowNanos),
		OpenReservations:  openReservations,
		Name:              l.name,
		Template:          l.templatePrefix(),
		Config:            l.conf.cfg,
		Version:           l.version,
		GrantedRequests:   l.grantedRequests - t.expiredRequests,
		GrantedPermits:    l.grantedPermits - t.expiredPermits,
		RefusedRequests:   l.refusedRequests + t.expiredRequests,
		ExpiredRequests:   t.expiredRequests,
		ExpiredPermits:    t.expiredPermits,
		RefundedPermits:   t.refundedPermits,
		ChargedPermits:    t.chargedPermits,
		NetPermits:        l.grantedPermits - t.refundedPermits + t.chargedPermits,
		Leased:            l.pool != nil,
		Shadow:            l.shadow,
		ShadowGranted:     t.shadowGranted,
		ShadowWouldRefuse: t.shadowRefused,
		ShadowWouldWait:   t.shadowWaited,
	}
	if p := l.pool; p != nil {
		i := l.conf.cfg.IntervalNanos
		info.Lease = LeaseSummary{BurstPermits: p.burst(i), MaxOutstandingPermits: p.maxOutstanding(i),
			BurstSpec: p.burstSpec, MaxOutstandingSpec: p.maxOutSpec, Leases: len(p.leases)}
	}
	return info
}

// inFlight is the permits a concurrency pacer holds at nowNanos; 0 for
// any other pacer.
func inFlight(p bucket.Pacer, nowNanos int64) int64 {
	if c, ok := p.(*bucket.ConcurrencyPacer); ok {
		return c.InFlight(nowNanos)
	}
	return 0
}

// setConfig installs conf (acquired from configs for l) and its pacer,
// set by the put at index, releasing the config l ran before.
func (l *limit) setConfig(configs configTable, conf *limitConfig, index uint64, pacer bucket.Pacer) {
	configs.release(l.conf)
	l.conf = conf
	l.version = index
	l.pacer = pacer
}

// put creates or reconfigures a limit at index. With the same algorithm the
// pacer is reconfigured (debt is kept); with another, a fresh pacer replaces
// it. A fresh pacer's timeline starts at the put's cluster time, as Guava's
// limiter starts at its construction; a fresh in-flight cap counts the
// live holds of its name (reservation.go, "Holds"). Counters are kept
// either way.
func (s *state) put(index uint64, nowNanos int64, p *PutLimit, parts putParts) PutResult {
	l, ok := s.limits[p.Name]
	if ok && l.pool != nil {
		if why := leasable(p.Name, p.Config.IntervalNanos); why != "" {
			return PutResult{Version: l.version, Detail: boundDetail(fmt.Sprintf(
				"limit %q keeps its configuration of version %d: it is leased and the new one cannot be: %s", p.Name, l.version, why))}
		}
	}
	if ok && l.templated() {
		// A templated key becomes explicit. One at rest is replaced by a
		// new limit, exactly as if it had been dropped already: whether
		// it was is not for a put to tell. Any other becomes explicit
		// only once the put is sure to succeed (below): a put that fails
		// changes nothing.
		if _, rested := s.keyAtRest(l, nowNanos); rested {
			s.unkey(l, KeyMadeExplicit)
			s.removeLimit(l)
			ok = false
		}
	}
	conf := s.configs.acquire(parts.rawConfig, parts.config)
	switch {
	case !ok:
		l = s.insertLimit(p.Name, conf, index, conf.compiled.NewPacer(nowNanos))
		s.setShadow(l, p.Shadow)
		s.countExplicit(l, true)
		s.carryHolds(l, nowNanos)
		return PutResult{Version: index, Created: true}
	case l.conf.cfg.Spec.Algorithm == p.Config.Spec.Algorithm:
		if err := conf.compiled.Reconfigure(l.pacer, nowNanos); err != nil {
			s.configs.release(conf)
			return PutResult{Version: l.version, Detail: boundDetail(fmt.Sprintf(
				"limit %q keeps its configuration of version %d: reconfiguring its pacer failed: %v", p.Name, l.version, err))}
		}
		s.unkey(l, KeyMadeExplicit)
		s.countExplicit(l, true)
		l.accrueLeases(nowNanos, p.Config.IntervalNanos)
		l.setConfig(s.configs, conf, index, l.pacer)
		l.seq++
		l.resetRefundMarks()
	default:
		s.unkey(l, KeyMadeExplicit)
		s.countExplicit(l, true)
		l.accrueLeases(nowNanos, p.Config.IntervalNanos)
		l.setConfig(s.configs, conf, index, conf.compiled.NewPacer(nowNanos))
		l.bornIndex, l.seq, l.lastServedNanos = index, 0, 0
		l.resetRefundMarks()
		s.carryHolds(l, nowNanos)
	}
	s.setShadow(l, p.Shadow)
	return PutResult{Version: index}
}

// accrueLeases mints a leased limit's permits up to now at its current
// interval, before a put changes it to newIntervalNanos. If the interval
// changes, the part of an interval already elapsed is dropped (the minting
// clock restarts at now at the new interval): it is not counted twice, at
// the new rate, and mint instants stay at least min(old, new) apart.
func (l *limit) accrueLeases(nowNanos, newIntervalNanos int64) {
	p := l.pool
	if p == nil {
		return
	}
	p.accrue(nowNanos, l.conf.cfg.IntervalNanos)
	if newIntervalNanos != l.conf.cfg.IntervalNanos {
		p.accruedToNanos = max(p.accruedToNanos, nowNanos)
	}
}

// delete removes a limit, unless leases still hold permits of it and the
// delete is not forced.
func (s *state) delete(nowNanos int64, d *DeleteLimit) DeleteResult {
	name := d.Name
	l, ok := s.limits[name]
	if !ok {
		return DeleteResult{}
	}
	if l.pool != nil && len(l.pool.leases) > 0 && !d.Force {
		return DeleteResult{Existed: true, Detail: boundDetail(fmt.Sprintf(
			"limit %q is leased and %s: its holders would lose their leases while they may still spend; stop the workers that hold them (a worker returns its lease on SIGTERM; running workers keep renewing theirs) or force the delete (permitd limits delete --force, or DELETE /v1/limits/{name}?force=true)",
			name, leasesHolding(l.pool, nowNanos)))}
	}
	if l.pool != nil {
		s.dropPool(l.pool)
	}
	s.unkey(l, KeyDeleted)
	s.removeLimit(l)
	return DeleteResult{Existed: true}
}

// insertLimit makes a new limit called name, running conf (acquired for
// it) with pacer, created by the entry at index.
func (s *state) insertLimit(name string, conf *limitConfig, index uint64, pacer bucket.Pacer) *limit {
	l := &limit{name: name}
	l.setConfig(s.configs, conf, index, pacer)
	l.bornIndex, l.createdIndex = index, index
	s.limits[name] = l
	s.names.insert(l)
	return l
}

// removeLimit forgets limit l (not leased, not a templated key).
func (s *state) removeLimit(l *limit) {
	s.configs.release(l.conf)
	delete(s.limits, l.name)
	s.names.remove(l)
	s.setShadow(l, false)
	s.countExplicit(l, false)
	if l.pool != nil {
		s.pooled.remove(l)
	}
}

// setShadow sets whether l is in shadow mode, and its place in the
// shadow names.
func (s *state) setShadow(l *limit, shadow bool) {
	if shadow != l.shadow {
		if shadow {
			s.shadows.insert(l)
		} else {
			s.shadows.remove(l)
		}
	}
	l.shadow = shadow
}

// countExplicit counts explicit limit l among the explicit limits of its
// name's prefix (explicitPrefixes), or stops counting it: nothing if it
// already is, or is not.
func (s *state) countExplicit(l *limit, counted bool) {
	if counted == l.explicitCounted {
		return
	}
	l.explicitCounted = counted
	i := strings.IndexByte(l.name, ':')
	if i <= 0 {
		return
	}
	prefix := l.name[:i]
	if counted {
		s.explicitPrefixes[prefix]++
	} else if s.explicitPrefixes[prefix]--; s.explicitPrefixes[prefix] == 0 {
		delete(s.explicitPrefixes, prefix)
	}
}

// decide decides one reserve at nowNanos and updates the counters. Requests
// that can never be granted under the current config, and errors of the
// pacer (e.g. arithmetic overflow), are Invalid with a Detail: a domain
// outcome, identical on every replica, not a failure of the log.
func (l *limit) decide(nowNanos int64, r *Reserve) outcome {
	if l.pool != nil {
		return outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
			"limit %q is leased: its permits are handed out to workers by lease, not reserved one request at a time (reserve through a worker, or make the limit linearized again)",
			l.name))}
	}
	if r.Permits > l.conf.maxPermits {
		return outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
			"limit %q grants at most %d permits per request under its current configuration (%s); %d requested",
			l.name, l.conf.maxPermits, l.configName(), r.Permits))}
	}
	if l.conf.cfg.Spec.Algorithm == bucket.Concurrency {
		// A hold granted here would have no reservation to release it
		// by: it would take its slot for the whole TTL.
		return outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
			"limit %q is an in-flight cap: reserve it in the reservation form (POST /v1/reserve), whose reservation can be released when the call ends",
			l.name))}
	}
	slack := l.grantSlack(nowNanos, nowNanos) // a reserve is served at nextFree as of now
	d, err := l.pacer.Reserve(nowNanos, r.Permits, r.MaxWaitNanos)
	if err != nil {
		return outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
			"limit %q cannot decide %d permits with max wait %dns: %v", l.name, r.Permits, r.MaxWaitNanos, err))}
	}
	if l.shadow {
		l.countShadow(nowNanos, d, r.Permits, slack)
		// Answered at once and without an expiry (shadow mode refuses
		// nothing, not even an answer held past an expiry), so its replay
		// expires like any grant whose fresh answer has none.
		o := outcome{status: Granted, atNanos: nowNanos}
		if p := l.replayPeriod(); p > 0 {
			o.expiresAtNanos, o.replayExpiry = replayExpiry(nowNanos, p), true
		}
		return o
	}
	if d.Granted {
		l.changedByGrant(slack, d.AtNanos)
	}
	if !d.Granted {
		l.refusedRequests++
		return outcome{status: Refused, atNanos: d.AtNanos, detail: l.refusalDetail(nowNanos, r.Permits, r.MaxWaitNanos, d.AtNanos)}
	}
	l.grantedRequests++
	l.grantedPermits += uint64(r.Permits)
	o := outcome{status: Granted, atNanos: d.AtNanos, expiresAtNanos: d.ExpiresAtNanos, spacingNanos: d.SpacingNanos}
	if p := l.replayPeriod(); o.expiresAtNanos == 0 && p > 0 {
		// Algorithms without expiry: a replay of this grant is usable for
		// one interval after its time, like a strict permit for its expiry.
		o.expiresAtNanos, o.replayExpiry = replayExpiry(d.AtNanos, p), true
	}
	return o
}

// Why a strict limit refused a reserve it could have served within the
// reserve's max wait (ReserveResult.Detail of a fresh refusal).
const (
	// RefusedNoReserveAhead: its MaxReserved is 0.
	RefusedNoReserveAhead = "no permit is free now, and the limit may not reserve one ahead: its max_reserved is 0 " +
		"(set max_reserved, permitd limits put --max-reserved, to let a reserve wait for its permit)"
	// RefusedReservedAheadFull: its MaxReserved slots ahead of now are
	// taken.
	RefusedReservedAheadFull = "the limit may not reserve that far ahead: its max_reserved permits ahead of now are taken " +
		"(a larger max_reserved, permitd limits put --max-reserved, lets a reserve wait longer)"
)

// refusalDetail says why a strict limit refused n permits whose slots it
// could serve from atNanos, decided at nowNanos for a reserve that waits
// at most maxWaitNanos: when atNanos is within the max wait and the slots
// end before the end of the int64 timeline, the only condition of
// StrictPacer.Reserve (and ReserveAt) left is MaxReserved. Empty for every
// other refusal (the permit is further than the max wait) and algorithm.
// The details are constants: a refusal formats nothing.
func (l *limit) refusalDetail(nowNanos, n, maxWaitNanos, atNanos int64) string {
	i := l.conf.cfg.IntervalNanos
	if l.conf.cfg.Spec.Algorithm != bucket.Strict || i <= 0 || atNanos-nowNanos > maxWaitNanos || n > (math.MaxInt64-atNanos-1)/i {
		return ""
	}
	if l.conf.cfg.Spec.MaxReserved == 0 {
		return RefusedNoReserveAhead
	}
	return RefusedReservedAheadFull
}

// replayPeriod is how long after its time a replay of a grant on l whose
// fresh answer has no expiry stays usable: one interval, or an in-flight
// cap's hold TTL (0 for an infinite rate: its permits cost nothing).
func (l *limit) replayPeriod() int64 {
	if l.conf.cfg.Spec.Algorithm == bucket.Concurrency {
		return int64(l.conf.cfg.Spec.HoldTTL)
	}
	return l.conf.cfg.IntervalNanos
}

// replayExpiry is when a replayed grant of an algorithm without expiry
// stops being usable: one interval after its time (saturating; a time at
// the end of the int64 timeline never expires, as 0 means).
func replayExpiry(atNanos, intervalNanos int64) int64 {
	if atNanos > math.MaxInt64-intervalNanos {
		return math.MaxInt64
	}
	return atNanos + intervalNanos
}

// countShadow counts a shadow limit's decision d on a request for permits
// made at nowNanos, which is granted at once whatever d says; slackNanos
// is the grant's slack (settle.go, "Late refunds").
func (l *limit) countShadow(nowNanos int64, d bucket.Decision, permits, slackNanos int64) {
	t := l.tallying()
	switch {
	case !d.Granted:
		t.shadowRefused++
	case d.AtNanos > nowNanos:
		t.shadowWaited++
	}
	if d.Granted {
		l.changedByGrant(slackNanos, d.AtNanos)
	}
	t.shadowGranted++
	l.grantedRequests++
	l.grantedPermits += uint64(permits)
}
