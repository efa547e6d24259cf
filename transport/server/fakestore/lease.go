package fakestore

import (
	"context"
	"fmt"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
)

// lease.go: the lease commands, through the register's own lease book.

// PutLeasePolicy implements server.Store.
func (s *Store) PutLeasePolicy(ctx context.Context, p fsm.LeasePolicy) (fsm.LeasePolicyResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.LeasePolicyResult{}, err
	}
	v, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) { return fsm.AppendLeasePolicy(nil, st, p) })
	if err != nil {
		return fsm.LeasePolicyResult{}, err
	}
	res := v.(fsm.LeasePolicyResult)
	switch {
	case res.UnknownLimit:
		return res, notFound(p.Limit)
	case !res.Applied:
		return res, fmt.Errorf("%w: lease policy of limit %q: %s", node.ErrInvalid, p.Limit, res.Detail)
	}
	return res, nil
}

// Lease implements server.Store.
func (s *Store) Lease(ctx context.Context, q fsm.Lease) (fsm.LeaseResult, error) {
	return s.leaseCommand(ctx, q, q.Limit, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendLease(nil, st, q) })
}

// Renew implements server.Store.
func (s *Store) Renew(ctx context.Context, q fsm.Renew) (fsm.LeaseResult, error) {
	return s.leaseCommand(ctx, q, q.Limit, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendRenew(nil, st, q) })
}

// Return implements server.Store.
func (s *Store) Return(ctx context.Context, q fsm.Return) (fsm.LeaseResult, error) {
	return s.leaseCommand(ctx, q, q.Limit, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendReturn(nil, st, q) })
}

// leaseCommand records cmd and decides it (or lets the lease func do),
// mapping the outcomes the API reports as errors as the node does.
func (s *Store) leaseCommand(ctx context.Context, cmd any, limit string, encode func(st fsm.Stamp) ([]byte, error)) (fsm.LeaseResult, error) {
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
	info, ok := s.f.Limit(limit)
	switch {
	case !ok:
		return fsm.LeaseResult{}, notFound(limit)
	case !info.Leased:
		return fsm.LeaseResult{}, fmt.Errorf("%w: limit %q is not leased", node.ErrInvalid, limit)
	}
	v, err := s.applyLocked(encode)
	if err != nil {
		return fsm.LeaseResult{}, err
	}
	res := v.(fsm.LeaseResult)
	switch res.Status {
	case fsm.LeaseUnknownLimit:
		return res, notFound(limit)
	case fsm.LeaseInvalid:
		return res, fmt.Errorf("%w: %s", node.ErrInvalid, res.Detail)
	}
	if res.Status == fsm.LeaseGranted && res.ExpiresInNanos < 0 {
		return fsm.LeaseResult{Status: fsm.LeaseFenced, LeaseID: res.LeaseID, Epoch: res.Epoch, Duplicate: true,
			Detail: "the grant answered to this request_id expired before the retry arrived"}, nil
	}
	return res, nil
}

// LeaseView implements server.Store.
func (s *Store) LeaseView(ctx context.Context, name string) (fsm.LeasePoolInfo, []fsm.LeaseInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.LeasePoolInfo{}, nil, err
	}
	// A noop entry brings minting and expiries up to the store's clock.
	if _, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) { return fsm.AppendNoop(nil, st), nil }); err != nil {
		return fsm.LeasePoolInfo{}, nil, err
	}
	if _, ok := s.f.Limit(name); !ok {
		return fsm.LeasePoolInfo{}, nil, notFound(name)
	}
	p, ok := s.f.LeasePool(name)
	if !ok {
		return fsm.LeasePoolInfo{}, nil, fmt.Errorf("%w: limit %q is not leased", node.ErrInvalid, name)
	}
	return p, s.f.Leases(name), nil
}
