// Package fakestore is an in-memory transport.Store for tests of the HTTP
// handler and the Go client. It is a single strict register per limit on a
// manual clock: no raft, no goroutines, deterministic.
package fakestore

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
)

// Store is an in-memory store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	nowNanos int64
	version  uint64
	limits   map[string]*limit
	dedup    map[string]fsm.ReserveResult
	status   node.Status
	err      error
	reserveF func(context.Context, fsm.Reserve) (fsm.ReserveResult, error)
	calls    int
	reserves []fsm.Reserve

	// Leases (lease.go).
	leaseF      func(context.Context, any) (fsm.LeaseResult, error)
	leaseCmds   []any
	leaseDedup  map[string]leaseRecord
	lastLeaseID uint64
	lastSession uint64
}

type limit struct {
	info      fsm.LimitInfo
	nextNanos int64
	pool      *pool // nil unless leased
}

// New returns an empty store whose status is a ready single-node leader.
func New() *Store {
	return &Store{
		limits:     make(map[string]*limit),
		dedup:      make(map[string]fsm.ReserveResult),
		leaseDedup: make(map[string]leaseRecord),
		status: node.Status{
			ID: "n1", State: "leader", LeaderID: "n1", Term: 1, Ready: true,
			Servers: []node.Server{{ID: "n1", RaftAddr: "127.0.0.1:7000", Voter: true, Leader: true}},
		},
	}
}

// SetErr makes every call except Status fail with err (nil: succeed).
func (s *Store) SetErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// SetReserveFunc replaces the reserve logic (nil: the built-in strict
// register). Reserves are still recorded.
func (s *Store) SetReserveFunc(f func(context.Context, fsm.Reserve) (fsm.ReserveResult, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserveF = f
}

// SetStatus replaces the status Status returns.
func (s *Store) SetStatus(st node.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = st
}

// Advance moves the store's clock forward.
func (s *Store) Advance(nanos int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nowNanos += nanos
}

// Calls returns how many calls other than Status reached the store.
func (s *Store) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Reserves returns every reserve that reached the store, in order.
func (s *Store) Reserves() []fsm.Reserve {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reserves)
}

// PutLimit implements transport.Store.
func (s *Store) PutLimit(ctx context.Context, name string, cfg bucket.Config) (fsm.PutResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.PutResult{}, err
	}
	s.version++
	l, ok := s.limits[name]
	if !ok {
		l = &limit{}
		s.limits[name] = l
	}
	l.info = fsm.LimitInfo{Name: name, Config: cfg, Version: s.version,
		GrantedRequests: l.info.GrantedRequests, GrantedPermits: l.info.GrantedPermits, RefusedRequests: l.info.RefusedRequests,
		Leased: l.info.Leased}
	return fsm.PutResult{Version: s.version, Created: !ok}, nil
}

// DeleteLimit implements transport.Store.
func (s *Store) DeleteLimit(ctx context.Context, name string, force bool) (fsm.DeleteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.DeleteResult{}, err
	}
	l, ok := s.limits[name]
	if ok && l.pool != nil && len(l.pool.leases) > 0 && !force {
		return fsm.DeleteResult{}, fmt.Errorf("%w: limit %q is leased and leases still hold permits", node.ErrConflict, name)
	}
	delete(s.limits, name)
	return fsm.DeleteResult{Existed: ok}, nil
}

// Limit implements transport.Store.
func (s *Store) Limit(ctx context.Context, name string) (fsm.LimitInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.LimitInfo{}, err
	}
	l, ok := s.limits[name]
	if !ok {
		return fsm.LimitInfo{}, fmt.Errorf("limit %q: %w", name, node.ErrNotFound)
	}
	return l.info, nil
}

// Limits implements transport.Store.
func (s *Store) Limits(ctx context.Context) ([]fsm.LimitInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	out := make([]fsm.LimitInfo, 0, len(s.limits))
	for _, l := range s.limits {
		out = append(out, l.info)
	}
	slices.SortFunc(out, func(a, b fsm.LimitInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Reserve implements transport.Store: a strict register per limit (one
// permit every IntervalNanos, reservations up to maxWait ahead), with
// request-id deduplication.
func (s *Store) Reserve(ctx context.Context, r fsm.Reserve) (fsm.ReserveResult, error) {
	s.mu.Lock()
	if err := s.enter(ctx); err != nil {
		s.mu.Unlock()
		return fsm.ReserveResult{}, err
	}
	s.reserves = append(s.reserves, r)
	if f := s.reserveF; f != nil {
		s.mu.Unlock()
		return f(ctx, r)
	}
	defer s.mu.Unlock()
	key := r.RequestID
	if r.Session.ID != 0 {
		if r.Session.ID > s.lastSession {
			return fsm.ReserveResult{Status: fsm.SessionExpired, Detail: fmt.Sprintf("session %d is not open", r.Session.ID)}, nil
		}
		key = fmt.Sprintf("session %d seq %d", r.Session.ID, r.Session.Seq)
	}
	if key != "" {
		if res, ok := s.dedup[key]; ok {
			res.Duplicate = true
			return res, nil
		}
	}
	l, ok := s.limits[r.Limit]
	if !ok {
		return fsm.ReserveResult{}, fmt.Errorf("limit %q: %w", r.Limit, node.ErrNotFound)
	}
	if l.info.Leased {
		return fsm.ReserveResult{}, fmt.Errorf("%w: limit %q is leased: reserve through a worker", node.ErrInvalid, r.Limit)
	}
	if r.Permits > 1<<20 {
		return fsm.ReserveResult{}, fmt.Errorf("%w: %d permits (allowed: 1-%d)", node.ErrInvalid, r.Permits, 1<<20)
	}
	start := max(l.nextNanos, s.nowNanos)
	wait := start - s.nowNanos
	var res fsm.ReserveResult
	if wait <= r.MaxWaitNanos {
		l.nextNanos = start + r.Permits*l.info.Config.IntervalNanos
		l.info.GrantedRequests++
		l.info.GrantedPermits += uint64(r.Permits)
		res = fsm.ReserveResult{Status: fsm.Granted, WaitNanos: wait, SpacingNanos: l.info.Config.IntervalNanos}
	} else {
		l.info.RefusedRequests++
		res = fsm.ReserveResult{Status: fsm.Refused, RetryAfterNanos: wait - r.MaxWaitNanos}
	}
	if key != "" {
		s.dedup[key] = res
	}
	return res, nil
}

// OpenSession implements transport.Store: sessions are numbered 1, 2, 3,
// ... and never expire.
func (s *Store) OpenSession(ctx context.Context) (fsm.SessionResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.SessionResult{}, err
	}
	s.lastSession++
	return fsm.SessionResult{ID: s.lastSession, IdleNanos: fsm.SessionIdleNanos}, nil
}

// Status implements transport.Store.
func (s *Store) Status() node.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Servers = slices.Clone(st.Servers)
	return st
}

// Join implements transport.Store.
func (s *Store) Join(ctx context.Context, id, raftAddr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return err
	}
	for _, sv := range s.status.Servers {
		if sv.ID == id {
			if sv.RaftAddr != raftAddr {
				return fmt.Errorf("%w: server %q already joined with address %q", node.ErrInvalid, id, sv.RaftAddr)
			}
			return nil
		}
	}
	s.status.Servers = append(slices.Clone(s.status.Servers), node.Server{ID: id, RaftAddr: raftAddr, Voter: true})
	return nil
}

// Remove implements transport.Store.
func (s *Store) Remove(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return err
	}
	s.status.Servers = slices.DeleteFunc(slices.Clone(s.status.Servers), func(sv node.Server) bool { return sv.ID == id })
	return nil
}

// enter counts a call and returns the injected error or ctx's error.
func (s *Store) enter(ctx context.Context) error {
	s.calls++
	if s.err != nil {
		return s.err
	}
	return ctx.Err()
}

// SaveSnapshot implements transport.Store: the snapshot of an empty real
// register at the store's clock (the fake keeps no replicated state).
func (s *Store) SaveSnapshot(ctx context.Context, w io.Writer) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	return fsm.New().WriteSnapshot(w)
}

// TransferLeadership implements transport.Store: the single node leads,
// so there is no one to hand leadership to.
func (s *Store) TransferLeadership(ctx context.Context, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return err
	}
	if to != "" && to != s.status.ID {
		return fmt.Errorf("%w: server %q", node.ErrNotFound, to)
	}
	return fmt.Errorf("%w: leadership transfer: the cluster has no other voter", node.ErrInvalid)
}
