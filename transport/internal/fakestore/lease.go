package fakestore

import (
	"context"
	"fmt"
	"slices"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
)

// A simplified lease book, enough to drive the HTTP handler and the
// client: a new pool starts full (C permits minted, none later), a grant
// is min(demand × TTL, free, O - outstanding), permits reported stolen out
// are settled at once, and grants expire on the store's manual clock. The
// accounts keep minted = free + outstanding + settled. Errors and
// outcomes follow the node: an unknown limit is node.ErrNotFound, an
// invalid command node.ErrInvalid, Refused/Fenced/Granted/Returned are
// results; request IDs are deduplicated (without re-expressing times).

// pool is a leased limit's lease book.
type pool struct {
	burst, maxOut         int64
	burstSpec, maxOutSpec int64
	minted, free, out     int64
	settled, spent        int64
	stolen, expired       int64
	stolenIn              int64
	leases                []*lease // by id
	opened, renewals      uint64
	returns, expirations  uint64
	fenced                uint64
}

type lease struct {
	info fsm.LeaseInfo
}

// leaseRecord is a decided command kept for its request ID.
type leaseRecord struct {
	op  string
	res fsm.LeaseResult
}

// SetLeaseFunc replaces the lease, renew and return logic (nil: the
// built-in book). f receives the fsm.Lease, fsm.Renew or fsm.Return.
// Commands are still recorded.
func (s *Store) SetLeaseFunc(f func(ctx context.Context, cmd any) (fsm.LeaseResult, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaseF = f
}

// LeaseCommands returns every lease, renew and return that reached the
// store, in order.
func (s *Store) LeaseCommands() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.leaseCmds)
}

// oneSecond is the default capacity: one second of permits, at least 1.
func oneSecond(intervalNanos int64) int64 {
	return max(1, int64(1e9)/intervalNanos)
}

// PutLeasePolicy implements transport.Store.
func (s *Store) PutLeasePolicy(ctx context.Context, p fsm.LeasePolicy) (fsm.LeasePolicyResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.LeasePolicyResult{}, err
	}
	if err := p.Validate(); err != nil {
		return fsm.LeasePolicyResult{}, fmt.Errorf("%w: %v", node.ErrInvalid, err)
	}
	l, ok := s.limits[p.Limit]
	if !ok {
		return fsm.LeasePolicyResult{}, fmt.Errorf("limit %q: %w", p.Limit, node.ErrNotFound)
	}
	s.expireLeases()
	if !p.Leased {
		if l.pool != nil && len(l.pool.leases) > 0 {
			return fsm.LeasePolicyResult{Detail: fmt.Sprintf("limit %q stays leased: %d leases still hold permits", p.Limit, len(l.pool.leases))}, nil
		}
		l.pool, l.info.Leased = nil, false
		return fsm.LeasePolicyResult{Applied: true}, nil
	}
	interval := l.info.Config.IntervalNanos
	if interval <= 0 || interval > fsm.MaxLeasedIntervalNanos {
		return fsm.LeasePolicyResult{Detail: fmt.Sprintf("limit %q mints one permit per %dns: it cannot be leased", p.Limit, interval)}, nil
	}
	pl := l.pool
	if pl == nil {
		pl = &pool{}
		l.pool = pl
	}
	pl.burstSpec, pl.maxOutSpec = p.BurstPermits, p.MaxOutstandingPermits
	pl.burst, pl.maxOut = p.BurstPermits, p.MaxOutstandingPermits
	if pl.burst == 0 {
		pl.burst = oneSecond(interval)
	}
	if pl.maxOut == 0 {
		pl.maxOut = oneSecond(interval)
	}
	if pl.free < pl.burst {
		pl.minted += pl.burst - pl.free
		pl.free = pl.burst
	}
	l.info.Leased = true
	return fsm.LeasePolicyResult{Applied: true, BurstPermits: pl.burst, MaxOutstandingPermits: pl.maxOut}, nil
}

// Lease implements transport.Store.
func (s *Store) Lease(ctx context.Context, q fsm.Lease) (fsm.LeaseResult, error) {
	return s.leaseCommand(ctx, "lease", q, q.Limit, q.RequestID, func(l *limit) (fsm.LeaseResult, error) {
		p := l.pool
		for _, ls := range p.leases {
			if ls.info.Holder == q.Holder && ls.info.Active {
				return fsm.LeaseResult{Status: fsm.LeaseRefused, LeaseID: ls.info.ID, Epoch: ls.info.Epoch,
					RetryAfterNanos: max(1, ls.info.ExpiresAtNanos-s.nowNanos),
					Detail:          fmt.Sprintf("holder %q already holds lease %d (epoch %d)", q.Holder, ls.info.ID, ls.info.Epoch)}, nil
			}
		}
		s.lastLeaseID++
		ls := &lease{info: fsm.LeaseInfo{ID: s.lastLeaseID, Epoch: 1, Active: true, Holder: q.Holder, Group: q.Group,
			Weight: q.Weight, DemandMilliPermitsPerSec: q.DemandMilliPermitsPerSec}}
		p.leases = append(p.leases, ls)
		p.opened++
		s.grant(p, ls, q.TTLNanos)
		return fsm.LeaseResult{Status: fsm.LeaseGranted, LeaseID: ls.info.ID, Epoch: 1, Permits: ls.info.Permits,
			ExpiresInNanos: q.TTLNanos, ShareMilliPermitsPerSec: ls.info.ShareMilliPermitsPerSec}, nil
	})
}

// Renew implements transport.Store.
func (s *Store) Renew(ctx context.Context, q fsm.Renew) (fsm.LeaseResult, error) {
	return s.leaseCommand(ctx, "renew", q, q.Limit, q.RequestID, func(l *limit) (fsm.LeaseResult, error) {
		p := l.pool
		ls, res, err := p.live(q.Limit, q.LeaseID, q.Epoch, q.SpentPermits, q.StolenOutPermits)
		if ls == nil {
			return res, err
		}
		credit := p.settle(ls, q.SpentPermits, q.StolenOutPermits, q.StolenInPermits)
		ls.info.Epoch++
		ls.info.DemandMilliPermitsPerSec = q.DemandMilliPermitsPerSec
		p.renewals++
		s.grant(p, ls, q.TTLNanos)
		return fsm.LeaseResult{Status: fsm.LeaseGranted, LeaseID: ls.info.ID, Epoch: ls.info.Epoch, Permits: ls.info.Permits,
			ExpiresInNanos: q.TTLNanos, ShareMilliPermitsPerSec: ls.info.ShareMilliPermitsPerSec, CreditedPermits: credit}, nil
	})
}

// Return implements transport.Store.
func (s *Store) Return(ctx context.Context, q fsm.Return) (fsm.LeaseResult, error) {
	return s.leaseCommand(ctx, "return", q, q.Limit, q.RequestID, func(l *limit) (fsm.LeaseResult, error) {
		p := l.pool
		ls, res, err := p.live(q.Limit, q.LeaseID, q.Epoch, q.SpentPermits, q.StolenOutPermits)
		if ls == nil {
			return res, err
		}
		credit := p.settle(ls, q.SpentPermits, q.StolenOutPermits, q.StolenInPermits)
		p.remove(ls)
		p.returns++
		return fsm.LeaseResult{Status: fsm.LeaseReturned, LeaseID: ls.info.ID, Epoch: ls.info.Epoch, CreditedPermits: credit}, nil
	})
}

// leaseCommand records cmd, answers a known request ID, or decides it on
// the leased limit with decide.
func (s *Store) leaseCommand(ctx context.Context, op string, cmd any, limitName, requestID string, decide func(*limit) (fsm.LeaseResult, error)) (fsm.LeaseResult, error) {
	s.mu.Lock()
	if err := s.enter(ctx); err != nil {
		s.mu.Unlock()
		return fsm.LeaseResult{}, err
	}
	s.leaseCmds = append(s.leaseCmds, cmd)
	if f := s.leaseF; f != nil {
		s.mu.Unlock()
		return f(ctx, cmd)
	}
	defer s.mu.Unlock()
	if v, ok := cmd.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fsm.LeaseResult{}, fmt.Errorf("%w: %v", node.ErrInvalid, err)
		}
	}
	s.expireLeases()
	if requestID != "" {
		if rec, ok := s.leaseDedup[requestID]; ok {
			if rec.op != op {
				return fsm.LeaseResult{}, fmt.Errorf("%w: request id %q was used by a %s, not a %s", node.ErrInvalid, requestID, rec.op, op)
			}
			res := rec.res
			res.Duplicate = true
			return res, nil
		}
	}
	l, ok := s.limits[limitName]
	if !ok {
		return fsm.LeaseResult{}, fmt.Errorf("limit %q: %w", limitName, node.ErrNotFound)
	}
	if l.pool == nil {
		return fsm.LeaseResult{}, fmt.Errorf("%w: limit %q is not leased", node.ErrInvalid, limitName)
	}
	res, err := decide(l)
	if err == nil && requestID != "" {
		s.leaseDedup[requestID] = leaseRecord{op: op, res: res}
	}
	return res, err
}

// grant issues ls's next grant for ttlNanos at the store's time.
func (s *Store) grant(p *pool, ls *lease, ttlNanos int64) {
	want := ls.info.DemandMilliPermitsPerSec * (ttlNanos / 1e6) / 1e6
	n := max(0, min(want, p.free, p.maxOut-p.out))
	p.free -= n
	p.out += n
	ls.info.Permits = n
	ls.info.ShareMilliPermitsPerSec = ls.info.DemandMilliPermitsPerSec
	ls.info.GrantedAtNanos = s.nowNanos
	ls.info.ExpiresAtNanos = s.nowNanos + ttlNanos
}

// live returns the live lease id at epoch, or the Fenced result or
// Invalid error that ends the command.
func (p *pool) live(limit string, id, epoch uint64, spent, out int64) (*lease, fsm.LeaseResult, error) {
	i := slices.IndexFunc(p.leases, func(ls *lease) bool { return ls.info.ID == id })
	switch {
	case i < 0:
		p.fenced++
		return nil, fsm.LeaseResult{Status: fsm.LeaseFenced, Detail: fmt.Sprintf("lease %d is not live on limit %q", id, limit)}, nil
	case p.leases[i].info.Epoch != epoch:
		p.fenced++
		return nil, fsm.LeaseResult{Status: fsm.LeaseFenced, Detail: fmt.Sprintf("lease %d is at epoch %d, not %d", id, p.leases[i].info.Epoch, epoch)}, nil
	case spent > p.leases[i].info.Permits || out > p.leases[i].info.Permits-spent:
		return nil, fsm.LeaseResult{}, fmt.Errorf("%w: lease %d reports %d spent and %d stolen out of a grant of %d permits",
			node.ErrInvalid, id, spent, out, p.leases[i].info.Permits)
	}
	return p.leases[i], fsm.LeaseResult{}, nil
}

// settle settles ls's current grant as reported and returns the credit.
func (p *pool) settle(ls *lease, spent, out, in int64) int64 {
	credit := ls.info.Permits - spent - out
	p.out -= ls.info.Permits
	p.free += credit
	p.settled += spent + out
	p.spent += spent
	p.stolen += out
	p.stolenIn += in
	ls.info.StolenInPermits += in
	ls.info.Permits = 0
	return credit
}

func (p *pool) remove(ls *lease) {
	p.leases = slices.DeleteFunc(p.leases, func(x *lease) bool { return x == ls })
}

// expireLeases settles every grant whose expiry has passed.
func (s *Store) expireLeases() {
	for _, l := range s.limits {
		p := l.pool
		if p == nil {
			continue
		}
		for _, ls := range slices.Clone(p.leases) {
			if ls.info.ExpiresAtNanos <= s.nowNanos {
				p.out -= ls.info.Permits
				p.settled += ls.info.Permits
				p.expired += ls.info.Permits
				p.expirations++
				p.remove(ls)
			}
		}
	}
}

// LeaseView implements transport.Store.
func (s *Store) LeaseView(ctx context.Context, name string) (fsm.LeasePoolInfo, []fsm.LeaseInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.LeasePoolInfo{}, nil, err
	}
	s.expireLeases()
	l, ok := s.limits[name]
	if !ok {
		return fsm.LeasePoolInfo{}, nil, fmt.Errorf("limit %q: %w", name, node.ErrNotFound)
	}
	p := l.pool
	if p == nil {
		return fsm.LeasePoolInfo{}, nil, fmt.Errorf("%w: limit %q is not leased", node.ErrInvalid, name)
	}
	info := fsm.LeasePoolInfo{Limit: name, BurstPermits: p.burst, MaxOutstandingPermits: p.maxOut, BurstSpec: p.burstSpec,
		MaxOutstandingSpec: p.maxOutSpec, IntervalNanos: l.info.Config.IntervalNanos, MintedPermits: p.minted,
		FreePermits: p.free, OutstandingPermits: p.out, SettledPermits: p.settled, SpentPermits: p.spent,
		StolenPermits: p.stolen, ExpiredPermits: p.expired, StolenInPermits: p.stolenIn, ActiveLeases: len(p.leases),
		LeasesOpened: p.opened, Renewals: p.renewals, Returns: p.returns, Expirations: p.expirations, Fenced: p.fenced}
	out := make([]fsm.LeaseInfo, len(p.leases))
	for i, ls := range p.leases {
		out[i] = ls.info
	}
	return info, out, nil
}
