package worker

import (
	"math"
	"time"
)

// Stealing, the donor's side: a worker asked for permits gives what its
// open grant holds beyond its own need until that grant is replaced (or
// expires), keeping StealBias of that spare when the asker is of another
// group. It debits its grant BEFORE sending (counted as stolen out, under
// its lock, so the permits can no longer be spent or given twice) and
// reports them as stolen out at its next renewal: the register keeps them
// outstanding until the grant's expiry. A lost answer therefore loses the
// permits; nothing ever duplicates them.

// handleStealRequest answers a steal request (with 0 permits when there is
// nothing to spare, so that the asker moves on at once).
func (w *Worker) handleStealRequest(q stealRequest) {
	if q.Limit != w.cfg.Limit || q.From == w.cfg.Name {
		return
	}
	w.mu.Lock()
	now := w.now()
	w.expireLocked(now)
	give, validFor := w.donateLocked(now, q)
	r := stealReply{ID: q.ID, Limit: w.cfg.Limit, From: w.cfg.Name, Permits: give, ValidForNanos: validFor}
	if give > 0 {
		r.LeaseID, r.Epoch = w.lease.cur.leaseID, w.lease.cur.epoch
	}
	w.stats.StealsServed++
	w.mu.Unlock()
	w.send(q.From, r.append(nil), true)
}

// donateLocked debits what the worker gives for q at now and returns it,
// with how long it stays valid (the grant's local expiry minus now).
//
// Spare = the open grant's spendable permits minus the worker's own need:
// its pace (share, or its recent demand if lower: the demand measured in
// the current period once it has lasted RetryEvery) until the grant is
// replaced or expires AND over one more renewal period, plus what its
// blocked callers wait for. The extra period is a reserve: permits given away stay
// outstanding at the register until the grant's expiry, and when the
// limit's MaxOutstandingPermits binds they come out of the next grants, so
// a donor that gave away all its rest would itself run short. So a
// saturated worker gives nothing and an idle one nearly all its grant.
// The own group may take all of the spare; another group what is left
// after keeping ceil(StealBias * spare).
func (w *Worker) donateLocked(nowNanos int64, q stealRequest) (give, validForNanos int64) {
	g := w.lease.cur
	avail := g.giveable(nowNanos)
	if avail <= 0 {
		return 0, 0
	}
	until := min(w.lease.nextRenewNanos, g.expiryNanos)
	rate := min(w.pace.rateMilli, w.lease.meter.recent(nowNanos, w.cfg.retryNanos))
	spare := avail - permitsOver(rate, until-nowNanos+w.cfg.renewNanos) - w.steal.waitingPermits
	if q.Group != w.cfg.Group && spare > 0 {
		// Keep ceil(bias * spare) for the own group (the tiny epsilon
		// absorbs float error: 0.8 * 100 must keep 80, not 81).
		spare -= int64(math.Ceil(float64(spare)*w.cfg.stealBias - 1e-9))
	}
	give = min(q.Want, spare)
	if give <= 0 {
		return 0, 0
	}
	g.stolenOut += give
	w.stats.StolenOutPermits += give
	return give, g.expiryNanos - nowNanos
}

// send sends a steal message to a peer through memberlist's reliable
// messages, in its own goroutine (a send to a peer that vanished must not
// hold anyone up). A message that cannot be sent is lost.
func (w *Worker) send(to string, b []byte, reply bool) {
	var delay time.Duration
	if f := w.cfg.stealFault; f != nil {
		var drop bool
		if drop, delay = f(w.cfg.Name, to, reply); drop {
			return
		}
	}
	node, ok := w.members.node(to)
	if !ok {
		w.log.Debug("steal message to an unknown member dropped", "to", to)
		return
	}
	go func() {
		if delay > 0 {
			time.Sleep(delay) // test fault: a slow network
		}
		if err := w.ml.SendReliable(&node, b); err != nil {
			w.log.Debug("steal message not sent", "to", to, "error", err)
		}
	}()
}
