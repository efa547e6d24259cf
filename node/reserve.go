package node

import (
	"context"
	"fmt"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// reserve.go: reserves and the sessions that make their retries
// exactly-once.

// Reserve decides one reserve on the leader: locally if this node leads,
// else forwarded (command.go). It is validated here first (an invalid
// request never reaches the log): the name and fields here, and on the
// leader the limit's existence, its lease policy and the permit count
// against its MaxPermits (checkLocal; a follower forwards and the leader
// checks). A reserve with a
// RequestID or a session reference is retried on ambiguous failures; the
// register deduplicates it. Either way the answer's durations count from
// the moment this node returns it (answer.go).
//
// Without a reachable leader the reserve fails within its own max wait
// plus LeaderWait (a caller that accepts no wait gets its 503 within
// LeaderWait), not after the request's whole timeout. A reserve queued on
// the leader still waits for its outcome past this bound.
func (n *Node) Reserve(ctx context.Context, r fsm.Reserve) (fsm.ReserveResult, error) {
	if r.Track && r.MaxWaitNanos > 0 {
		return n.reserveMayWait(ctx, r) // waiters.go
	}
	return n.reserve(ctx, r, false)
}

// ReserveHeld is Reserve for a reserve whose slot among
// MaxPendingReserves a connection's read loop took (TryHoldReserve, and
// its Calls.Admit answered AdmitHeld): it takes no second one, and
// ServeCalls gives that one back when the call returns.
func (n *Node) ReserveHeld(ctx context.Context, r fsm.Reserve) (fsm.ReserveResult, error) {
	return n.reserve(ctx, r, true)
}

// reserve is Reserve; held says that the caller already took the
// reserve's slot among MaxPendingReserves (ReserveHeld) and gives it back
// itself.
func (n *Node) reserve(ctx context.Context, r fsm.Reserve, held bool) (fsm.ReserveResult, error) {
	if err := r.Validate(); err != nil {
		return fsm.ReserveResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := n.checkRemoved(); err != nil {
		return fsm.ReserveResult{}, err
	}
	// checked: the active period in which this node, leading, checked r
	// on its state (0: not leading); run on the leader in that period,
	// the first attempt need not check again.
	checked := n.timeline.activePeriod()
	if checked != 0 {
		if err := n.checkParts(r); err != nil {
			return fsm.ReserveResult{}, err
		}
	}
	if !held {
		release, err := n.admitReserves(1)
		if err != nil {
			return fsm.ReserveResult{}, err
		}
		var adm *admission
		ctx, adm = withAdmission(ctx, release)
		defer adm.leave()
	}
	// Saturating: a max wait near math.MaxInt64 (the edge accepts any)
	// plus LeaderWait would wrap into the past, and a follower would give
	// up on the leader's answer at once, after the leader had decided.
	leaderBy := time.Now().Add(wire.AddNanos(time.Duration(r.MaxWaitNanos), n.cfg.LeaderWait))
	idempotent := r.RequestID != "" || r.Session.ID != 0
	var entry []byte   // built once, the first time a leader is elsewhere
	var sent time.Time // no later than the latest forward's sending
	payload := func() ([]byte, error) {
		sent = time.Now()
		if entry == nil {
			var err error
			if entry, err = fsm.AppendReserveBatch(nil, fsm.Stamp{}, []fsm.Reserve{r}); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
		return entry, nil
	}
	return retryAmbiguous(n, ctx, idempotent, leaderBy, func() (fsm.ReserveResult, error) {
		period := checked // 0 on a retry
		checked = 0
		return leaderDo(n, ctx, leaderBy, wire.OpCommand, payload,
			func(ctx context.Context) (fsm.ReserveResult, error) {
				// This node may have become the leader while the
				// reserve waited for one: check on its state now.
				if period == 0 || n.timeline.activePeriod() != period {
					if err := n.checkLocal(r); err != nil {
						return fsm.ReserveResult{}, err
					}
				}
				d, err := n.reserveLocal(ctx, r)
				return d.res, err
			},
			func(resp []byte, received time.Time) (fsm.ReserveResult, error) {
				d, err := decodeReserveAnswer(resp)
				if err != nil {
					return fsm.ReserveResult{}, fmt.Errorf("node: leader's answer: %w", err)
				}
				if hold := n.testHoldRelayed; hold != nil {
					hold()
				}
				return n.resultToErr(r, relayedResult(d, sent, received), d.index)
			})
	})
}

// checkLocal rejects, on the leader, reserves it can already tell are
// invalid: an unknown limit, a leased limit (its permits are handed out
// by lease), more permits than the limit can ever grant. A follower
// checks none of these and lets the leader decide: its state may lag a
// change the caller has already seen acknowledged (a lease policy turned
// off, a limit put or reconfigured), and a stale check would refuse a
// valid reserve.
func (n *Node) checkLocal(r fsm.Reserve) error {
	if !n.timeline.isActive() {
		return nil
	}
	return n.checkParts(r)
}

// checkParts is checkLocal on this node's state, which the caller knows
// to be the leader's.
func (n *Node) checkParts(r fsm.Reserve) error {
	if r.Track {
		for _, p := range r.Parts() {
			if err := n.checkPart(p.Limit, p.Permits); err != nil {
				return err
			}
		}
		return nil
	}
	return n.checkPart(r.Limit, r.Permits)
}

// checkPart checks one limit of a reserve on the leader's state.
func (n *Node) checkPart(name string, permits int64) error {
	ok, leased, max := n.fsm.ReserveCheck(name) // a key its template creates on this reserve exists
	if !ok {
		return n.limitNotFound(name)
	}
	if leased {
		// Its permits are handed out by lease: a reserve would spend them
		// a second time.
		return fmt.Errorf("%w: limit %q is leased: reserve through a worker", ErrInvalid, name)
	}
	if permits > max {
		return fmt.Errorf("%w: %d permits: limit %q can grant at most %d in one request", ErrInvalid, permits, name, max)
	}
	return nil
}

// testStallAnswer waits testDelayLeaderAnswer, if a test set it.
func (n *Node) testStallAnswer(ctx context.Context) {
	if d := n.testDelayLeaderAnswer.Load(); d > 0 {
		n.pause(ctx, time.Duration(d))
	}
}

func (n *Node) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-n.stopCh:
		return false
	}
}

// reserveLocal stamps r's arrival, hands it to the batcher and waits for
// the register's decision, expressed relative to the moment it returns,
// with the index of the entry that decided it.
func (n *Node) reserveLocal(ctx context.Context, r fsm.Reserve) (decidedReserve, error) {
	out, arrived, err := n.batcher.run(ctx, r)
	if err != nil {
		return decidedReserve{}, err
	}
	if f := n.testDecided; f != nil {
		f(out.res)
	}
	if out.res.Status == fsm.Queued {
		return n.awaitWaiter(ctx, r, out.res)
	}
	n.testStallAnswer(ctx)
	at := time.Now() // before the shift: the durations count from at
	res, err := n.resultToErr(r, shiftDecided(out.res, arrived, out.appliedAt), out.index)
	return decidedReserve{res: res, index: out.index, at: at}, err
}

// resultToErr maps domain outcomes that the API reports as errors. A
// grant whose (first) permit expired before the answer could be sent — a
// duplicate replayed too late, or a fresh strict grant held past its
// expiry — is reported as a refusal: the permit must not be used, and a
// new request (with a new ID) may be granted; a fresh one is reported to
// the register, which counts it as a refusal too (expiredgrants.go; index
// is the entry that decided it). A refusal, Busy and SessionExpired stay
// results: they carry their retry time or detail.
func (n *Node) resultToErr(r fsm.Reserve, res fsm.ReserveResult, index uint64) (fsm.ReserveResult, error) {
	if res.Status == fsm.Granted && res.ExpiresInNanos < 0 {
		n.reportExpired(r, res, index)
		detail := "the permit granted to this request expired before its answer could be sent; reserve again"
		if res.Duplicate {
			detail = "the permit granted to this request_id expired before the retry arrived; retry with a new request_id"
		}
		if r.Track && res.ReservationID != 0 && !res.Duplicate {
			n.settleUnused(res.ReservationID, r.Owner, r.Parts())
		}
		return fsm.ReserveResult{Status: fsm.Refused, RetryAfterNanos: 1, Duplicate: res.Duplicate, Detail: detail}, nil
	}
	switch res.Status {
	case fsm.UnknownLimit:
		if r.Track && res.Detail != "" {
			return res, userErrorf(ErrNotFound, "%s", res.Detail)
		}
		return res, n.limitNotFound(r.Limit)
	case fsm.Invalid:
		return res, fmt.Errorf("%w: %s", ErrInvalid, res.Detail)
	}
	return res, nil
}

// OpenSession opens a client session for o's owner, within o's quota
// (see fsm.OpenSession and fsm.SessionResult): the session ID to put in
// reserves' fsm.SessionRef, and how long the session lives without a
// reserve; or, when the register holds as many sessions as it may (in
// all, or for the owner), a result with ID 0, RetryAfterNanos and Detail,
// which opened nothing. It is not retried: a session opened by an attempt
// whose answer was lost expires unused.
func (n *Node) OpenSession(ctx context.Context, o fsm.OpenSession) (fsm.SessionResult, error) {
	b, err := fsm.AppendOpenSessionAs(nil, fsm.Stamp{}, o)
	if err != nil {
		return fsm.SessionResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := n.command(ctx, b)
	return resultAs[fsm.SessionResult]("open session", v, err)
}

func (n *Node) openSessionLocal(ctx context.Context, o fsm.OpenSession) (fsm.SessionResult, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendOpenSessionAs(nil, st, o) })
	return resultAs[fsm.SessionResult]("open session", v, err)
}
