package worker

import (
	"time"
)

// Stealing, the taker's side: a worker that runs short asks its peers for
// idle permits, one peer at a time, members of its own group first, then
// the other groups, until it has what it wants or has asked MaxStealPeers.
//
// Permits received keep the donor's deadline: the donor measured, on its
// own clock after receiving the request, how long its grant stays
// spendable (margin included), and the taker counts that validity from
// when it SENT the request, which is earlier. So the taker's deadline is
// never later than the donor's (up to the clocks' rate errors, which the
// margin covers), and never more than a TTL after its request, whatever a
// reply claims.

// stealState is the taker's bookkeeping, under the worker's lock: the
// stolen lots, the permits callers are blocked on, the requests under way
// by ID, the rounds started and finished, and the backoff after an empty
// round.
type stealState struct {
	lots           lots
	waitingPermits int64
	seq            uint64
	pending        map[uint64]*pendingSteal
	roundsStarted  uint64
	roundsDone     uint64
	backoffUntil   int64
}

// pendingSteal is a request sent and not yet answered.
type pendingSteal struct {
	donor       string
	sentAtNanos int64
	// reply receives the permits of the answer (buffered: the handler
	// never blocks).
	reply chan int64
}

// stealLoop runs a steal round whenever a caller is short (kicked) and
// every RetryEvery while the worker runs short, until Stop.
func (w *Worker) stealLoop() {
	defer w.run.wg.Done()
	t := time.NewTicker(time.Duration(w.cfg.retryNanos))
	defer t.Stop()
	for {
		select {
		case <-w.run.done:
			return
		case <-w.run.stealKick:
		case <-t.C:
		}
		w.stealRound()
	}
}

// kickStealLocked asks the steal loop to check for a shortage now.
func (w *Worker) kickStealLocked() {
	select {
	case w.run.stealKick <- struct{}{}:
	default:
	}
}

// stealWantLocked returns how many permits the worker is short of at now
// (0: not short, or not allowed to steal).
//
// Short means: what it may spend (open grant plus stolen lots) covers less
// than three quarters of its pace until its next grant arrives, or less
// than what blocked callers wait for. Its pace is its share (or its
// demand, if lower); the next grant is due at the next renewal plus a
// round trip. (The quarter of slack keeps a worker that is merely catching
// up at the burst ratio, or waiting for a round trip, from asking.) A
// worker cut off from the register looks one renewal period ahead, and
// steals only within its steal grace. A worker whose renewal is in flight
// waits for the answer instead, and so does one whose last empty round is
// less than RetryEvery ago.
func (w *Worker) stealWantLocked(nowNanos int64) int64 {
	if w.stopping || nowNanos < w.steal.backoffUntil {
		return 0
	}
	horizon, ok := w.lease.stealHorizon(nowNanos)
	if !ok {
		return 0
	}
	demand := w.lease.meter.current(nowNanos)
	if demand == 0 && w.steal.waitingPermits == 0 {
		return 0
	}
	need := permitsOver(min(w.pace.rateMilli, demand), horizon)
	have := w.spendableLocked(nowNanos)
	if have >= need-need/4 && have >= w.steal.waitingPermits {
		return 0
	}
	return max(need, w.steal.waitingPermits) - have
}

// stealRound asks peers for the permits the worker is short of.
func (w *Worker) stealRound() {
	w.mu.Lock()
	now := w.now()
	want := w.stealWantLocked(now)
	if want == 0 {
		w.mu.Unlock()
		return
	}
	w.steal.roundsStarted++
	w.stats.StealRounds++
	w.prunePendingLocked(now)
	w.mu.Unlock()

	var got int64
	for _, peer := range w.members.candidates(w.cfg.Group, w.cfg.MaxStealPeers) {
		if got >= want {
			break
		}
		permits, stopped := w.askPeer(peer, want-got)
		if stopped {
			break
		}
		got += permits
	}

	w.mu.Lock()
	w.steal.roundsDone++
	if got == 0 {
		w.steal.backoffUntil = w.now() + w.cfg.retryNanos
	}
	w.broadcastLocked()
	w.mu.Unlock()
}

// askPeer sends one steal request and waits StealTimeout for its answer.
// It returns the permits received (a later answer still counts, through
// the reply handler) and whether the worker is stopping.
func (w *Worker) askPeer(peer string, want int64) (int64, bool) {
	w.mu.Lock()
	w.steal.seq++
	id := w.steal.seq
	p := &pendingSteal{donor: peer, sentAtNanos: w.now(), reply: make(chan int64, 1)}
	w.steal.pending[id] = p
	w.mu.Unlock()

	req := stealRequest{ID: id, Limit: w.cfg.Limit, From: w.cfg.Name, Group: w.cfg.Group, Want: want}
	w.send(peer, req.append(nil), false)
	t := time.NewTimer(time.Duration(w.cfg.stealTimeoutNanos))
	defer t.Stop()
	select {
	case permits := <-p.reply:
		return permits, false
	case <-t.C:
		return 0, false
	case <-w.run.done:
		return 0, true
	}
}

// prunePendingLocked forgets requests sent more than a TTL ago: no answer
// to them can carry permits still valid.
func (w *Worker) prunePendingLocked(nowNanos int64) {
	for id, p := range w.steal.pending {
		if nowNanos-p.sentAtNanos > w.cfg.ttlNanos {
			delete(w.steal.pending, id)
		}
	}
}

// handleStealReply takes the permits of an answer: they may be spent
// until the request's send time plus the validity the donor measured.
// An answer that matches no pending request (unknown, duplicate, or from
// another peer) is counted and ignored: it can never add permits twice.
func (w *Worker) handleStealReply(r stealReply) {
	if r.Limit != w.cfg.Limit {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	p, ok := w.steal.pending[r.ID]
	if !ok || p.donor != r.From {
		w.stats.StealsUnmatched++
		return
	}
	delete(w.steal.pending, r.ID)
	p.reply <- r.Permits
	if r.Permits == 0 {
		return
	}
	w.stats.StealsReceived++
	w.stats.StolenInPermits += r.Permits
	w.lease.stolenIn(r.Permits)
	// A donor's permits are valid until its grant's usable end, less than
	// a TTL after it received the request: a longer validity comes from a
	// broken or hostile donor, and is cut to a TTL (so the sum cannot
	// overflow either).
	deadline := p.sentAtNanos + min(r.ValidForNanos, w.cfg.ttlNanos)
	if deadline <= now {
		w.stats.ExpiredUnusedPermits += r.Permits
		return
	}
	w.steal.lots.add(lot{donor: r.From, permits: r.Permits, deadlineNanos: deadline, leaseID: r.LeaseID, epoch: r.Epoch})
	if w.lease.share <= 0 {
		w.updatePaceLocked(now)
	}
	w.broadcastLocked()
}
