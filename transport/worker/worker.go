package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/transport/client"
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
	clock Clock
	// idPrefix makes this worker's request IDs unique across holders and
	// incarnations: "w" + 16 random hex digits + ".".
	idPrefix string
	self     meta

	members *members
	// ml is set by Start before any goroutine that uses it runs.
	ml *memberlist.Memberlist

	inbox     chan []byte
	stealKick chan struct{}
	done      chan struct{}
	runCtx    context.Context
	cancelRun context.CancelFunc
	wg        sync.WaitGroup

	mu sync.Mutex
	// started and stopping: the life cycle.
	started, stopping bool
	// changed is closed (and replaced) whenever permits may have become
	// available or the worker's situation changed.
	changed chan struct{}

	// The lease, as far as the worker knows: leaseID 0 means none.
	leaseID, epoch uint64
	// cur is the grant of the current epoch (nil before the first).
	cur   *grant
	share int64
	pace  pacer
	meter demandMeter
	// everGranted: a lease was granted once (later leases report the
	// measured demand instead of the initial maximum).
	everGranted bool
	// inSinceReport counts permits received from peers since the last
	// report (renew or return) that carried StolenIn.
	inSinceReport int64
	// pendingLease and pendingRenew are a command sent without an answer
	// (ambiguous failure): it is retried with the same request ID and
	// payload, so that a command applied once is answered from the
	// register's dedup table.
	pendingLease *client.LeaseRequest
	pendingRenew *renewCall
	// inFlight is set while a register call is outstanding.
	inFlight bool
	// nextRegisterNanos is when the lease loop acts next; nextRenewNanos
	// when the current grant is due for renewal.
	nextRegisterNanos, nextRenewNanos int64
	// lastGoodNanos is when the last granting answer arrived (-1: never).
	lastGoodNanos int64
	// regErr is the last register failure (no answer), nil after an
	// answer; regRefusal the last answer that gave no lease (refused,
	// unknown limit, invalid), nil after a grant.
	regErr, regRefusal error
	lastRTTNanos       int64
	reqSeq             uint64

	// Stealing: stolen lots, permits callers are blocked on, outstanding
	// requests by ID, round counters and the backoff after an empty round.
	lots              lots
	waitingPermits    int64
	stealSeq          uint64
	pending           map[uint64]*pendingSteal
	roundsStarted     uint64
	roundsDone        uint64
	stealBackoffUntil int64

	stats Stats
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
		cfg:           s,
		log:           s.Logger.With("worker", s.Name, "group", s.Group, "limit", s.Limit),
		clock:         s.Clock,
		idPrefix:      "w" + hex.EncodeToString(nonce[:]) + ".",
		self:          meta{Group: s.Group, Name: s.Name},
		members:       newMembers(s.Name),
		inbox:         make(chan []byte, inboxSize),
		stealKick:     make(chan struct{}, 1),
		done:          make(chan struct{}),
		changed:       make(chan struct{}),
		lastGoodNanos: -1,
		pending:       make(map[uint64]*pendingSteal),
		pace:          pacer{burstRatio: s.BurstRatio},
		stats:         Stats{Limit: s.Limit, Group: s.Group, Holder: s.Name},
	}
	w.runCtx, w.cancelRun = context.WithCancel(context.Background())
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

// newRequestIDLocked returns a fresh register request ID.
func (w *Worker) newRequestIDLocked() string {
	w.reqSeq++
	return w.idPrefix + strconv.FormatUint(w.reqSeq, 10)
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

	ml, err := memberlist.Create(w.gossipConfig())
	if err != nil {
		w.abortStart()
		return fmt.Errorf("worker %q: start gossip: %w", w.cfg.Name, err)
	}
	w.ml = ml
	w.joinSeeds()

	w.registerStep(ctx)
	w.mu.Lock()
	refusal := w.regRefusal
	fatal := refusal != nil && w.leaseID == 0 && !errors.Is(refusal, errLeaseRefused)
	w.mu.Unlock()
	if fatal {
		_ = ml.Shutdown()
		w.abortStart()
		return fmt.Errorf("worker %q: start: %w", w.cfg.Name, refusal)
	}
	w.wg.Add(4)
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
	close(w.done)
	w.cancelRun()
}

// Stop stops spending, returns the lease (reporting what became of the
// current grant; retried until ctx is done or the lease has expired at the
// register anyway), leaves the gossip cluster and waits for the worker's
// goroutines. Callers blocked in Acquire get ErrStopped. An error means the
// lease could not be returned: it then expires at the register after its
// TTL.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	switch {
	case !w.started:
		w.mu.Unlock()
		return fmt.Errorf("worker %q: stop: %w", w.cfg.Name, ErrNotStarted)
	case w.stopping:
		w.mu.Unlock()
		return nil
	}
	w.stopping = true
	w.broadcastLocked()
	w.mu.Unlock()
	close(w.done)
	w.cancelRun()
	w.wg.Wait()

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

func (w *Worker) statsLocked(nowNanos int64) Stats {
	s := w.stats
	s.OutstandingPermits = w.spendableLocked(nowNanos)
	s.ShareMilliPermitsPerSec = w.share
	return s
}

// Status returns the worker's state: counters, lease, grant and members.
func (w *Worker) Status() Status {
	members := w.members.byGroup()
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	st := Status{
		Stats:             w.statsLocked(now),
		LeaseID:           w.leaseID,
		Epoch:             w.epoch,
		StolenPermitsLeft: w.lots.total(now),
		SinceGoodRenewal:  -1,
		CutOff:            w.regErr != nil && w.cur.spendable(now) == 0,
		Members:           members,
	}
	if g := w.cur; g != nil {
		st.GrantPermitsLeft = g.left()
		st.ExpiresIn = time.Duration(g.expiryNanos - now)
	}
	if w.lastGoodNanos >= 0 {
		st.SinceGoodRenewal = time.Duration(now - w.lastGoodNanos)
	}
	st.NextRenewalIn = time.Duration(max(w.nextRegisterNanos-now, 0))
	switch {
	case w.regErr != nil:
		st.LastError = w.regErr.Error()
	case w.regRefusal != nil:
		st.LastError = w.regRefusal.Error()
	}
	return st
}

// reportStats calls OnStats, if set, with the current counters.
func (w *Worker) reportStats() {
	if w.cfg.OnStats != nil {
		w.cfg.OnStats(w.Stats())
	}
}
