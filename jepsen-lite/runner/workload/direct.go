package workload

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/transport/client"
)

// runDirect runs worker id of the strict or window workload until ctx
// ends: reserve n permits (n drawn by permitDraws; strict, n > 1: in a
// multi-permit turn, see turn), wait for each permit's turn, use it at the
// fake API (one call per permit, naming it), again. Every reserve and API
// call is in the history.
func (w *Workers) runDirect(ctx context.Context, id int) error {
	c, err := w.client(id)
	if err != nil {
		return err
	}
	d := &directWorker{
		w: w, id: id, c: c,
		rng:   rand.New(rand.NewPCG(w.cfg.Seed, uint64(id))),
		draws: newPermitDraws(w.cfg.Seed, id, w.cfg.MaxPermits),
		name:  Name(id, w.cfg.Groups),
	}
	defer func() {
		if d.release != nil {
			d.release()
		}
	}()
	for i := 0; i < maxWorkerOps && ctx.Err() == nil; i++ {
		w.pool.PausePoint(ctx, id)
		if ctx.Err() != nil {
			break
		}
		if err := d.reserveAndUse(ctx); err != nil {
			return err
		}
	}
	return nil
}

// directWorker is one worker of the strict or window workload: its client,
// its random draws and the reserve it is at.
type directWorker struct {
	w     *Workers
	id    int
	c     *client.Client
	rng   *rand.Rand
	draws *permitDraws
	name  string

	n        int64           // the permits of the reserve to send (0: draw)
	release  func()          // ends this worker's multi-permit turn (nil: none held)
	turnOver <-chan struct{} // closed when that turn ended
}

// done ends the reserve of n permits: draw again next time.
func (d *directWorker) done() {
	if d.release != nil {
		d.release()
		d.release = nil
	}
	d.n = 0
}

// reserveAndUse sends one reserve (of permits drawn when the last reserve
// is over) and uses its permits if granted; after a failure or a refusal
// it backs off. It returns only history errors.
func (d *directWorker) reserveAndUse(ctx context.Context) error {
	w, id := d.w, d.id
	if d.n == 0 {
		d.n = d.draws.next()
		if d.n > 1 && w.cfg.Workload == Strict {
			d.release, d.turnOver = w.takeTurn(id)
		}
	}
	if d.release == nil {
		w.turn.wait(ctx, id)
	}
	req := history.ReserveRequest{Limit: w.limit, Permits: d.n, MaxWaitNanos: int64(w.cfg.MaxWait)}
	inv, err := w.hw.Invoke(id, "", history.FReserve, "", req)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	g, rerr := d.c.Reserve(rctx, w.limit, d.n, w.cfg.MaxWait)
	cancel()
	switch {
	case rerr != nil:
		typ := w.reserveFailed(rerr)
		d.done()
		if _, err := w.hw.Complete(inv, typ, "", "", history.ReserveResponse{Error: rerr.Error()}); err != nil {
			return err
		}
		errorBackoff(ctx, d.rng)
		return nil
	case !g.Granted:
		return d.refused(ctx, inv, g)
	}
	permits := d.n
	d.done()
	w.counters.granted.Add(1)
	w.counters.permitsGranted.Add(permits)
	if permits > 1 {
		w.counters.multiPermitGrants.Add(1)
	}
	comp, err := w.hw.Complete(inv, history.OK, "", g.RequestID, history.ReserveResponse{
		Granted: true, WaitNanos: int64(g.Delay), ExpiresInNanos: int64(g.ExpiresIn), SpacingNanos: int64(g.Spacing), Duplicate: g.Duplicate})
	if err != nil {
		return err
	}
	return w.usePermits(ctx, id, d.name, "", g, permits, w.start.Add(time.Duration(comp.TimeNanos)))
}

// refused records reserve inv's refusal g and waits: in a multi-permit
// turn, until the same reserve may fit; else (the reserve is over) about
// the retry-after, at most two intervals.
func (d *directWorker) refused(ctx context.Context, inv history.Op, g client.Grant) error {
	w := d.w
	w.counters.refused.Add(1)
	if _, err := w.hw.Complete(inv, history.Fail, "", g.RequestID, history.ReserveResponse{RetryAfterNanos: int64(g.RetryAfter), Duplicate: g.Duplicate}); err != nil {
		return err
	}
	if d.release != nil && !ended(d.turnOver) {
		// In the turn: the same reserve again once the queue
		// should have drained enough (the turn's bound ends it).
		_ = wait.Sleep(ctx, min(fitDelay(g.RetryAfter, w.cfg.Interval, w.cfg.MaxReserved, d.n), time.Second))
		return nil
	}
	d.done()
	back := min(g.RetryAfter, 2*w.cfg.Interval)
	_ = wait.Sleep(ctx, max(back/2+time.Duration(d.rng.Int64N(int64(back/2)+1)), 5*time.Millisecond))
	return nil
}

// reserveFailed counts a reserve that ended in error rerr and returns its
// outcome in the history: fail for a definite failure (refused as invalid,
// or never delivered to any server: no effect either way), else info.
func (w *Workers) reserveFailed(rerr error) history.Type {
	if errors.Is(rerr, client.ErrInvalid) || errors.Is(rerr, client.ErrNotFound) || errors.Is(rerr, client.ErrNotDelivered) {
		w.counters.failed.Add(1)
		if errors.Is(rerr, client.ErrNotDelivered) {
			w.counters.notDelivered.Add(1)
		}
		return history.Fail
	}
	w.counters.unknown.Add(1)
	return history.Info
}

// errorBackoff waits 50 to 150 ms after a reserve's error.
func errorBackoff(ctx context.Context, rng *rand.Rand) {
	_ = wait.Sleep(ctx, time.Duration(50+rng.IntN(100))*time.Millisecond)
}

// usePermits uses the n permits of grant g (on key, for the keyed fake
// API; "" otherwise), received at recv, each at its
// own turn: permit j is ready at recv + wait + j·spacing (all together
// when the spacing is 0). recv is the completion as recorded (a little
// after the client received the answer), so the history's own arithmetic
// never finds a call before its permit was ready. A permit that is no
// longer usable (strict: expired; window: stale or late) is skipped, never
// used; the next one may still be. It returns only history errors.
func (w *Workers) usePermits(ctx context.Context, id int, name, key string, g client.Grant, n int64, recv time.Time) error {
	for j := int64(0); j < n; j++ {
		ready := recv.Add(g.Delay + time.Duration(j)*g.Spacing)
		if wait.Sleep(ctx, time.Until(ready)) != nil {
			return nil
		}
		w.pool.PausePoint(ctx, id)
		now := time.Now()
		if !w.usable(g, j, ready, now) {
			continue
		}
		sent := int64(now.Sub(w.start))
		ainv, err := w.hw.Invoke(id, "", history.FAPICall, g.RequestID, history.APICallValue{Worker: name, Permit: j})
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, cerr := w.api.Call(actx, fakeapi.CallRequest{Worker: name, RequestID: g.RequestID, SentNanos: &sent, Permit: &j, Key: key})
		cancel()
		if cerr != nil {
			w.counters.apiErrors.Add(1)
			if _, err := w.hw.Complete(ainv, history.Info, "", "", history.APICallValue{Worker: name, Permit: j, Error: cerr.Error()}); err != nil {
				return err
			}
			continue
		}
		w.counters.apiCalls.Add(1)
		if _, err := w.hw.Complete(ainv, history.OK, "", "", history.APICallValue{Worker: name, Permit: j, Status: 200}); err != nil {
			return err
		}
	}
	return nil
}

// usable applies the workload's use discipline to permit j of a grant at
// now.
func (w *Workers) usable(g client.Grant, j int64, ready, now time.Time) bool {
	strict := w.cfg.Workload == Strict || (w.cfg.Workload == Templated && w.cfg.Templated.Algorithm == "strict")
	switch {
	case strict:
		// expires_in < 0: a replayed grant that already expired. Permit j
		// expires at SentAt + expires_in + j·spacing.
		if exp := g.ExpiresAtPermit(j); g.ExpiresIn < 0 || (!exp.IsZero() && now.After(exp)) {
			w.counters.skippedExpired.Add(1)
			return false
		}
	default:
		if g.ReceivedAt.Sub(g.SentAt) > MaxAnswerRTT {
			w.counters.skippedStale.Add(1)
			return false
		}
		if now.Sub(ready) > MaxLateUse {
			w.counters.skippedLate.Add(1)
			return false
		}
	}
	return true
}

// takeTurn takes the multi-permit turn for worker id if it is free and
// cooled down, bounded by max_reserved + 2 intervals (enough for the
// register's queue to drain); nils if not.
func (w *Workers) takeTurn(id int) (func(), <-chan struct{}) {
	bound := time.Duration(w.cfg.MaxReserved+2) * w.cfg.Interval
	release, over := w.turn.take(id, bound)
	if release != nil {
		w.counters.turns.Add(1)
	}
	return release, over
}

// ended reports whether ch is closed (nil: never).
func ended(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// isNotFound reports an answer "unknown limit" (404): the reserve had no
// effect.
func isNotFound(err error) bool { return errors.Is(err, client.ErrNotFound) }

// client returns worker id's permitd client: the servers rotated so that
// the workers' first attempts spread over the nodes, short attempts, two
// rounds, and the worker's own seed.
func (w *Workers) client(id int) (*client.Client, error) {
	servers := slices.Clone(w.servers)
	k := id % len(servers)
	servers = append(servers[k:], servers[:k]...) // spread first attempts
	opts := []client.Option{client.WithAttemptTimeout(1500 * time.Millisecond), client.WithRounds(2),
		client.WithBackoff(25*time.Millisecond, 500*time.Millisecond), client.WithSeed(w.cfg.Seed + uint64(id))}
	return client.New(servers, append(opts, w.cfg.Creds.ClientOptions()...)...)
}
