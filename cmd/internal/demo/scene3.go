package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/client"
)

// Scene 3 of the demo: a fleet of in-process workers calls a fake LLM API
// that enforces requests, tokens and calls in flight, each worker
// reserving all three at once on the register (client.ReserveMany),
// settling the call's real token cost afterwards (client.Settle) and
// releasing its in-flight permit (client.Release).
//
// The register's limits:
//
//   - rpm, strict, 10/s (600 requests a minute), expiry E = 50 ms. Strict
//     rather than bursty: a request quota has no use for a burst (a bursty
//     rpm would let 2x the rate through after an idle second and the API
//     would have to tolerate it), and a strict permit expires, which
//     bounds how long after its grant's time a call may start: the API's
//     tolerance needs that bound (below).
//   - tpm, bursty, 15000 tokens/s (900k a minute), MaxBurstSeconds 1 (a
//     second of tokens; an LLM API's per-minute quota tolerates far
//     more): bursty because a reserve takes up to 3000 tokens at once,
//     which a strict limit cannot grant in a reserve of several limits,
//     and because a bursty limit takes unused tokens back after other
//     grants, up to its store's worth crossing each grant (fsm's late
//     refunds). At 15000/s tokens bind before requests: 10 calls/s of a
//     mean real cost of 1750 would be 17500/s.
//   - inflight, concurrency, at most 4 calls, hold TTL 10 s (far above a
//     call's length, so a hold never lapses under a running call).
//
// The API counts, over an exact sliding window of W = 1 s of call start
// times, requests and actual tokens, and the calls in flight at each
// start. A call starts at or after its grant's time a (the client waits
// until then) and no later than a + E (the client drops an expired
// grant), so the calls starting in any window of length W were served in
// a window of length W + E, and bucket/doc.go's bounds give the API's
// tolerance:
//
//	requests  floor((W + E)/I_rpm) + 1                 = 11
//	tokens    floor((W + E + MaxStored)/I_tpm) + n_max = 30750 + 3000 = 33750
//	in flight MaxInFlight                              = 4
//
// (a refund makes the history one in which the reserve had asked for
// what it used, and the actual tokens never exceed the estimate, so the
// bound holds over what the API charges). With those tolerances the fleet
// gets no 429 from the API by construction; the nominal 10/s and 15000/s
// are what the rates are measured against.

// scene3 is scene 3 as it runs: its tuning, its workers and the cluster.
type scene3 struct {
	Scene3Config
	workers int
	sceneEnv
}

// The defaults of scene 3's flags.
const (
	// Scene3DefaultDuration is how long scene 3 runs (--scene3-duration).
	Scene3DefaultDuration = 12 * time.Second
	// Scene3DefaultTokensPerSec is llm-tpm's default rate (--scene3-tpm):
	// with real costs of 1750 tokens on average it binds before llm-rpm
	// does.
	Scene3DefaultTokensPerSec = 15000
	// Scene3DefaultBurstSeconds is llm-tpm's default burst, in seconds
	// of its rate (--scene3-burst).
	Scene3DefaultBurstSeconds = 1.0
)

// Scene 3's limits and the fake API's calls.
const (
	s3RPMName, s3TPMName, s3InflightName = "llm-rpm", "llm-tpm", "llm-inflight"

	s3RequestsPerSec = 10
	s3MaxInFlight    = 4
	s3Expiry         = 50 * time.Millisecond
	s3HoldTTL        = 10 * time.Second
	s3Window         = time.Second
	// s3Estimate is what a worker reserves per call: the API's largest
	// cost, an upper bound.
	s3Estimate           = 3000
	s3MinTokens          = 500
	s3MinCall, s3MaxCall = 50 * time.Millisecond, 300 * time.Millisecond
	s3MaxWait            = 2 * time.Second
	s3RetryPoll          = 20 * time.Millisecond
	s3CleanupTimeout     = 3 * time.Second
	s3DefaultWorkers     = 8
)

// s3Stats are the fleet's register-side counts.
type s3Stats struct {
	grants, grantTokens            atomic.Int64 // reservations granted, estimates they took
	refunds, refundedTokens        atomic.Int64 // settlements that refunded tpm, tokens refunded
	settled, unusedTokens          atomic.Int64 // settlements, estimate tokens not used by them
	expired, api429, errs, settleE atomic.Int64
	mu                             sync.Mutex
	refusedBy                      map[string]int64 // register refusals by blocking limit
}

// s3Limits makes scene 3's three limits and returns their configs.
func s3Limits(ctx context.Context, l *node.Node, tokensPerSec int64, burstSeconds float64) (rpm, tpm, inflight bucket.Config, err error) {
	specs := []struct {
		name string
		spec bucket.Spec
		cfg  *bucket.Config
	}{
		{s3RPMName, bucket.Spec{Algorithm: bucket.Strict, Rate: s3RequestsPerSec, Per: time.Second,
			MaxReserved: int64(s3MaxWait / (time.Second / s3RequestsPerSec)), Expiry: s3Expiry}, &rpm},
		{s3TPMName, bucket.Spec{Algorithm: bucket.Bursty, Rate: float64(tokensPerSec), Per: time.Second, MaxBurstSeconds: burstSeconds}, &tpm},
		{s3InflightName, bucket.Spec{Algorithm: bucket.Concurrency, MaxInFlight: s3MaxInFlight, HoldTTL: s3HoldTTL}, &inflight},
	}
	for _, s := range specs {
		c, err := bucket.Compile(s.spec)
		if err != nil {
			return rpm, tpm, inflight, fmt.Errorf("scene 3: limit %q: %w", s.name, err)
		}
		if _, err := l.PutLimit(ctx, fsm.PutLimit{Name: s.name, Config: c}); err != nil {
			return rpm, tpm, inflight, fmt.Errorf("scene 3: create limit %q: %w", s.name, err)
		}
		*s.cfg = c
	}
	return rpm, tpm, inflight, nil
}

// runScene3 runs scene 3 and prints a line per second and a summary. It
// returns an error if the scene could not run or the API answered a 429.
func runScene3(ctx context.Context, out io.Writer, sc scene3) error {
	l := sc.leader()
	if l == nil {
		return fmt.Errorf("scene 3: no leader")
	}
	rpm, tpm, _, err := s3Limits(ctx, l, sc.TokensPerSec, sc.BurstSeconds)
	if err != nil {
		return err
	}
	expiry, w := rpm.ExpiryNanos, int64(s3Window)
	api := &fakeLLM{
		window:      s3Window,
		maxRequests: int((w+expiry)/rpm.IntervalNanos) + 1,
		maxTokens:   (w+expiry+tpm.MaxStoredNanos)/tpm.IntervalNanos + s3Estimate,
		maxInFlight: s3MaxInFlight,
		minTokens:   s3MinTokens, maxCallTokens: s3Estimate,
		minDur: s3MinCall, maxDur: s3MaxCall,
	}
	sc.printHeader(out, api, time.Duration(expiry))
	st := &s3Stats{refusedBy: map[string]int64{}}
	runCtx, cancel := context.WithTimeout(ctx, sc.Duration)
	defer cancel()
	done, clients, err := sc.startWorkers(runCtx, api, st)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	if err != nil {
		return err
	}
	began := time.Now()
	sc.printSeconds(out, api, st, began, done)
	return sc.summarize(out, api, st, time.Since(began))
}

// printHeader prints what scene 3 runs: the calls, the limits (rpm's
// expiry E), and the fake API's tolerances.
func (sc scene3) printHeader(out io.Writer, api *fakeLLM, expiry time.Duration) {
	fmt.Fprintf(out, "\nscene 3: %d workers call a fake LLM API through the register: ReserveMany{%s: 1, %s: %d (estimate), %s: 1}, wait, call (real cost %d..%d tokens, %v..%v), Settle{%s: actual}, Release\n",
		sc.workers, s3RPMName, s3TPMName, s3Estimate, s3InflightName, s3MinTokens, s3Estimate, s3MinCall, s3MaxCall, s3TPMName)
	fmt.Fprintf(out, "limits: %s strict %d/s (%d/min, expiry E=%v); %s bursty %d/s (%d/min, MaxBurstSeconds %g); %s concurrency %d (hold TTL %v)\n",
		s3RPMName, s3RequestsPerSec, 60*s3RequestsPerSec, expiry, s3TPMName, sc.TokensPerSec, 60*sc.TokensPerSec, sc.BurstSeconds,
		s3InflightName, s3MaxInFlight, s3HoldTTL)
	fmt.Fprintf(out, "fake API: exact sliding window W=%v of call starts, actual tokens counted at the call's start; 429 if a call would exceed, in W, %d requests = floor((W+E)/I)+1 (strict bound) or %d tokens = floor((W+E+MaxStored)/I)+%d (bursty bound, n_last <= the estimate), or %d in flight\n",
		s3Window, api.maxRequests, api.maxTokens, s3Estimate, api.maxInFlight)
	fmt.Fprintf(out, "  (a call starts between its grant's time and E after it, so W of starts is W+E of grants; nominal rates: %d req/s, %d tokens/s)\n",
		s3RequestsPerSec, sc.TokensPerSec)
}

// startWorkers starts the workers, each with a client of its own that
// starts at another node, calling the API until runCtx ends. done closes
// when they have all stopped; clients are the clients made, also with an
// error (the caller closes them).
func (sc scene3) startWorkers(runCtx context.Context, api *fakeLLM, st *s3Stats) (done <-chan struct{}, clients []*client.Client, err error) {
	var wg sync.WaitGroup
	for i := 0; i < sc.workers; i++ {
		var servers []string
		for k := range sc.servers {
			servers = append(servers, sc.servers[(i+k)%len(sc.servers)])
		}
		c, err := client.New(servers, append(sc.sec.clientOptions(), client.WithLogger(sc.logger.Named("client")))...)
		if err != nil {
			return nil, clients, err
		}
		clients = append(clients, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s3Worker(runCtx, c, api, st)
		}()
	}
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch, clients, nil
}

// printSeconds prints a line a second from began until done closes: the
// API's requests, tokens and calls in flight, the estimates the register
// granted (less refunds), and the API's 429s.
func (sc scene3) printSeconds(out io.Writer, api *fakeLLM, st *s3Stats, began time.Time, done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastGrantTok, lastRefundTok int64
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		s := api.sample()
		g, r := st.grantTokens.Load(), st.refundedTokens.Load()
		fmt.Fprintf(out, "t=%3.0fs  requests %3d/s of %d  tokens %6d/s of %d (estimates granted %6d)  in flight avg %.1f max %d of %d  API 429s %d\n",
			time.Since(began).Seconds(), s.calls, s3RequestsPerSec, s.tokens, sc.TokensPerSec, (g-lastGrantTok)-(r-lastRefundTok),
			s.inFlightNanos/float64(time.Second), s.maxInFlight, s3MaxInFlight, s.rejected)
		lastGrantTok, lastRefundTok = g, r
	}
}

// summarize prints the scene's totals over elapsed: what the API saw,
// what the register granted and refunded, and which limit bound; it
// returns an error if the API answered a 429.
func (sc scene3) summarize(out io.Writer, api *fakeLLM, st *s3Stats, elapsed time.Duration) error {
	t := api.totals()
	secs := elapsed.Seconds()
	reqFrac := float64(t.calls) / secs / s3RequestsPerSec
	tokFrac := float64(t.tokens) / secs / float64(sc.TokensPerSec)
	resTok := st.grantTokens.Load() - st.refundedTokens.Load()
	resReqFrac := float64(st.grants.Load()) / secs / s3RequestsPerSec
	resTokFrac := float64(resTok) / secs / float64(sc.TokensPerSec)
	inflFrac := t.inFlightNanos / float64(elapsed) / s3MaxInFlight
	fmt.Fprintf(out, "scene 3 done in %v: %d calls (%.1f/s, %.0f%% of %d/s), %d actual tokens (%.0f/s, %.0f%% of %d/s), in flight avg %.2f (%.0f%% of %d), max %d\n",
		elapsed.Round(10*time.Millisecond), t.calls, float64(t.calls)/secs, 100*reqFrac, s3RequestsPerSec,
		t.tokens, float64(t.tokens)/secs, 100*tokFrac, sc.TokensPerSec, t.inFlightNanos/float64(elapsed), 100*inflFrac, s3MaxInFlight, t.maxInFlight)
	fmt.Fprintf(out, "  register: %d reservations granted (%.0f%% of %s), %d tpm tokens kept after settlement (%.0f/s, %.0f%% of %s); refused (retried) by blocking limit: %s; expired before use: %d; errors: %d\n",
		st.grants.Load(), 100*resReqFrac, s3RPMName, resTok, float64(resTok)/secs, 100*resTokFrac, s3TPMName,
		st.refusals(), st.expired.Load(), st.errs.Load()+st.settleE.Load())
	unused := st.unusedTokens.Load()
	refundPct := 0.0
	if unused > 0 {
		refundPct = 100 * float64(st.refundedTokens.Load()) / float64(unused)
	}
	fmt.Fprintf(out, "  refunds: %d of %d settlements refunded tpm tokens; %d of %d unused estimate tokens went back (%.0f%%): after other grants, %s takes back at most its store (%gs of tokens) crossing each grant\n",
		st.refunds.Load(), st.settled.Load(), st.refundedTokens.Load(), unused, refundPct, s3TPMName, sc.BurstSeconds)
	fmt.Fprintf(out, "  API: most in any %v window: %d requests (tolerance %d), %d tokens (tolerance %d); most in flight %d (cap %d); 429s: %d (in flight %d, requests %d, tokens %d)\n",
		s3Window, t.maxWinRequests, api.maxRequests, t.maxWinTokens, api.maxTokens, t.maxInFlight, api.maxInFlight,
		t.rejected, t.rejInFlight, t.rejRequests, t.rejTokens)
	binding, bfrac, afrac := s3RPMName, resReqFrac, reqFrac
	if resTokFrac > bfrac {
		binding, bfrac, afrac = s3TPMName, resTokFrac, tokFrac
	}
	if inflFrac > bfrac {
		binding, bfrac, afrac = s3InflightName, inflFrac, inflFrac
	}
	fmt.Fprintf(out, "  binding limit: %s, reserved at %.0f%% of it; the API saw %.0f%% of it in actual use (estimates of %d against a mean real cost of ~%d: the unused part of an estimate is lost unless refunded)\n",
		binding, 100*bfrac, 100*afrac, s3Estimate, (s3MinTokens+s3Estimate)/2)
	if t.rejected > 0 {
		return fmt.Errorf("scene 3: the fake API answered %d calls 429", t.rejected)
	}
	return nil
}

// refusals lists the register's refusals by blocking limit ("none" if
// there were none), sorted.
func (st *s3Stats) refusals() string {
	st.mu.Lock()
	var refused []string
	for k, v := range st.refusedBy {
		refused = append(refused, fmt.Sprintf("%s %d", k, v))
	}
	st.mu.Unlock()
	sort.Strings(refused)
	if len(refused) == 0 {
		refused = []string{"none"}
	}
	return strings.Join(refused, ", ")
}

// s3Worker loops until ctx ends: reserve all three dimensions for a call
// at its estimate, wait for the grant's time, call the API, settle the
// actual tokens and release the in-flight permit.
func s3Worker(ctx context.Context, c *client.Client, api *fakeLLM, st *s3Stats) {
	wants := []client.Want{{Limit: s3RPMName, Permits: 1}, {Limit: s3TPMName, Permits: s3Estimate}, {Limit: s3InflightName, Permits: 1}}
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	for ctx.Err() == nil {
		r, err := c.ReserveMany(ctx, wants, client.ReserveOptions{MaxWait: s3MaxWait, SettleWithin: 10 * time.Second})
		if err != nil {
			if ctx.Err() == nil {
				st.errs.Add(1)
				pause(50 * time.Millisecond)
			}
			continue
		}
		if !r.Granted {
			st.mu.Lock()
			st.refusedBy[r.Blocking]++
			st.mu.Unlock()
			// An in-flight refusal names a hold's expiry, far ahead; the
			// permit usually comes back at a release much sooner: poll.
			pause(min(max(r.RetryAfter, time.Millisecond), s3RetryPoll))
			continue
		}
		st.grants.Add(1)
		st.grantTokens.Add(s3Estimate)
		var tokens int64
		if err := r.Wait(ctx); err != nil {
			// Expired (used too late for the strict rpm) or stopped: no
			// call; settle 0 tokens and release.
			if errors.Is(err, client.ErrExpired) {
				st.expired.Add(1)
			}
		} else {
			var ok bool
			if tokens, ok = api.Call(); !ok {
				st.api429.Add(1)
			}
		}
		cctx, cancel := context.WithTimeout(context.Background(), s3CleanupTimeout)
		res, err := c.Settle(cctx, r.ID, []client.Want{{Limit: s3TPMName, Permits: tokens}})
		if err != nil {
			st.settleE.Add(1)
		} else {
			st.settled.Add(1)
			st.unusedTokens.Add(s3Estimate - tokens)
			for _, p := range res.Limits {
				if p.Limit == s3TPMName && p.Refunded > 0 {
					st.refunds.Add(1)
					st.refundedTokens.Add(p.Refunded)
				}
			}
		}
		if _, err := c.Release(cctx, r.ID); err != nil {
			st.settleE.Add(1)
		}
		cancel()
	}
}
