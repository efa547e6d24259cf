package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/transport/wire"
)

// Worker is one holder of a leased limit: it leases a share of the limit's
// permits from the register, paces them out to its callers (Acquire,
// TryAcquire), renews, and trades idle permits with its peers, found
// through memberlist. See the package documentation for the model.
//
// All methods are safe for concurrent use.
type Worker struct {
	cfg   settings
	log   hclog.Logger
	clock wire.Clock
	self  meta

	members *members
	// ml is set by Start before any goroutine that uses it runs.
	ml *memberlist.Memberlist
	// gossipRejected counts what memberlist dropped for want of a key
	// (gossipkeys.go).
	gossipRejected atomic.Uint64
	// gossipRejoins counts the rejoin loop's joins of the seed list;
	// rejoinChecks its ticks (tests wait on it).
	gossipRejoins, rejoinChecks atomic.Uint64

	run loops

	mu sync.Mutex
	// started and stopping: the life cycle.
	started, stopping bool
	// changed is closed (and replaced) whenever permits may have become
	// available or the worker's situation changed.
	changed chan struct{}
	// lease is the lease life cycle (pure: lease.go drives it), with the
	// current grant and the demand meter.
	lease leaseState
	// pace spreads the permits at the share.
	pace pacer
	// steal is the taker's side of stealing.
	steal stealState
	// stats are the counters that are not the lease's (see statsLocked).
	stats Stats
}

// loops are the worker's goroutines and their plumbing.
type loops struct {
	// inbox holds the steal messages to handle; stealKick asks for a
	// steal round.
	inbox     chan []byte
	stealKick chan struct{}
	// done is closed, and ctx canceled, when the worker stops; wg waits
	// for the goroutines.
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// started is closed when Start returns: Stop waits for it, so that
	// a Stop racing a Start returns the lease Start opened.
	started chan struct{}
}

// New validates cfg and returns a Worker, not yet started.
func New(cfg Config) (*Worker, error) {
	s, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("worker %q: request id nonce: %w", s.Name, err)
	}
	w := &Worker{
		cfg:     s,
		log:     s.Logger.With("worker", s.Name, "group", s.Group, "limit", s.Limit),
		clock:   s.Clock,
		self:    meta{Group: s.Group, Name: s.Name},
		members: newMembers(s.Name),
		run: loops{
			inbox:     make(chan []byte, inboxSize),
			stealKick: make(chan struct{}, 1),
			done:      make(chan struct{}),
			started:   make(chan struct{}),
		},
		changed: make(chan struct{}),
		// idPrefix makes this worker's request IDs unique across holders
		// and incarnations: "w" + 16 random hex digits + ".".
		lease: newLeaseState(leaseParams{limit: s.Limit, holder: s.Name, group: s.Group, weight: s.Weight,
			ttlNanos: s.ttlNanos, marginNanos: s.marginNanos, renewNanos: s.renewNanos, retryNanos: s.retryNanos,
			stealGraceNanos: s.stealGraceNanos, unreachableAfterNanos: s.unreachableAfterNanos,
			idPrefix: "w" + hex.EncodeToString(nonce[:]) + "."}),
		pace:  pacer{burstRatio: s.BurstRatio},
		steal: stealState{pending: make(map[uint64]*pendingSteal)},
		stats: Stats{Limit: s.Limit, Group: s.Group, Holder: s.Name},
	}
	w.run.ctx, w.run.cancel = context.WithCancel(context.Background())
	if n := len(w.self.append(nil)); n > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("%w: node meta of %d bytes (allowed: at most %d; shorten the name or group)", ErrInvalidConfig, n, memberlist.MetaMaxSize)
	}
	return w, nil
}

// inboxSize bounds the steal messages waiting to be handled; more are
// dropped (a dropped request costs nothing, a dropped reply loses the
// permits it carried, never creates any).
const inboxSize = 256

// now reads the worker's clock.
func (w *Worker) now() int64 { return w.clock.NowNanos() }

// broadcastLocked wakes every caller waiting for a change. Callers hold mu.
func (w *Worker) broadcastLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// Start joins the gossip cluster, opens the lease (one attempt, bounded by
// ctx) and starts the worker's goroutines. It fails if gossip cannot start
// or the register answers that the limit cannot be leased; an unreachable
// register is not an error (the worker keeps trying).
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	switch {
	case w.stopping:
		w.mu.Unlock()
		return fmt.Errorf("worker %q: start: %w", w.cfg.Name, ErrStopped)
	case w.started:
		w.mu.Unlock()
		return fmt.Errorf("worker %q: start: already started", w.cfg.Name)
	}
	w.started = true
	w.mu.Unlock()
	defer close(w.run.started)

	ml, err := memberlist.Create(w.gossipConfig())
	if err != nil {
		w.abortStart()
		return fmt.Errorf("worker %q: start gossip: %w", w.cfg.Name, err)
	}
	w.ml = ml
	w.joinSeeds()

	w.registerStep(ctx)
	w.mu.Lock()
	refusal := w.lease.regRefusal
	fatal := refusal != nil && w.lease.leaseID == 0 && !errors.Is(refusal, errLeaseRefused)
	w.mu.Unlock()
	if fatal {
		_ = ml.Shutdown()
		w.abortStart()
		return fmt.Errorf("worker %q: start: %w", w.cfg.Name, refusal)
	}
	w.run.wg.Add(4)
	go w.leaseLoop()
	go w.stealLoop()
	go w.inboxLoop()
	go w.rejoinLoop()
	return nil
}

// abortStart leaves the worker stopped after a failed Start.
func (w *Worker) abortStart() {
	w.mu.Lock()
	w.stopping = true
	w.broadcastLocked()
	w.mu.Unlock()
	close(w.run.done)
	w.run.cancel()
}

// Stop stops spending, waits for the worker's goroutines (and for a call
// to the register under way, at most RequestTimeout), returns the lease
// (reporting what became of the current grant; a lease or renewal left
// without an answer is first sent again as it was, so that the return
// names what the register holds; retried until ctx is done or the lease
// has expired at the register anyway) and leaves the gossip cluster; a
// Start under way is waited for first. Callers blocked in Acquire get
// ErrStopped. A nil error means the register holds no lease of this
// worker's any more, unless it refused the lease or renewal sent again
// (the worker then forgets the lease, which expires at the register after
// its TTL, its permits counted as spent); an error means the lease could
// not be returned: it then expires at the register after its TTL.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started {
		w.mu.Unlock()
		return fmt.Errorf("worker %q: stop: %w", w.cfg.Name, ErrNotStarted)
	}
	w.mu.Unlock()
	// A Start under way finishes first (its one lease attempt is bounded
	// by its ctx): then there is a lease to return and goroutines to wait
	// for, or a failed start that already stopped the worker.
	select {
	case <-w.run.started:
	case <-ctx.Done():
		return fmt.Errorf("worker %q: stop: waiting for Start: %w", w.cfg.Name, ctx.Err())
	}
	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		return nil
	}
	w.stopping = true
	w.broadcastLocked()
	w.mu.Unlock()
	// A lease or renewal under way is waited for (bounded by
	// RequestTimeout, and by ctx): its answer says which lease and epoch
	// the register holds, which the return must name. Canceled, it would
	// leave a renewal the register may have applied without an answer.
	close(w.run.done)
	stopCall := context.AfterFunc(ctx, w.run.cancel)
	w.run.wg.Wait()
	stopCall()
	w.run.cancel()

	err := w.returnLease(ctx)
	leave := 500 * time.Millisecond
	if dl, ok := ctx.Deadline(); ok {
		leave = min(leave, time.Until(dl))
	}
	if w.ml.NumMembers() > 1 && leave > 0 {
		if lerr := w.ml.Leave(leave); lerr != nil {
			w.log.Debug("gossip leave failed", "error", lerr)
		}
	}
	if serr := w.ml.Shutdown(); serr != nil {
		w.log.Debug("gossip shutdown failed", "error", serr)
	}
	return err
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.statsLocked(w.now())
}

// statsLocked returns the counters at now: the worker's and its lease's.
func (w *Worker) statsLocked(nowNanos int64) Stats {
	s := w.stats
	c := w.lease.counters
	s.Leases, s.Renewals, s.Fenced, s.RegisterFails = c.leases, c.renewals, c.fenced, c.registerFails
	s.LeasedPermits, s.CreditedPermits = c.leasedPermits, c.creditedPermits
	s.ExpiredUnusedPermits += c.expiredUnusedPermits
	s.DemandMilliPermitsPerSec = c.demandMilli
	s.OutstandingPermits = w.spendableLocked(nowNanos)
	s.GossipRejected = w.gossipRejected.Load()
	s.GossipRejoins = w.gossipRejoins.Load()
	s.ShareMilliPermitsPerSec = w.lease.share
	return s
}

// Status returns the worker's state: counters, lease, grant and members.
func (w *Worker) Status() Status {
	members := w.members.byGroup()
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	ls := &w.lease
	st := Status{
		Stats:             w.statsLocked(now),
		LeaseID:           ls.leaseID,
		Epoch:             ls.epoch,
		StolenPermitsLeft: w.steal.lots.total(now),
		SinceGoodRenewal:  -1,
		CutOff:            ls.cutOff() && ls.spendable(now) == 0,
		RegisterSilentFor: time.Duration(ls.silentNanos(now)),
		Unreachable:       ls.unreachable(now),
		RetryEvery:        time.Duration(w.cfg.retryNanos),
		Members:           members,
	}
	if g := ls.cur; g != nil {
		st.GrantPermitsLeft = g.left()
		st.ExpiresIn = time.Duration(g.expiryNanos - now)
	}
	if ls.lastGoodNanos >= 0 {
		st.SinceGoodRenewal = time.Duration(now - ls.lastGoodNanos)
	}
	st.NextRenewalIn = time.Duration(max(ls.nextCallNanos-now, 0))
	switch {
	case ls.regErr != nil:
		st.LastError = ls.regErr.Error()
	case ls.regRefusal != nil:
		st.LastError = ls.regRefusal.Error()
	}
	return st
}

// reportStats calls OnStats, if set, with the current counters.
func (w *Worker) reportStats() {
	if w.cfg.OnStats != nil {
		w.cfg.OnStats(w.Stats())
	}
}
