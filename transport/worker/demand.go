package worker

import (
	"math"

	"github.com/permitd/permitd/transport/client"
)

// demandMeter measures a worker's demand: the permits its callers asked
// for (each Acquire or TryAcquire call counts its n once, granted or not)
// per second over the last two reporting periods (the current one and the
// one before; two halve the quantization noise of a low demand, at the
// cost of following a change over two renewals instead of one), in
// milli-permits per second.
//
// A caller that blocks in Acquire until served asks at the rate it is
// served, so a closed loop reports what it gets; callers that want their
// demand seen above their share should ask open-loop (TryAcquire at the
// rate they want), or be several.
type demandMeter struct {
	// sinceNanos starts the current period, prevSinceNanos the one
	// before (equal before the first take).
	sinceNanos, prevSinceNanos int64
	asked, prevAsked           int64
	// heldNanos adds up the time callers were held back in the current
	// period: how far ahead their pacing slot lay (slept or not), and how
	// long they waited for permits.
	heldNanos int64
	// lastMilli is the demand measured at the last take (before headroom);
	// lastHeld reports that callers were held back for at least half of
	// the period that take ended (summed over concurrent callers). The
	// period before does not count: held time sums over callers, so one
	// starved period (a first grant that came late, with many callers
	// each waiting up to a second) outweighed a following unheld one, and
	// a group that wanted 30/s kept reporting twice its share for a
	// renewal more, holding back the others' shares (8 s at a 4 s TTL in
	// the leader-kill end-to-end test).
	lastMilli int64
	lastHeld  bool
}

// heldBackGrowth is the factor by which a worker whose callers were held
// back raises its reported demand above its share (see reportDemand): a
// caller that blocks in Acquire asks at the rate it is served, so its
// measured demand is the share and, with 10 % headroom only, a fleet of
// closed-loop callers on an unsaturated limit would take dozens of renewal
// periods to reach the rate they can spend. Doubling reaches it in
// log2(wanted/share) periods; the register's max-min division caps the
// share at the capacity and the fair level anyway.
const heldBackGrowth = 2

// demandHeadroomDiv sets the headroom added to a reported demand: a worker
// reports measured + measured/demandHeadroomDiv (10 %), so that one that
// wants less than its fair share gets a little more than it measured and
// is not starved by noise in the measurement or by bursts within a period.
// Workers that want more than their share are capped by the share anyway.
const demandHeadroomDiv = 10

// add counts n asked permits.
func (m *demandMeter) add(n int64) { m.asked += n }

// hold adds d nanoseconds a caller was held back.
func (m *demandMeter) hold(d int64) { m.heldNanos += max(d, 0) }

// rate returns the demand measured over the previous and the current
// period (0 before any time has passed).
func (m *demandMeter) rate(nowNanos int64) int64 {
	return perSecMilli(m.prevAsked+m.asked, nowNanos-m.prevSinceNanos)
}

// take returns the demand measured over the previous and the current
// period and starts a new period at now.
func (m *demandMeter) take(nowNanos int64) int64 {
	r := m.rate(nowNanos)
	m.lastHeld = 2*m.heldNanos >= nowNanos-m.sinceNanos && nowNanos > m.sinceNanos
	m.prevSinceNanos, m.prevAsked = m.sinceNanos, m.asked
	m.sinceNanos, m.asked, m.heldNanos, m.lastMilli = nowNanos, 0, 0, r
	return r
}

// measure returns the demand to report at now: the one measured since the
// last report, starting a new period, if that period is at least
// minWindowNanos long; otherwise (a lease right after a fenced renewal, a
// quick retry) the last measurement, without starting a new period, so
// that a very short window reports neither 0 nor a burst's rate.
func (m *demandMeter) measure(nowNanos, minWindowNanos int64) int64 {
	if nowNanos-m.sinceNanos < minWindowNanos {
		return m.lastMilli
	}
	return m.take(nowNanos)
}

// recent returns the demand measured over the current period alone if it
// has lasted at least minWindowNanos, else the last measurement: what a
// donor expects to need (a worker whose callers went quiet at the start of
// a period has idle permits within minWindowNanos).
func (m *demandMeter) recent(nowNanos, minWindowNanos int64) int64 {
	if nowNanos-m.sinceNanos < minWindowNanos {
		return m.lastMilli
	}
	return perSecMilli(m.asked, nowNanos-m.sinceNanos)
}

// current returns the larger of the last measured demand and the one
// measured up to now.
func (m *demandMeter) current(nowNanos int64) int64 { return max(m.lastMilli, m.rate(nowNanos)) }

// reportDemand returns the demand a worker whose share is shareMilli
// reports at now: the measurement (measure) plus headroom, or, when its
// callers were held back (waiting for pacing or for permits) for at least
// half of the last measured period (they want more than they get), at least
// heldBackGrowth times the share.
func (m *demandMeter) reportDemand(nowNanos, minWindowNanos, shareMilli int64) int64 {
	d := withHeadroom(m.measure(nowNanos, minWindowNanos))
	if m.lastHeld && shareMilli > 0 {
		d = max(d, min(shareMilli, client.MaxDemandMilliPerSec/heldBackGrowth)*heldBackGrowth)
	}
	return d
}

// withHeadroom returns the demand to report for a measured one.
func withHeadroom(milli int64) int64 {
	return min(milli+milli/demandHeadroomDiv, client.MaxDemandMilliPerSec)
}

// perSecMilli converts n permits over elapsedNanos into milli-permits per
// second, capped at client.MaxDemandMilliPerSec (a measurement, not a
// replicated value: float arithmetic is fine here).
func perSecMilli(n, elapsedNanos int64) int64 {
	if n <= 0 || elapsedNanos <= 0 {
		return 0
	}
	r := math.Ceil(float64(n) * 1e12 / float64(elapsedNanos))
	if r >= float64(client.MaxDemandMilliPerSec) {
		return client.MaxDemandMilliPerSec
	}
	return int64(r)
}

// permitsOver returns how many permits rateMilli gives over durNanos,
// rounded up (0 for a non-positive duration).
func permitsOver(rateMilli, durNanos int64) int64 {
	if rateMilli <= 0 || durNanos <= 0 {
		return 0
	}
	return int64(math.Ceil(float64(rateMilli) * float64(durNanos) / 1e12))
}
