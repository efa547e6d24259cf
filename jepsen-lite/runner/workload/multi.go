package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/httpjson"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/transport/client"
)

// Multi: three limits reserved together (client.ReserveMany): a strict
// one (1 permit per call), a bursty token limit (the call's estimated
// tokens) and a concurrency limit (1 in flight per call). Each grant is
// used for one fake API call of random actual tokens (<= the estimate)
// and duration, then settled with the actual tokens and released.
const Multi = "multi"

// MultiConfig names the multi workload's limits and its draws.
type MultiConfig struct {
	// RPM (strict), TPM (bursty tokens) and InFlight (concurrency) are
	// the limits' names.
	RPM, TPM, InFlight string
	// MaxTokens is the largest token estimate (estimates are uniform in
	// 1..MaxTokens; a call's actual tokens uniform in 1..estimate).
	MaxTokens int64
	// MinCall and MaxCall bound a call's duration (uniform).
	MinCall, MaxCall time.Duration
	// HoldTTL is the concurrency limit's ttl. A call must end HoldMargin
	// before its hold lapses, as the grant says (hold_expires_in_ns,
	// client.Reservation.HoldExpiresAt: conservative already): the margin
	// covers only the call's way to the fake API, which stamps its start
	// on receipt, and the stamping of its end.
	HoldTTL, HoldMargin time.Duration
	// SettleWithin is the reserves' settle_within (0: the server's).
	SettleWithin time.Duration
	// ProbeOneIn: one grant in ProbeOneIn is settled with a raw request
	// sent twice (the second must be a duplicate), then settled again by
	// the client (must be a conflict) and released twice (the second
	// must free 0).
	ProbeOneIn int
}

// MultiStats counts what the multi workers did.
type MultiStats struct {
	// Refusals by the limit that blocked.
	Blocking map[string]int64 `json:"blocking"`
	// Settles answered (not duplicates), those that refunded tokens, the
	// tokens refunded, duplicates answered, conflicts (409), unknown or
	// failed settles.
	Settles, SettlesWithRefund, TokensRefunded, SettleDuplicates int64
	SettleConflicts, SettleErrors                                int64
	// Releases answered (first ones), permits released, repeated
	// releases answered, errors.
	Releases, Released, ReleaseRepeats, ReleaseErrors int64
	// Tokens estimated (granted) and actually used by the calls.
	TokensEstimated, TokensUsed int64
}

type multiCounters struct {
	settles, withRefund, refunded, dups, conflicts, settleErrs atomic.Int64
	releases, released, repeats, releaseErrs                   atomic.Int64
	estimated, used                                            atomic.Int64
	blockRPM, blockTPM, blockInFlight, blockOther              atomic.Int64
}

// MultiStats returns the multi workers' counts.
func (w *Workers) MultiStats() MultiStats {
	m := &w.multi
	mc := w.cfg.Multi
	return MultiStats{
		Blocking: map[string]int64{mc.RPM: m.blockRPM.Load(), mc.TPM: m.blockTPM.Load(), mc.InFlight: m.blockInFlight.Load(), "other": m.blockOther.Load()},
		Settles:  m.settles.Load(), SettlesWithRefund: m.withRefund.Load(), TokensRefunded: m.refunded.Load(), SettleDuplicates: m.dups.Load(),
		SettleConflicts: m.conflicts.Load(), SettleErrors: m.settleErrs.Load(),
		Releases: m.releases.Load(), Released: m.released.Load(), ReleaseRepeats: m.repeats.Load(), ReleaseErrors: m.releaseErrs.Load(),
		TokensEstimated: m.estimated.Load(), TokensUsed: m.used.Load(),
	}
}

// runMulti runs worker id of the multi workload until ctx ends.
func (w *Workers) runMulti(ctx context.Context, id int) error {
	mc := w.cfg.Multi
	c, err := w.client(id)
	if err != nil {
		return err
	}
	raw := w.cfg.Creds.HTTP(&http.Transport{MaxIdleConnsPerHost: 4})
	rng := rand.New(rand.NewPCG(w.cfg.Seed^0x6d756c7469, uint64(id)))
	name := Name(id, w.cfg.Groups)
	for i := 0; i < maxWorkerOps && ctx.Err() == nil; i++ {
		w.pool.PausePoint(ctx, id)
		if ctx.Err() != nil {
			break
		}
		est := 1 + rng.Int64N(mc.MaxTokens)
		wants := []client.Want{{Limit: mc.RPM, Permits: 1}, {Limit: mc.TPM, Permits: est}, {Limit: mc.InFlight, Permits: 1}}
		req := history.MultiReserveRequest{ReserveRequest: history.ReserveRequest{Limit: mc.RPM, Permits: 1, MaxWaitNanos: int64(w.cfg.MaxWait)},
			SettleWithinNanos: int64(mc.SettleWithin)}
		for _, wt := range wants {
			req.Limits = append(req.Limits, history.LimitPermits{Limit: wt.Limit, Permits: wt.Permits})
		}
		inv, err := w.hw.Invoke(id, "", history.FReserve, "", req)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, rerr := c.ReserveMany(rctx, wants, client.ReserveOptions{MaxWait: w.cfg.MaxWait, SettleWithin: mc.SettleWithin})
		cancel()
		switch {
		case rerr != nil:
			typ := w.reserveFailed(rerr)
			if _, err := w.hw.Complete(inv, typ, "", "", history.MultiReserveResponse{ReserveResponse: history.ReserveResponse{Error: rerr.Error()}}); err != nil {
				return err
			}
			errorBackoff(ctx, rng)
			continue
		case !r.Granted:
			w.counters.refused.Add(1)
			switch r.Blocking {
			case mc.RPM:
				w.multi.blockRPM.Add(1)
			case mc.TPM:
				w.multi.blockTPM.Add(1)
			case mc.InFlight:
				w.multi.blockInFlight.Add(1)
			default:
				w.multi.blockOther.Add(1)
			}
			if _, err := w.hw.Complete(inv, history.Fail, "", r.RequestID, history.MultiReserveResponse{
				ReserveResponse: history.ReserveResponse{RetryAfterNanos: int64(r.RetryAfter), Duplicate: r.Duplicate}, Blocking: r.Blocking}); err != nil {
				return err
			}
			back := min(max(r.RetryAfter, 10*time.Millisecond), 500*time.Millisecond)
			_ = wait.Sleep(ctx, back/2+time.Duration(rng.Int64N(int64(back/2)+1)))
			continue
		}
		w.counters.granted.Add(1)
		w.counters.permitsGranted.Add(1)
		w.multi.estimated.Add(est)
		comp, err := w.hw.Complete(inv, history.OK, "", r.RequestID, history.MultiReserveResponse{ReserveResponse: history.ReserveResponse{
			Granted: true, WaitNanos: int64(r.Delay), ExpiresInNanos: int64(r.ExpiresIn), SpacingNanos: int64(r.Spacing), Duplicate: r.Duplicate},
			ReservationID: r.ID})
		if err != nil {
			return err
		}
		if err := w.useReservation(ctx, id, name, c, raw, rng, r, est, w.start.Add(time.Duration(comp.TimeNanos))); err != nil {
			return err
		}
	}
	return nil
}

// useReservation waits for grant r (received at recv, as recorded), makes
// its API call if the permits are still usable, then settles the actual
// tokens and releases the in-flight permit. Only history errors are
// returned.
func (w *Workers) useReservation(ctx context.Context, id int, name string, c *client.Client, raw httpjson.Client, rng *rand.Rand,
	r client.Reservation, est int64, recv time.Time) error {
	mc := w.cfg.Multi
	actual := int64(0)
	dur := mc.MinCall + time.Duration(rng.Int64N(int64(mc.MaxCall-mc.MinCall)+1))
	tokens := 1 + rng.Int64N(est)
	probe := mc.ProbeOneIn > 0 && rng.IntN(mc.ProbeOneIn) == 0
	ready := recv.Add(r.Delay)
	if wait.Sleep(ctx, time.Until(ready)) == nil {
		w.pool.PausePoint(ctx, id)
		now := time.Now()
		// The strict permit expires at SentAt + Held + expires_in; the
		// hold lapses at SentAt + Held + hold_expires_in (Held: how long
		// the server held the request, a reserve that waited in the
		// cap's queue), which is no later than the register frees the
		// slot, even when t* came before the answer.
		holdEnd := r.HoldExpiresAt().Add(-mc.HoldMargin)
		exp := r.ExpiresAt()
		switch {
		case ctx.Err() != nil:
		case r.ExpiresIn < 0 || (!exp.IsZero() && now.After(exp)):
			w.counters.skippedExpired.Add(1)
		case !r.Holds || now.Add(dur).After(holdEnd):
			// (A grant of the cap that holds nothing: its limit was not a
			// cap when it was granted; no call without a slot.)
			w.counters.skippedLate.Add(1)
		default:
			sent := int64(now.Sub(w.start))
			j, dn := int64(0), int64(dur)
			val := history.MultiAPICallValue{APICallValue: history.APICallValue{Worker: name}, ReservationID: r.ID, Tokens: tokens, EstimateTokens: est, DurationNanos: dn}
			ainv, err := w.hw.Invoke(id, "", history.FAPICall, r.RequestID, val)
			if err != nil {
				return err
			}
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second+dur)
			_, cerr := w.api.Call(actx, fakeapi.CallRequest{Worker: name, RequestID: r.RequestID, SentNanos: &sent, Permit: &j, Tokens: &tokens, DurationNanos: &dn})
			cancel()
			if cerr != nil {
				w.counters.apiErrors.Add(1)
				val.Error = cerr.Error()
				if _, err := w.hw.Complete(ainv, history.Info, "", "", val); err != nil {
					return err
				}
				actual = tokens // it may have run: settle what it may have used
			} else {
				w.counters.apiCalls.Add(1)
				w.multi.used.Add(tokens)
				actual = tokens
				val.Status = 200
				if _, err := w.hw.Complete(ainv, history.OK, "", "", val); err != nil {
					return err
				}
			}
		}
	}
	// Settle and release even when the run is ending: they free what the
	// reservation holds.
	sctx := context.WithoutCancel(ctx)
	settle := []history.LimitPermits{{Limit: mc.TPM, Permits: actual}}
	if probe {
		reqID := fmt.Sprintf("jl-settle-%d-%s", id, r.ID)
		for attempt := 1; attempt <= 2; attempt++ {
			if _, err := w.rawSettle(sctx, id, raw, r.ID, reqID, attempt, settle); err != nil {
				return err
			}
		}
		if _, err := w.clientSettle(sctx, id, c, r.ID, history.SettleAgain, settle); err != nil {
			return err
		}
	} else if _, err := w.clientSettle(sctx, id, c, r.ID, history.SettleClient, settle); err != nil {
		return err
	}
	attempts := 1
	if probe {
		attempts = 2
	}
	for attempt := 1; attempt <= attempts; attempt++ {
		if err := w.release(sctx, id, c, r.ID, attempt); err != nil {
			return err
		}
	}
	return nil
}

// clientSettle settles reservation rid with client.Settle and records it.
func (w *Workers) clientSettle(ctx context.Context, id int, c *client.Client, rid, mode string, actual []history.LimitPermits) (*history.SettleValue, error) {
	v := history.SettleValue{ReservationID: rid, Mode: mode, Actual: actual}
	inv, err := w.hw.Invoke(id, "", history.FSettle, "", v)
	if err != nil {
		return nil, err
	}
	wants := make([]client.Want, len(actual))
	for i, a := range actual {
		wants[i] = client.Want{Limit: a.Limit, Permits: a.Permits}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	res, serr := c.Settle(sctx, rid, wants)
	cancel()
	if serr != nil {
		typ := history.Info
		var ae *client.APIError
		if errors.As(serr, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 {
			typ, v.Code = history.Fail, ae.StatusCode
			if ae.StatusCode == http.StatusConflict {
				w.multi.conflicts.Add(1)
			}
		} else if errors.Is(serr, client.ErrNotDelivered) {
			typ = history.Fail
		}
		if typ != history.Fail || v.Code != http.StatusConflict {
			w.multi.settleErrs.Add(1)
		}
		v.Error = serr.Error()
		_, err := w.hw.Complete(inv, typ, "", "", v)
		return nil, err
	}
	v.Duplicate = res.Duplicate
	for _, s := range res.Limits {
		v.Limits = append(v.Limits, history.SettledLimit{Limit: s.Limit, Reserved: s.Reserved, Actual: s.Actual, Refunded: s.Refunded, Charged: s.Charged})
	}
	w.countSettle(v)
	_, err = w.hw.Complete(inv, history.OK, "", "", v)
	return &v, err
}

// rawSettle sends POST /v1/reservations/{rid}/settle with request ID
// reqID through the public HTTP API, to each server in turn until one
// answers (a follower forwards it; a 503 or no answer moves on).
func (w *Workers) rawSettle(ctx context.Context, id int, raw httpjson.Client, rid, reqID string, attempt int, actual []history.LimitPermits) (*history.SettleValue, error) {
	v := history.SettleValue{ReservationID: rid, Mode: history.SettleRaw, Attempt: attempt, Actual: actual, SettleRequestID: reqID}
	inv, err := w.hw.Invoke(id, "", history.FSettle, reqID, v)
	if err != nil {
		return nil, err
	}
	type part struct {
		Name    string `json:"name"`
		Permits int64  `json:"permits"`
	}
	in := struct {
		Actual    []part `json:"actual"`
		RequestID string `json:"request_id"`
	}{RequestID: reqID, Actual: []part{}}
	for _, a := range actual {
		in.Actual = append(in.Actual, part{a.Limit, a.Permits})
	}
	var out struct {
		Duplicate bool `json:"duplicate"`
		Limits    []struct {
			Name                                string
			Reserved, Actual, Refunded, Charged int64
		} `json:"limits"`
	}
	var lastErr error
	code := 0
	for round := 0; round < 3 && ctx.Err() == nil; round++ {
		for _, s := range w.servers {
			addr := strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
			lastErr = raw.Do(ctx, addr, addr, http.MethodPost, "/v1/reservations/"+rid+"/settle", in, &out, 2*time.Second)
			code = httpjson.Code(lastErr)
			if lastErr == nil || (code >= 400 && code < 500) {
				break
			}
		}
		if lastErr == nil || (code >= 400 && code < 500) {
			break
		}
		_ = wait.Sleep(ctx, 200*time.Millisecond)
	}
	switch {
	case lastErr == nil:
		v.Duplicate = out.Duplicate
		for _, s := range out.Limits {
			v.Limits = append(v.Limits, history.SettledLimit{Limit: s.Name, Reserved: s.Reserved, Actual: s.Actual, Refunded: s.Refunded, Charged: s.Charged})
		}
		w.countSettle(v)
		_, err = w.hw.Complete(inv, history.OK, "", reqID, v)
		return &v, err
	case code >= 400 && code < 500:
		v.Code, v.Error = code, lastErr.Error()
		w.multi.settleErrs.Add(1)
		_, err = w.hw.Complete(inv, history.Fail, "", reqID, v)
	default:
		v.Error = lastErr.Error()
		w.multi.settleErrs.Add(1)
		_, err = w.hw.Complete(inv, history.Info, "", reqID, v)
	}
	return nil, err
}

// countSettle counts an answered settlement.
func (w *Workers) countSettle(v history.SettleValue) {
	if v.Duplicate {
		w.multi.dups.Add(1)
		return
	}
	w.multi.settles.Add(1)
	var refunded int64
	for _, l := range v.Limits {
		refunded += l.Refunded
	}
	if refunded > 0 {
		w.multi.withRefund.Add(1)
		w.multi.refunded.Add(refunded)
	}
}

// release releases reservation rid's in-flight permits (attempt 2: the
// repeated release, which must free nothing) and records it.
func (w *Workers) release(ctx context.Context, id int, c *client.Client, rid string, attempt int) error {
	v := history.ReleaseValue{ReservationID: rid, Attempt: attempt}
	inv, err := w.hw.Invoke(id, "", history.FRelease, "", v)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	rr, rerr := c.Release(rctx, rid)
	n := rr.Released
	cancel()
	if rerr != nil {
		w.multi.releaseErrs.Add(1)
		typ := history.Info
		var ae *client.APIError
		if errors.As(rerr, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 {
			typ, v.Code = history.Fail, ae.StatusCode
		} else if errors.Is(rerr, client.ErrNotDelivered) {
			typ = history.Fail
		}
		v.Error = rerr.Error()
		_, err := w.hw.Complete(inv, typ, "", "", v)
		return err
	}
	v.Released, v.Duplicate = n, rr.Duplicate
	if attempt == 1 {
		w.multi.releases.Add(1)
		w.multi.released.Add(n)
	} else {
		w.multi.repeats.Add(1)
	}
	_, err = w.hw.Complete(inv, history.OK, "", "", v)
	return err
}
