package fsm

import (
	"container/heap"
	"encoding/binary"
)

// leasesnapshot.go: the lease book section of the snapshot (after the
// sessions; see snapshot.go):
//
//	last lease id   uvarint
//	pool count      uvarint, then per leased limit, sorted by name (each
//	                names a limit of the snapshot whose rate can be leased):
//	    name            uvarint length + bytes
//	    burst spec, max outstanding spec   uvarint (0 = default)
//	    accrued to      uvarint (cluster time)
//	    minted, free, outstanding, spent, stolen, expired, stolen in
//	                    uvarint each (minted = free + outstanding + spent +
//	                    stolen + expired)
//	    opened, renewals, returns, expirations, fenced   uvarint each
//	    lease count     uvarint (<= MaxLeasesPerLimit), then per lease, by
//	                    id strictly ascending:
//	        id, epoch       uvarint (1 <= id <= last lease id, unique over
//	                        all limits; epoch >= 1)
//	        active          byte (0/1)
//	        holder, group   uvarint length + bytes
//	        granted at, expires at, stolen in   uvarint
//	        if active: weight, demand, share, permits, carry, entitled,
//	                   entitled remainder, mint mark   uvarint (entitled <=
//	                   expires at - granted at, remainder < 10^12, both 0
//	                   if share is 0; mint mark <= the pool's minted)
//	        linger count    uvarint (<= maxLingerGrants; >= 1 if not
//	                        active), then per entry, until strictly
//	                        ascending: until, permits uvarint
//
// Restore checks every bound and the accounts (outstanding = the grants of
// the active leases plus every lingering entry; minted = free + outstanding
// + settled); the derived indexes (holders, groups, the expiry heap) are
// rebuilt.

// minPoolRecordLen and minLeaseRecordLen bound preallocation for claimed
// counts.
const (
	minPoolRecordLen  = 16
	minLeaseRecordLen = 10
)

func (s *state) leaseBookSizeHint() int {
	n := 16
	s.pooled.each(func(l *limit) bool {
		p := l.pool
		n += len(l.name) + 96
		for _, ls := range p.leases {
			n += 64 + len(ls.holder) + len(ls.group) + 20*len(ls.linger)
		}
		return true
	})
	return n
}

// appendLeaseBook appends the lease book section.
func (s *state) appendLeaseBook(b []byte) []byte {
	b = binary.AppendUvarint(b, s.lastLeaseID)
	b = binary.AppendUvarint(b, uint64(s.pooled.len()))
	s.pooled.each(func(l *limit) bool {
		b = appendPool(b, l.name, l.pool)
		return true
	})
	return b
}

// appendPool appends the lease pool of the limit called name.
func appendPool(b []byte, name string, p *leasePool) []byte {
	b = appendBytes(b, name)
	for _, v := range [...]int64{p.burstSpec, p.maxOutSpec, p.accruedToNanos,
		p.minted, p.free, p.outstanding, p.spent, p.stolen, p.expired, p.stolenIn} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	for _, v := range [...]uint64{p.opened, p.renewals, p.returns, p.expirations, p.fenced} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(p.leases)))
	for _, l := range p.leases {
		b = binary.AppendUvarint(b, l.id)
		b = binary.AppendUvarint(b, l.epoch)
		if l.active {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = appendBytes(b, l.holder)
		b = appendBytes(b, l.group)
		b = binary.AppendUvarint(b, uint64(l.grantedAtNanos))
		b = binary.AppendUvarint(b, uint64(l.expiresAtNanos))
		b = binary.AppendUvarint(b, uint64(l.stolenIn))
		if l.active {
			for _, v := range [...]int64{l.weight, l.demand, l.share, l.permits, l.carry, l.entitled, l.entitledRem, l.mintMark} {
				b = binary.AppendUvarint(b, uint64(v))
			}
		}
		b = binary.AppendUvarint(b, uint64(len(l.linger)))
		for _, g := range l.linger {
			b = binary.AppendUvarint(b, uint64(g.untilNanos))
			b = binary.AppendUvarint(b, uint64(g.permits))
		}
	}
	return b
}

// decodeLeaseBook decodes and validates the lease book section into st
// (whose limits are already decoded) and rebuilds the derived indexes.
func decodeLeaseBook(r *reader, st *state) {
	st.lastLeaseID = r.uvarint("last lease id")
	n := r.uvarint("lease pool count")
	if r.err == nil && n > uint64(r.remaining()/minPoolRecordLen) {
		r.fail("claims %d lease pools but only %d bytes remain", n, r.remaining())
	}
	if r.err != nil {
		return
	}
	ids := make(map[uint64]bool)
	prev := ""
	for i := range int(n) {
		r.unit, r.index = "lease pool", i
		nameBytes := r.bytes("name", MaxNameLen)
		if r.err != nil {
			return
		}
		name := string(nameBytes)
		if i > 0 && name <= prev {
			r.fail("name %q does not sort after %q (pools must be sorted by name, without repeats)", name, prev)
			return
		}
		prev = name
		l, ok := st.limits[name]
		if !ok {
			r.fail("limit %q has a lease pool but is not in the snapshot", name)
			return
		}
		if why := leasable(name, l.conf.cfg.IntervalNanos); why != "" {
			r.fail("%s", why)
			return
		}
		p := decodePool(r, st, l, ids)
		if r.err != nil {
			return
		}
		l.pool = p
		st.pooled.insert(l)
	}
	r.unit = ""
	st.pooled.each(func(l *limit) bool {
		for _, ls := range l.pool.leases {
			st.expiries = append(st.expiries, ls)
		}
		return true
	})
	for i, ls := range st.expiries {
		ls.heapIndex = i
	}
	heap.Init(&st.expiries)
}

func decodePool(r *reader, st *state, lim *limit, ids map[uint64]bool) *leasePool {
	p := &leasePool{byHolder: make(map[string]*lease)}
	p.burstSpec = r.int64Snap("burst spec")
	p.maxOutSpec = r.int64Snap("max outstanding spec")
	p.accruedToNanos = r.int64Snap("accrued to")
	for _, f := range [...]struct {
		name string
		v    *int64
	}{{"minted", &p.minted}, {"free", &p.free}, {"outstanding", &p.outstanding}, {"spent", &p.spent},
		{"stolen", &p.stolen}, {"expired", &p.expired}, {"stolen in", &p.stolenIn}} {
		*f.v = r.int64Snap(f.name)
	}
	for _, f := range [...]struct {
		name string
		v    *uint64
	}{{"opened", &p.opened}, {"renewals", &p.renewals}, {"returns", &p.returns}, {"expirations", &p.expirations}, {"fenced", &p.fenced}} {
		*f.v = r.uvarint(f.name)
	}
	count := r.uvarintMax("lease count", MaxLeasesPerLimit)
	if r.err == nil && count > uint64(r.remaining()/minLeaseRecordLen) {
		r.fail("claims %d leases but only %d bytes remain", count, r.remaining())
	}
	if r.err != nil {
		return nil
	}
	if p.burstSpec > MaxLeasePoolPermits || p.maxOutSpec > MaxLeasePoolPermits {
		r.fail("burst %d or max outstanding %d permits exceeds %d", p.burstSpec, p.maxOutSpec, MaxLeasePoolPermits)
		return nil
	}
	var held uint64 // grants plus lingering permits, each < 2^63, at most 4096*5 of them
	p.leases = make([]*lease, 0, int(count))
	for j := range int(count) {
		ls := decodeLeaseRecord(r, st, lim, p, j)
		if r.err != nil {
			return nil
		}
		if ids[ls.id] {
			r.fail("lease id %d appears twice", ls.id)
			return nil
		}
		ids[ls.id] = true
		held += uint64(ls.permits) + uint64(ls.lingeringPermits())
		p.leases = append(p.leases, ls)
		if ls.active {
			if other := p.byHolder[ls.holder]; other != nil {
				r.fail("holder %q holds leases %d and %d (allowed: one active lease per holder)", ls.holder, other.id, ls.id)
				return nil
			}
			p.activate(ls)
		}
	}
	if held != uint64(p.outstanding) {
		r.fail("outstanding %d permits, but its leases hold %d", p.outstanding, held)
		return nil
	}
	var sum uint64
	for _, v := range [...]int64{p.free, p.outstanding, p.spent, p.stolen, p.expired} {
		sum += uint64(v) // five values < 2^63: cannot wrap
	}
	if sum != uint64(p.minted) {
		r.fail("minted %d permits, but free + outstanding + settled = %d", p.minted, sum)
		return nil
	}
	return p
}

func decodeLeaseRecord(r *reader, st *state, lim *limit, p *leasePool, j int) *lease {
	ls := &lease{limit: lim.name, pool: p, heapIndex: -1}
	ls.id = r.uvarint("lease id")
	ls.epoch = r.uvarint("epoch")
	active := r.byte1("active")
	holder := r.bytes("holder", MaxNameLen)
	group := r.bytes("group", MaxNameLen)
	ls.grantedAtNanos = r.int64Snap("granted at")
	ls.expiresAtNanos = r.int64Snap("expires at")
	ls.stolenIn = r.int64Snap("stolen in")
	if active == 1 {
		ls.active = true
		ls.weight = r.int64Snap("weight")
		ls.demand = r.int64Snap("demand")
		ls.share = r.int64Snap("share")
		ls.permits = r.int64Snap("permits")
		ls.carry = r.int64Snap("carry")
		ls.entitled = r.int64Snap("entitled")
		ls.entitledRem = r.int64Snap("entitled remainder")
		ls.mintMark = r.int64Snap("mint mark")
	}
	nl := r.uvarintMax("linger count", maxLingerGrants)
	if r.err != nil {
		return nil
	}
	for k := range int(nl) {
		g := lingerGrant{untilNanos: r.int64Snap("linger until"), permits: r.int64Snap("linger permits")}
		if r.err != nil {
			return nil
		}
		if g.permits < 1 || g.untilNanos <= st.lastNowNanos || (k > 0 && g.untilNanos <= ls.linger[k-1].untilNanos) {
			r.fail("lease %d: lingering entry %d (%d permits until %d) must hold >= 1 permit, end after last now %d, in ascending order",
				ls.id, k, g.permits, g.untilNanos, st.lastNowNanos)
			return nil
		}
		ls.linger = append(ls.linger, g)
	}
	lastID := uint64(0)
	if j > 0 {
		lastID = p.leases[j-1].id
	}
	switch {
	case active > 1:
		r.fail("lease %d: active byte %d (allowed: 0, 1)", ls.id, active)
	case ls.id <= lastID || ls.id > st.lastLeaseID:
		r.fail("lease id %d must sort after %d and be at most the last lease id %d", ls.id, lastID, st.lastLeaseID)
	case ls.epoch < 1:
		r.fail("lease %d: epoch 0 (allowed: >= 1)", ls.id)
	case validateName(holder) != nil || validateName(group) != nil:
		r.fail("lease %d: holder %q or group %q is not a valid name", ls.id, holder, group)
	case ls.grantedAtNanos > st.lastNowNanos || ls.expiresAtNanos-ls.grantedAtNanos < MinLeaseTTLNanos ||
		ls.expiresAtNanos-ls.grantedAtNanos > MaxLeaseTTLNanos:
		r.fail("lease %d: granted at %d, expires at %d: must be granted by last now %d for a TTL of %d-%d ns",
			ls.id, ls.grantedAtNanos, ls.expiresAtNanos, st.lastNowNanos, MinLeaseTTLNanos, MaxLeaseTTLNanos)
	case !ls.active && len(ls.linger) == 0:
		r.fail("lease %d is not active and has nothing lingering (it should have been dropped)", ls.id)
	case ls.active && ls.expiresAtNanos <= st.lastNowNanos:
		r.fail("lease %d is active but expired at %d, before last now %d", ls.id, ls.expiresAtNanos, st.lastNowNanos)
	// A share is at most the capacity of the rate it was computed at, and
	// the rate may have changed since (a share above the current capacity
	// is legal until the lease's next grant): the bound is the fastest
	// rate any limit can have.
	case ls.active && (ls.weight < 1 || ls.weight > MaxLeaseWeight || ls.demand > MaxDemandMilliPermitsPerSec ||
		ls.share > milliPermitsPerSecNanos || ls.carry >= milliPermitsPerSecNanos):
		r.fail("lease %d: weight %d, demand %d, share %d or carry %d out of range (weight 1-%d, demand <= %d, share <= %d, carry < %d)",
			ls.id, ls.weight, ls.demand, ls.share, ls.carry, MaxLeaseWeight, MaxDemandMilliPermitsPerSec, milliPermitsPerSecNanos, milliPermitsPerSecNanos)
	case ls.active && (ls.entitled > ls.expiresAtNanos-ls.grantedAtNanos || ls.entitledRem >= milliPermitsPerSecNanos ||
		(ls.share == 0 && (ls.entitled != 0 || ls.entitledRem != 0))):
		r.fail("lease %d: entitled %d permits, remainder %d out of range (entitled <= its grant's TTL %d, remainder < %d, both 0 with share 0)",
			ls.id, ls.entitled, ls.entitledRem, ls.expiresAtNanos-ls.grantedAtNanos, milliPermitsPerSecNanos)
	case ls.active && ls.mintMark > p.minted:
		r.fail("lease %d: mint mark %d is after the pool's %d minted permits", ls.id, ls.mintMark, p.minted)
	}
	if r.err != nil {
		return nil
	}
	ls.holder, ls.group = string(holder), string(group)
	return ls
}
