package fsm

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/permitd/permitd/bucket"
)

// waiters.go: reserves that wait in an in-flight cap's queue, granted by
// the entry that frees their slot: a semaphore decided in the log. This
// file decides them (on arrival, at the events between entries, when a
// command frees or changes a limit, and when one is withdrawn) and serves
// the decisions; the queues and their bounds are in waitqueue.go. The
// model, its safety argument and a worked example are in doc.go
// ("Waiting").

// WaiterDecision is the decision on a reserve that waited in an in-flight
// cap's queue: Result is its answer relative to Result.NowNanos, a
// cluster time of the entry that decided it (Granted, Refused,
// UnknownLimit or Invalid; never Queued). A grant also says, in absolute
// cluster time, the instant its slot came free and it was decided
// (DecidedAtNanos <= Result.NowNanos) and the time its permits are
// served at (ServedAtNanos >= DecidedAtNanos).
type WaiterDecision struct {
	Reservation                   uint64
	Result                        ReserveResult
	DecidedAtNanos, ServedAtNanos int64
}

// isCap reports whether l is an enforced in-flight cap.
func isCap(l *limit) bool {
	_, ok := l.pacer.(bucket.Releaser)
	return ok && !l.shadow
}

// enqueue records reserve r, blocked on a cap at nowNanos, as a waiting
// reservation and answers it Queued.
func (s *state) enqueue(nowNanos int64, r *Reserve) outcome {
	rv := &reservation{owner: r.Owner, decidedAtNanos: nowNanos, servedAtNanos: nowNanos,
		finalAtNanos: satAddNanos(nowNanos, r.MaxWaitNanos),
		wait:         &waiting{requestID: r.RequestID, settleWithinNanos: r.SettleWithinNanos}}
	for _, p := range r.Parts() {
		rv.parts = append(rv.parts, reservedPart{limit: p.Limit, permits: p.Permits})
	}
	s.reservations.add(rv)
	s.waits.add(rv)
	return outcome{status: Queued, atNanos: rv.finalAtNanos, reservation: rv.id}
}

// satAddNanos is a + b for b >= 0, saturating at math.MaxInt64.
func satAddNanos(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// waiterParts returns the parts a waiting reservation asks for.
func waiterParts(rv *reservation) []Part {
	parts := make([]Part, len(rv.parts))
	for i, p := range rv.parts {
		parts[i] = Part{Limit: p.limit, Permits: p.permits}
	}
	return parts
}

// nextWaiterEvent returns the earliest instant after afterNanos at which a
// waiting reservation may be decided without a command: a deadline, or
// the lapse of a hold on a cap a reservation waits on.
func (s *state) nextWaiterEvent(afterNanos int64) (int64, bool) {
	q := &s.waits
	if q.len() == 0 {
		return 0, false
	}
	next := q.deadlines.rs[0].finalAtNanos
	// The minimum does not depend on the order the map is visited in.
	for name := range q.byLimit {
		l, ok := s.limits[name]
		if !ok || !isCap(l) {
			continue
		}
		if c, ok := l.pacer.(*bucket.ConcurrencyPacer); ok {
			if e, ok := c.NextExpiry(afterNanos); ok && e < next {
				next = e
			}
		}
	}
	return max(next, afterNanos+1), true
}

// advanceWaiters decides, in order of their instants, the waiter events
// after the last applied time up to toNanos (the time of the entry being
// applied, to which the decisions' answers are relative). It runs before
// anything else of the entry.
func (s *state) advanceWaiters(toNanos int64) {
	after := s.lastNowNanos
	for {
		e, ok := s.nextWaiterEvent(after)
		if !ok || e > toNanos {
			return
		}
		// Lapses first: any queue may have room now. Then the
		// deadlines that fall due: decided at last.
		s.pumpWaiters(s.waitingLimits(), e, toNanos)
		for s.waits.len() > 0 && s.waits.deadlines.rs[0].finalAtNanos <= e {
			rv := s.waits.deadlines.rs[0]
			if !s.tryWaiter(rv, e, toNanos) {
				panic(fmt.Errorf("fsm: reservation %d still waits at its deadline %d", rv.id, e))
			}
			s.pumpWaiters(limitNames(rv), e, toNanos)
		}
		after = e
	}
}

// waitingLimits returns the names that waiting reservations name, sorted.
func (s *state) waitingLimits() []string {
	names := make([]string, 0, len(s.waits.byLimit))
	for name := range s.waits.byLimit {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// limitNames returns the names of rv's parts.
func limitNames(rv *reservation) []string {
	names := make([]string, len(rv.parts))
	for i, p := range rv.parts {
		names[i] = p.limit
	}
	return names
}

// pumpWaiters tries, at atNanos, the waiting reservations of each named
// in-flight cap's queue in order, until the permits held and those asked
// for by the ones still waiting fill the cap (no later one can fit); every
// reservation decided meanwhile has its other queues tried as well. (Only
// a cap blocks a waiting reservation: a queue of any other limit is not
// tried.)
func (s *state) pumpWaiters(names []string, atNanos, refNanos int64) {
	work := slices.Clone(names)
	for len(work) > 0 {
		name := work[0]
		work = work[1:]
		l, ok := s.limits[name]
		if !ok || !isCap(l) {
			continue
		}
		for i := 0; ; {
			wq := s.waits.byLimit[name]
			if wq == nil || i >= len(wq.ids) {
				break
			}
			rv := s.reservations.byID[wq.ids[i]]
			if s.tryWaiter(rv, atNanos, refNanos) {
				work = append(work, limitNames(rv)...)
				continue // it left the queue: the next one is at i now
			}
			if capRoom(l, atNanos, wq.ahead[i]+partPermits(rv, name)) <= 0 {
				break
			}
			i++
		}
	}
}

// partPermits returns the permits rv asks of limit name.
func partPermits(rv *reservation, name string) int64 {
	for _, p := range rv.parts {
		if p.limit == name {
			return p.permits
		}
	}
	return 0
}

// capRoom returns how many permits in-flight cap l has left at nowNanos
// beyond the permits it holds and reservedPermits.
func capRoom(l *limit, nowNanos, reservedPermits int64) int64 {
	c, ok := l.pacer.(*bucket.ConcurrencyPacer)
	if !ok {
		return 0
	}
	return c.Config().Spec.MaxInFlight - c.InFlight(nowNanos) - reservedPermits
}

// kickWaiters decides again, at nowNanos and in arrival order, every
// reservation waiting on limit name, after a command changed that limit
// (a put, a delete, a lease policy).
func (s *state) kickWaiters(name string, nowNanos int64) {
	wq := s.waits.byLimit[name]
	if wq == nil {
		return
	}
	for _, id := range slices.Clone(wq.ids) {
		rv, ok := s.reservations.byID[id]
		if !ok || rv.wait == nil {
			continue // decided by an earlier one's cascade
		}
		if s.tryWaiter(rv, nowNanos, nowNanos) {
			s.pumpWaiters(limitNames(rv), nowNanos, nowNanos)
		}
	}
}

// tryWaiter decides waiting reservation rv at atNanos if it can be
// decided (refNanos is the time of the entry being applied) and reports
// whether it was: granted when no cap it names blocks it (capsBlock) and
// its rate limits serve it by its deadline;
// refused when a rate limit cannot, or when a cap still blocks it at its
// deadline; UnknownLimit or Invalid when a limit it names is gone or can
// no longer grant its part.
func (s *state) tryWaiter(rv *reservation, atNanos, refNanos int64) bool {
	parts := waiterParts(rv)
	limits := make([]*limit, len(parts))
	for i, p := range parts {
		l, o, ok := s.trackedPart(p, len(parts))
		if !ok {
			s.resolveWaiter(rv, o, atNanos, refNanos)
			return true
		}
		limits[i] = l
	}
	deadline := rv.finalAtNanos
	blocking, retryAt, o, ok := s.capsBlock(atNanos, rv.id, limits, parts)
	if !ok {
		s.resolveWaiter(rv, o, atNanos, refNanos)
		return true
	}
	if blocking >= 0 {
		if atNanos < deadline {
			return false
		}
		limits[blocking].refusedRequests++
		s.resolveWaiter(rv, outcome{status: Refused, atNanos: retryAt, blocking: limits[blocking].name}, atNanos, refNanos)
		return true
	}
	at, blk, o, ok := queryRates(atNanos, limits, parts)
	if !ok {
		s.resolveWaiter(rv, o, atNanos, refNanos)
		return true
	}
	if at > deadline {
		limits[blk].refusedRequests++
		s.resolveWaiter(rv, outcome{status: Refused, atNanos: at, blocking: limits[blk].name}, atNanos, refNanos)
		return true
	}
	o = s.commitTracked(atNanos, at, deadline-atNanos, rv.wait.settleWithinNanos, rv, limits)
	s.resolveWaiter(rv, o, atNanos, refNanos)
	return true
}

// capsBlock finds the first enforced in-flight cap among limits that
// blocks reservation id (0: a reserve arriving now) at nowNanos: its part
// does not fit in what the cap has left beyond the permits it holds and
// those the reservations waiting on it ahead of id (for an arrival, all of
// them) ask for. It returns that part's index (-1 if none blocks) and the
// latest time worth asking again over the caps that block; or the outcome
// that makes the reserve Invalid.
//
// So no reserve takes permits a reserve waiting ahead of it needs (no
// barging: the queue is fair), and none idles behind one that a cap
// leaves room for but that waits for another cap.
func (s *state) capsBlock(nowNanos int64, id uint64, limits []*limit, parts []Part) (int, int64, outcome, bool) {
	blocking, retryAt := -1, nowNanos
	for i, p := range parts {
		l := limits[i]
		if !isCap(l) {
			continue
		}
		q, err := l.pacer.Query(nowNanos, p.Permits)
		if err != nil {
			return 0, 0, outcome{status: Invalid, detail: boundDetail(fmt.Sprintf(
				"limit %q cannot decide %d permits: %v", l.name, p.Permits, err))}, false
		}
		if q > nowNanos || capRoom(l, nowNanos, s.waits.ahead(l.name, id)) < p.Permits {
			if blocking < 0 {
				blocking = i
			}
			retryAt = max(retryAt, s.capRetryAt(l, nowNanos, q))
		}
	}
	return blocking, retryAt, outcome{}, true
}

// capRetryAt is when a reserve blocked on cap l at nowNanos (its Query q)
// is worth asking again: q if its permits do not fit before; else (the
// reserves waiting ahead of it ask for what is left) the next lapse of a
// hold or the first waiting reserve's deadline, whichever comes first.
func (s *state) capRetryAt(l *limit, nowNanos, q int64) int64 {
	if q > nowNanos {
		return q
	}
	at := int64(math.MaxInt64)
	if c, ok := l.pacer.(*bucket.ConcurrencyPacer); ok {
		if e, ok := c.NextExpiry(nowNanos); ok {
			at = e
		}
	}
	if wq := s.waits.byLimit[l.name]; wq != nil {
		at = min(at, s.reservations.byID[wq.ids[0]].finalAtNanos)
	}
	return max(at, nowNanos+1)
}

// Withdraw withdraws the reserve with request ID RequestID if it still
// waits in an in-flight cap's queue: it is decided Refused (its request ID
// then replays that), and the queues it leaves are tried again. A node
// sends it when the client of a waiting reserve went away before its
// answer. With Force, a reserve that was granted meanwhile is released
// (its holds freed) too: only for a request ID nobody else knows (one the
// node made up for a reserve that had none), since a client that may
// replay the ID would be told of a grant that no longer holds.
//
// With GraceNanos (not with Force; at most MaxWithdrawGraceNanos), a
// reserve whose request ID was retried (a replay answered Queued, at any
// node) within GraceNanos before the withdrawal's time is not withdrawn:
// its client came back, and keeps its place. A node whose client went
// away sends it a while later, with a grace that covers that while, so
// that a client that retries its attempt at once (its own timeout, a lost
// connection) keeps its place in the queue.
type Withdraw struct {
	RequestID  string
	Owner      string
	Force      bool
	GraceNanos int64
}

// MaxWithdrawGraceNanos bounds Withdraw.GraceNanos.
const MaxWithdrawGraceNanos = int64(time.Minute)

// withdrawByID applies a Withdraw at nowNanos: Settled with a Detail when
// it withdrew a waiting reserve, Settled with Released when (Force) it
// released a grant, SettleUnknown when nothing waits or (Force) holds
// under that ID, SettleForbidden for another owner's, SettleConflict for
// a reserve retried within its grace (kept waiting).
func (s *state) withdrawByID(nowNanos int64, c *Withdraw) ReleaseResult {
	if id, ok := s.waits.byRequestID[c.RequestID]; ok {
		rv := s.reservations.byID[id]
		if rv.owner != "" && rv.owner != c.Owner {
			return ReleaseResult{Status: SettleForbidden, Detail: boundDetail(fmt.Sprintf(
				"the reserve with request id %q belongs to %q, not to %q", c.RequestID, rv.owner, c.Owner))}
		}
		if at := rv.wait.retriedAtNanos; c.GraceNanos > 0 && at != 0 && at >= nowNanos-c.GraceNanos {
			return ReleaseResult{Status: SettleConflict, Detail: fmt.Sprintf(
				"the reserve with request id %q was retried %v before this withdrawal (grace %v): it keeps waiting",
				c.RequestID, time.Duration(nowNanos-at), time.Duration(c.GraceNanos))}
		}
		s.withdraw(rv, nowNanos)
		return ReleaseResult{Status: Settled, Detail: fmt.Sprintf(
			"the reserve with request id %q was waiting for its grant and is withdrawn", c.RequestID)}
	}
	if c.Force {
		if rec := s.dedup.lookup(c.RequestID); rec != nil && rec.status == Granted && rec.reservation != 0 {
			if _, live := s.reservations.byID[rec.reservation]; live {
				return s.release(nowNanos, &Release{Reservation: rec.reservation, Owner: c.Owner})
			}
		}
	}
	return ReleaseResult{Status: SettleUnknown, Detail: fmt.Sprintf(
		"no reserve with request id %q waits in an in-flight cap's queue", c.RequestID)}
}

// withdraw decides a waiting reservation that its owner released at
// nowNanos: refused, and the queues it leaves are tried again.
func (s *state) withdraw(rv *reservation, nowNanos int64) {
	// Its answer, if anyone asks again, is a refusal: counted as one.
	name := rv.parts[0].limit
	if l, ok := s.limits[name]; ok {
		l.refusedRequests++
	}
	s.resolveWaiter(rv, outcome{status: Refused, atNanos: nowNanos + 1, blocking: name}, nowNanos, nowNanos)
	s.pumpWaiters(limitNames(rv), nowNanos, nowNanos)
}

// resolveWaiter records the decision o on waiting reservation rv, made at
// atNanos within the entry at refNanos: rv leaves the queues; a grant
// keeps the record (commitTracked filled it in), anything else drops it;
// the request ID enters the dedup table with the decision; and the
// decision is added to the entry's waiter decisions.
func (s *state) resolveWaiter(rv *reservation, o outcome, atNanos, refNanos int64) {
	w := rv.wait
	s.waits.remove(rv)
	rv.wait = nil
	t := &s.reservations
	if o.status == Granted {
		heap.Fix(&t.heap, rv.heapIndex)
	} else {
		t.remove(rv)
	}
	if w.requestID != "" {
		s.dedup.add(dedupRecord{id: w.requestID, recordedAtNanos: atNanos, outcome: o})
	}
	d := WaiterDecision{Reservation: rv.id, Result: o.resultAt(refNanos, false)}
	if o.status == Granted {
		d.DecidedAtNanos, d.ServedAtNanos = rv.decidedAtNanos, rv.servedAtNanos
	}
	s.decided = append(s.decided, d)
}

// TakeWaiterDecisions returns the decisions on waiting reservations made
// by the entries applied since the previous call, in the order they were
// made, and forgets them. They are not replicated state: the node that
// applies an entry reads them right after, to answer the clients that
// wait (package node). A Restore forgets them too.
func (f *FSM) TakeWaiterDecisions() []WaiterDecision {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.st.decided
	f.st.decided = nil
	return d
}

// NextWaiterEventNanos returns the earliest cluster time after the last
// applied entry's at which a waiting reservation may be decided without a
// command (a hold lapses on a cap it waits on, or its deadline comes):
// an entry applied at or after it decides that. False when nothing waits.
func (f *FSM) NextWaiterEventNanos() (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.nextWaiterEvent(f.st.lastNowNanos)
}

// Waiting returns how many reservations wait in in-flight caps' queues.
func (f *FSM) Waiting() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.waits.len()
}
