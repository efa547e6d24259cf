package worker

import (
	"fmt"
	"math"
	"time"

	"github.com/permitd/permitd/bucket"
)

// pacer spreads a worker's spending over time with a bucket hybrid pacer
// (bucket/hybrid.go) driven by the worker's monotonic clock. It only
// spreads: the grant's count is the hard cap, checked separately. Its rate
// is the worker's share; a worker that fell behind catches up at
// BurstRatio times the share, never faster.
//
// It is not safe for concurrent use: the worker's mutex guards it.
type pacer struct {
	burstRatio float64
	// rateMilli is the current rate in milli-permits per second (0: no
	// pacer yet).
	rateMilli int64
	p         bucket.Pacer
	// maxChunk is the most permits the pacer grants in one reservation
	// (Config.MaxPermits).
	maxChunk int64
	// undo holds the pacer state before a multi-chunk reservation.
	undo []byte
}

// spec returns the hybrid spec for a rate in milli-permits per second.
func (p *pacer) spec(rateMilli int64) bucket.Spec {
	return bucket.Spec{Algorithm: bucket.Hybrid, Rate: float64(rateMilli) / 1000, Per: time.Second, BurstRatio: p.burstRatio}
}

// reset forgets the pacer's state: the next reservation starts from a
// full active pool, with nothing to catch up.
func (p *pacer) reset() {
	p.p, p.rateMilli, p.maxChunk = nil, 0, 0
}

// trimBacklog resets the pacer if, at now, more than maxNanos of time is
// unclaimed (the caller was idle, asked less than its share, or had no
// permits, for that long). The worker calls it at every grant with a
// quarter of the renewal period: it catches up at the burst ratio what it
// fell behind recently (scheduling jitter, a renewal's round trip), not
// what it left unclaimed while idle, below its share or cut off, which its
// renewals credited back to the register or which was never granted (and
// catching that up later, at a new share, would take more than the share
// for a long time).
func (p *pacer) trimBacklog(nowNanos, maxNanos int64) {
	hp, ok := p.p.(*bucket.HybridPacer)
	if !ok {
		return
	}
	if hp.WaitingNanos() > maxNanos || nowNanos-hp.FillNanos() > maxNanos {
		p.reset()
	}
}

// setRate switches the pacer to rateMilli (> 0) at now, keeping its pools
// (the time it is behind stays claimable at the burst ratio).
func (p *pacer) setRate(nowNanos, rateMilli int64) error {
	if rateMilli == p.rateMilli {
		return nil
	}
	if rateMilli <= 0 {
		return fmt.Errorf("worker: pacing rate %d milli-permits/s (allowed: > 0)", rateMilli)
	}
	c, err := bucket.Compile(p.spec(rateMilli))
	if err != nil {
		return err
	}
	if p.p == nil {
		if p.p, err = bucket.New(c, nowNanos); err != nil {
			return err
		}
	} else if err := p.p.Reconfigure(nowNanos, c); err != nil {
		return err
	}
	p.rateMilli, p.maxChunk = rateMilli, c.MaxPermits()
	return nil
}

// reserve reserves n permits at now if they can be served within
// maxWaitNanos, and returns the time from which they may be used. More
// permits than the pacer grants at once are reserved in consecutive chunks,
// all or nothing. It reserves nothing when it refuses (ok false).
func (p *pacer) reserve(nowNanos, n, maxWaitNanos int64) (atNanos int64, ok bool, err error) {
	if p.p == nil {
		return nowNanos, true, nil // no rate yet: nothing to spread
	}
	if n <= p.maxChunk {
		d, err := p.p.Reserve(nowNanos, n, maxWaitNanos)
		return d.AtNanos, d.Granted, err
	}
	p.undo = p.p.AppendState(p.undo[:0])
	atNanos = nowNanos
	for rest := n; rest > 0; {
		k := min(rest, p.maxChunk)
		d, err := p.p.Reserve(nowNanos, k, maxWaitNanos)
		if err != nil || !d.Granted {
			if rerr := p.p.RestoreState(p.undo); rerr != nil && err == nil {
				err = rerr
			}
			return d.AtNanos, false, err
		}
		atNanos = d.AtNanos
		rest -= k
	}
	return atNanos, true, nil
}

// unboundedWait is the maxWait of a reservation without a deadline.
const unboundedWait = math.MaxInt64 / 4
