package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/client"
)

// fakeRegister is the permit register in one process: a real fsm.FSM fed
// encoded commands, one log entry per call, under a mutex, stamped with
// real monotonic time since base (so cluster time never runs faster than
// real time, assumption 1 of the bound).
type fakeRegister struct {
	t    testing.TB
	base time.Time

	mu    sync.Mutex
	f     *fsm.FSM
	index uint64
	// grants records every grant the register issued: its expiry and
	// when a renew or return reporting on it was applied (real time since
	// base, like the cluster time).
	grants map[grantKey]*grantLife
}

// grantKey names a grant.
type grantKey struct{ leaseID, epoch uint64 }

// grantLife is what the register decided about a grant.
type grantLife struct {
	expiresAtNanos  int64
	reportedAtNanos int64 // math.MaxInt64 until reported
	permits         int64 // what the grant gave
}

func newFakeRegister(t testing.TB, base time.Time) *fakeRegister {
	return &fakeRegister{t: t, base: base, f: fsm.New(), grants: make(map[grantKey]*grantLife)}
}

// applyLocked appends and applies one entry built by enc at the current
// time.
func (r *fakeRegister) applyLocked(enc func(nowNanos int64) ([]byte, error)) (any, error) {
	b, err := enc(int64(time.Since(r.base)))
	if err != nil {
		return nil, err
	}
	r.index++
	return r.f.Apply(&raft.Log{Index: r.index, Data: b}), nil
}

// putLeased creates a limit of rate permits per second (strict) and makes
// it leased with C = burst and O = maxOut.
func (r *fakeRegister) putLeased(name string, rate float64, burst, maxOut int64) fsm.LeasePolicyResult {
	r.t.Helper()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: rate})
	if err != nil {
		r.t.Fatalf("compile: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.applyLocked(func(now int64) ([]byte, error) {
		return fsm.AppendPut(nil, fsm.Stamp{Nanos: now}, fsm.PutLimit{Name: name, Config: cfg})
	}); err != nil {
		r.t.Fatalf("put: %v", err)
	}
	res, err := r.applyLocked(func(now int64) ([]byte, error) {
		return fsm.AppendLeasePolicy(nil, fsm.Stamp{Nanos: now}, fsm.LeasePolicy{Limit: name, Leased: true, BurstPermits: burst, MaxOutstandingPermits: maxOut})
	})
	if err != nil {
		r.t.Fatalf("policy: %v", err)
	}
	pr := res.(fsm.LeasePolicyResult)
	if !pr.Applied {
		r.t.Fatalf("policy not applied: %+v", pr)
	}
	return pr
}

// leaseResult applies a lease command and records the grant it issued
// and the grant it reported on (reported: the renewed or returned grant).
func (r *fakeRegister) leaseResult(enc func(nowNanos int64) ([]byte, error), reported grantKey) (fsm.LeaseResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var now int64
	res, err := r.applyLocked(func(n int64) ([]byte, error) {
		now = n
		return enc(n)
	})
	if err != nil {
		return fsm.LeaseResult{}, err
	}
	lr := res.(fsm.LeaseResult)
	if lr.Duplicate {
		return lr, nil
	}
	if reported.leaseID != 0 && (lr.Status == fsm.LeaseGranted || lr.Status == fsm.LeaseReturned) {
		if g := r.grants[reported]; g != nil {
			g.reportedAtNanos = now
		}
	}
	if lr.Status == fsm.LeaseGranted {
		r.grants[grantKey{lr.LeaseID, lr.Epoch}] = &grantLife{expiresAtNanos: now + lr.ExpiresInNanos, reportedAtNanos: math.MaxInt64, permits: lr.Permits}
	}
	return lr, nil
}

// grant returns what the register decided about a grant.
func (r *fakeRegister) grant(k grantKey) (grantLife, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.grants[k]
	if !ok {
		return grantLife{}, false
	}
	return *g, true
}

// Lease implements Register.
func (r *fakeRegister) Lease(ctx context.Context, limit string, q client.LeaseRequest) (client.LeaseGrant, error) {
	return asRegister{r}.Lease(ctx, limit, q)
}

// Renew implements Register.
func (r *fakeRegister) Renew(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	return asRegister{r}.Renew(ctx, limit, id, epoch, rep)
}

// Return implements Register.
func (r *fakeRegister) Return(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	return asRegister{r}.Return(ctx, limit, id, epoch, rep)
}

func (r *fakeRegister) leaseFSM(ctx context.Context, q fsm.Lease) (fsm.LeaseResult, error) {
	return r.leaseResult(func(now int64) ([]byte, error) { return fsm.AppendLease(nil, fsm.Stamp{Nanos: now}, q) }, grantKey{})
}

func (r *fakeRegister) renewFSM(ctx context.Context, q fsm.Renew) (fsm.LeaseResult, error) {
	return r.leaseResult(func(now int64) ([]byte, error) { return fsm.AppendRenew(nil, fsm.Stamp{Nanos: now}, q) }, grantKey{q.LeaseID, q.Epoch})
}

func (r *fakeRegister) returnFSM(ctx context.Context, q fsm.Return) (fsm.LeaseResult, error) {
	return r.leaseResult(func(now int64) ([]byte, error) { return fsm.AppendReturn(nil, fsm.Stamp{Nanos: now}, q) }, grantKey{q.LeaseID, q.Epoch})
}

// pool returns the limit's lease pool, minting brought up to now (a noop
// entry advances the cluster time).
func (r *fakeRegister) pool(name string) fsm.LeasePoolInfo {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.applyLocked(func(now int64) ([]byte, error) { return fsm.AppendNoop(nil, fsm.Stamp{Nanos: now}), nil }); err != nil {
		r.t.Fatalf("noop: %v", err)
	}
	p, ok := r.f.LeasePool(name)
	if !ok {
		r.t.Fatalf("no lease pool for %q", name)
	}
	return p
}

// leases returns the limit's leases.
func (r *fakeRegister) leases(name string) []fsm.LeaseInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Leases(name)
}

// link is one worker's connection to the register (the fake or the
// cluster), with faults:
//   - cut: requests do not reach the register (ErrNotDelivered);
//   - loseAnswers: requests are applied but their answers are lost (an
//     ambiguous error);
//   - latency: each request takes that long to reach the register, and
//     its answer as long to come back (simulated network).
type link struct {
	r           Register
	cut         atomic.Bool
	loseAnswers atomic.Bool
	latency     atomic.Int64
	calls       atomic.Int64
	// slowestNanos is the longest round trip of a delivered call (tests
	// reset it).
	slowestNanos atomic.Int64

	// answeredMu guards answered: when each delivered answer came back,
	// so that a test can measure a worker's spending between two of its
	// renewals (renewalAligned).
	answeredMu sync.Mutex
	answered   []time.Time
}

// answersWithin returns the times of the answers delivered within
// [from, to).
func (l *link) answersWithin(from, to time.Time) []time.Time {
	l.answeredMu.Lock()
	defer l.answeredMu.Unlock()
	var out []time.Time
	for _, at := range l.answered {
		if !at.Before(from) && at.Before(to) {
			out = append(out, at)
		}
	}
	return out
}

var errAnswerLost = errors.New("fault link: answer lost")

func (l *link) do(ctx context.Context, f func() (client.LeaseGrant, error)) (client.LeaseGrant, error) {
	l.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return client.LeaseGrant{}, fmt.Errorf("fault link: %w: %w", client.ErrNotDelivered, err)
	}
	if l.cut.Load() {
		return client.LeaseGrant{}, fmt.Errorf("fault link: partitioned: %w", client.ErrNotDelivered)
	}
	lat := time.Duration(l.latency.Load())
	start := time.Now()
	defer func() {
		d := int64(time.Since(start))
		for {
			old := l.slowestNanos.Load()
			if d <= old || l.slowestNanos.CompareAndSwap(old, d) {
				break
			}
		}
	}()
	time.Sleep(lat) // simulated network latency, not a wait for an outcome
	res, err := f()
	if err != nil {
		return res, err
	}
	time.Sleep(lat)
	if l.loseAnswers.Load() {
		return client.LeaseGrant{}, errAnswerLost
	}
	l.answeredMu.Lock()
	l.answered = append(l.answered, time.Now())
	l.answeredMu.Unlock()
	return res, nil
}

// Lease implements Register.
func (l *link) Lease(ctx context.Context, limit string, q client.LeaseRequest) (client.LeaseGrant, error) {
	return l.do(ctx, func() (client.LeaseGrant, error) { return l.r.Lease(ctx, limit, q) })
}

// Renew implements Register.
func (l *link) Renew(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	return l.do(ctx, func() (client.LeaseGrant, error) { return l.r.Renew(ctx, limit, id, epoch, rep) })
}

// Return implements Register.
func (l *link) Return(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	return l.do(ctx, func() (client.LeaseGrant, error) { return l.r.Return(ctx, limit, id, epoch, rep) })
}
