package fsm

import (
	"time"
)

// leasemint.go: minting, the lease pool's only source of permits.
//
//	free += (now - accruedTo) / I, while free < C
//
// C and O default to one second of permits at the limit's interval I.

// defaultPoolPermits is the default of C and O: one second of permits at
// the given interval, at least 1.
func defaultPoolPermits(intervalNanos int64) int64 {
	return max(1, int64(time.Second)/intervalNanos)
}

func (p *leasePool) burst(intervalNanos int64) int64 {
	if p.burstSpec != 0 {
		return p.burstSpec
	}
	return defaultPoolPermits(intervalNanos)
}

func (p *leasePool) maxOutstanding(intervalNanos int64) int64 {
	if p.maxOutSpec != 0 {
		return p.maxOutSpec
	}
	return defaultPoolPermits(intervalNanos)
}

// accrue mints the permits due at nowNanos: one per interval since
// accruedToNanos, while free < C. Permits that would take free above C
// are not minted (and not counted): the clock restarts at now. The result
// does not depend on how often accrue is called between two other changes
// of the pool.
func (p *leasePool) accrue(nowNanos, intervalNanos int64) {
	if nowNanos <= p.accruedToNanos {
		return
	}
	c := p.burst(intervalNanos)
	if p.free >= c {
		p.accruedToNanos = nowNanos
		return
	}
	k := (nowNanos - p.accruedToNanos) / intervalNanos // both >= 0: no overflow
	if room := c - p.free; k >= room {
		p.minted += room
		p.free = c
		p.accruedToNanos = nowNanos
		return
	}
	p.minted += k
	p.free += k
	p.accruedToNanos += k * intervalNanos
}
