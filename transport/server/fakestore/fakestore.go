package fakestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/api"
)

// Store is a register on a manual clock. The zero value is not usable;
// call New.
type Store struct {
	mu       sync.Mutex
	f        *fsm.FSM
	index    uint64
	nowNanos int64
	status   api.Status
	fixed    bool // SetStatus was called: Status answers it verbatim
	err      error
	calls    int

	reserveF  func(context.Context, fsm.Reserve) (fsm.ReserveResult, error)
	reserves  []fsm.Reserve
	leaseF    func(context.Context, any) (fsm.LeaseResult, error)
	leaseCmds []any
}

// New returns an empty register whose status is a ready single-node
// leader, its clock at 1 s.
func New() *Store {
	return &Store{
		f:        fsm.New(),
		nowNanos: 1e9,
		status: api.Status{
			ID: "n1", State: "leader", LeaderID: "n1", Term: 1, Ready: true,
			Servers: []api.Server{{ID: "n1", RaftAddr: "127.0.0.1:7000", Voter: true, Leader: true}},
		},
	}
}

// SetErr makes every call except Status fail with err (nil: succeed).
func (s *Store) SetErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// SetReserveFunc replaces the register's reserves (nil: the register).
// Reserves are still recorded.
func (s *Store) SetReserveFunc(f func(context.Context, fsm.Reserve) (fsm.ReserveResult, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserveF = f
}

// SetLeaseFunc replaces the register's lease, renew and return (nil: the
// register); f receives the fsm.Lease, fsm.Renew or fsm.Return. Commands
// are still recorded.
func (s *Store) SetLeaseFunc(f func(ctx context.Context, cmd any) (fsm.LeaseResult, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaseF = f
}

// SetStatus replaces the status Status returns; from then on Status
// answers it verbatim (its applied index and cluster time included).
func (s *Store) SetStatus(st api.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.fixed = st, true
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

// LeaseCommands returns every lease, renew and return that reached the
// store, in order.
func (s *Store) LeaseCommands() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.leaseCmds)
}

// enter counts a call and returns the injected error or ctx's error.
// Callers hold mu.
func (s *Store) enter(ctx context.Context) error {
	s.calls++
	if s.err != nil {
		return s.err
	}
	return ctx.Err()
}

// applyLocked appends the entry encode builds at the store's clock (term
// 1, the term of every entry: stamps are trusted) and applies it.
func (s *Store) applyLocked(encode func(st fsm.Stamp) ([]byte, error)) (any, error) {
	b, err := encode(fsm.Stamp{Nanos: s.nowNanos, Term: 1})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", node.ErrInvalid, err)
	}
	s.index++
	return s.f.Apply(&raft.Log{Index: s.index, Term: 1, Data: b}), nil
}

// notFound is the node's error for an unknown limit.
func notFound(name string) error { return fmt.Errorf("%w: limit %q not found", node.ErrNotFound, name) }

// PutLimit implements server.Store.
func (s *Store) PutLimit(ctx context.Context, p fsm.PutLimit) (fsm.PutResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.PutResult{}, err
	}
	v, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) { return fsm.AppendPut(nil, st, p) })
	if err != nil {
		return fsm.PutResult{}, err
	}
	res := v.(fsm.PutResult)
	if res.Detail != "" {
		return fsm.PutResult{}, fmt.Errorf("%w: %s", node.ErrInvalid, res.Detail)
	}
	return res, nil
}

// DeleteLimit implements server.Store.
func (s *Store) DeleteLimit(ctx context.Context, name string, force bool) (fsm.DeleteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.DeleteResult{}, err
	}
	v, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) {
		return fsm.AppendDelete(nil, st, fsm.DeleteLimit{Name: name, Force: force})
	})
	if err != nil {
		return fsm.DeleteResult{}, err
	}
	res := v.(fsm.DeleteResult)
	switch {
	case res.Detail != "":
		return fsm.DeleteResult{}, fmt.Errorf("%w: %s", node.ErrConflict, res.Detail)
	case !res.Existed:
		return res, notFound(name)
	}
	return res, nil
}

// Limit implements server.Store.
func (s *Store) Limit(ctx context.Context, name string) (fsm.LimitInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.LimitInfo{}, err
	}
	l, ok := s.f.LimitView(name)
	if !ok {
		return fsm.LimitInfo{}, notFound(name)
	}
	return l, nil
}

// LimitsPage implements server.Store.
func (s *Store) LimitsPage(ctx context.Context, q fsm.LimitsQuery) ([]fsm.LimitInfo, bool, error) {
	if err := q.Validate(); err != nil {
		return nil, false, fmt.Errorf("%w: %v", node.ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return nil, false, err
	}
	page, more := s.f.LimitsPage(q)
	return page, more, nil
}

// Reserve implements server.Store.
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
	if err := r.Validate(); err != nil {
		return fsm.ReserveResult{}, fmt.Errorf("%w: %v", node.ErrInvalid, err)
	}
	// A key a template creates on this reserve exists for the check, its
	// template's config bounding it, as the node checks it.
	ok, leased, maxPermits := s.f.ReserveCheck(r.Limit)
	switch {
	case !ok:
		return fsm.ReserveResult{}, notFound(r.Limit)
	case leased:
		return fsm.ReserveResult{}, fmt.Errorf("%w: limit %q is leased: reserve through a worker", node.ErrInvalid, r.Limit)
	case r.Permits > maxPermits:
		return fsm.ReserveResult{}, fmt.Errorf("%w: %d permits: limit %q can grant at most %d in one request", node.ErrInvalid, r.Permits, r.Limit, maxPermits)
	}
	r.ArrivedNanos = s.nowNanos
	v, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) { return fsm.AppendReserveBatch(nil, st, []fsm.Reserve{r}) })
	if err != nil {
		return fsm.ReserveResult{}, err
	}
	res := v.([]fsm.ReserveResult)[0]
	res.NowNanos, res.OnArrival = 0, false
	switch {
	case res.Status == fsm.Granted && res.ExpiresInNanos < 0:
		return fsm.ReserveResult{Status: fsm.Refused, RetryAfterNanos: 1, Duplicate: res.Duplicate,
			Detail: "the permit granted to this request_id expired before the retry arrived; retry with a new request_id"}, nil
	case res.Status == fsm.UnknownLimit:
		return res, notFound(r.Limit)
	case res.Status == fsm.Invalid:
		return res, fmt.Errorf("%w: %s", node.ErrInvalid, res.Detail)
	}
	return res, nil
}

// OpenSession implements server.Store.
func (s *Store) OpenSession(ctx context.Context, o fsm.OpenSession) (fsm.SessionResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.SessionResult{}, err
	}
	v, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) { return fsm.AppendOpenSessionAs(nil, st, o) })
	if err != nil {
		return fsm.SessionResult{}, err
	}
	return v.(fsm.SessionResult), nil
}

// SessionCount returns how many sessions the register holds and how many
// answers they keep (fsm.FSM.SessionCount).
func (s *Store) SessionCount() (sessions, outcomes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.SessionCount()
}

// Status implements server.Store.
func (s *Store) Status() api.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Servers = slices.Clone(st.Servers)
	if !s.fixed {
		st.AppliedIndex, st.ClusterNanos = s.index, s.nowNanos
	}
	return st
}

// Join implements server.Store: it adds the server to the status's
// servers as a non-voter, as the node does (nothing promotes it here); a
// known ID at another address, or another member's address, is refused
// as the node refuses it.
func (s *Store) Join(ctx context.Context, id, raftAddr string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	for _, sv := range s.status.Servers {
		switch {
		case sv.ID == id && sv.RaftAddr == raftAddr:
			return sv.Voter, nil
		case sv.ID == id:
			return false, fmt.Errorf("%w: server %q is already a member of the cluster at %s, not %s", node.ErrInvalid, id, sv.RaftAddr, raftAddr)
		case sv.RaftAddr == raftAddr:
			return false, fmt.Errorf("%w: raft address %s is already the address of member %q", node.ErrInvalid, raftAddr, sv.ID)
		}
	}
	s.status.Servers = append(slices.Clone(s.status.Servers), api.Server{ID: id, RaftAddr: raftAddr})
	return false, nil
}

// Remove implements server.Store.
func (s *Store) Remove(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return err
	}
	if !slices.ContainsFunc(s.status.Servers, func(sv api.Server) bool { return sv.ID == id }) {
		return fmt.Errorf("%w: server %q is not a member", node.ErrNotFound, id)
	}
	s.status.Servers = slices.DeleteFunc(slices.Clone(s.status.Servers), func(sv api.Server) bool { return sv.ID == id })
	return nil
}

// SaveSnapshot implements server.Store: the register's snapshot.
func (s *Store) SaveSnapshot(ctx context.Context, w io.Writer) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	return s.f.WriteSnapshot(w)
}

// TransferLeadership implements server.Store: the single node leads,
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
	return errors.New("node: leadership transfer: the cluster has no other voter")
}

// Settle implements server.Store: the register's settlement, its status
// mapped to the node's errors.
func (s *Store) Settle(ctx context.Context, c fsm.Settle) (fsm.SettleResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.SettleResult{}, err
	}
	v, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) { return fsm.AppendSettle(nil, st, c) })
	if err != nil {
		return fsm.SettleResult{}, err
	}
	res := v.(fsm.SettleResult)
	return res, node.SettleError(res.Status, res.Detail)
}

// Release implements server.Store: the register's release, its status
// mapped to the node's errors.
func (s *Store) Release(ctx context.Context, c fsm.Release) (fsm.ReleaseResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.ReleaseResult{}, err
	}
	v, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) { return fsm.AppendRelease(nil, st, c) })
	if err != nil {
		return fsm.ReleaseResult{}, err
	}
	res := v.(fsm.ReleaseResult)
	return res, node.SettleError(res.Status, res.Detail)
}
