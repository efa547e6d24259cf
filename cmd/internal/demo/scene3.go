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
//	tokens    floor((W + E + MaxStored)/I_tpm) + n_max = 30749 + 3000 = 33749
//	in flight MaxInFlight                              = 4
//
// at the default 15000 tokens/s (I_tpm = 66 667 ns: 1/15000 s rounded up)
//
// (a refund makes the history one in which the reserve had asked for
// what it used, and the actual tokens never exceed the estimate, so the
// bound holds over what the API charges). With those tolerances the fleet
// gets no 429 from the API by construction; the nominal 10/s and 15000/s
// are what the rates are measured against.

const scene3Title = "one reserve for three limits of a fake LLM API"

// scene3 is scene 3 as it runs: its tuning, its workers and the cluster.
type scene3 struct {
	Scene3Config
	workers int
	sceneEnv
}

// The defaults of scene 3's flags.
const (
	// Scene3DefaultDuration is how long scene 3 runs (--scene3-duration).
	Scene3DefaultDuration = 10 * time.Second
	// Scene3DefaultTokensPerSec is llm-tpm's default rate
	// (--scene3-tokens-per-sec):
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

// s3Configs compiles scene 3's three limits.
func s3Configs(tokensPerSec int64, burstSeconds float64) (rpm, tpm, inflight bucket.Config, err error) {
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
		if *s.cfg, err = bucket.Compile(s.spec); err != nil {
			return rpm, tpm, inflight, fmt.Errorf("scene 3: limit %q: %w", s.name, err)
		}
	}
	return rpm, tpm, inflight, nil
}

// s3Limits makes scene 3's three limits and returns their configs.
func s3Limits(ctx context.Context, l *node.Node, tokensPerSec int64, burstSeconds float64) (rpm, tpm, inflight bucket.Config, err error) {
	if rpm, tpm, inflight, err = s3Configs(tokensPerSec, burstSeconds); err != nil {
		return rpm, tpm, inflight, err
	}
	for name, c := range map[string]bucket.Config{s3RPMName: rpm, s3TPMName: tpm, s3InflightName: inflight} {
		if _, err := l.PutLimit(ctx, fsm.PutLimit{Name: name, Config: c}); err != nil {
			return rpm, tpm, inflight, fmt.Errorf("scene 3: create limit %q: %w", name, err)
		}
	}
	return rpm, tpm, inflight, nil
}

// scene3Bounds are the fake API's tolerances, from the limits' configs:
// over any window W of call starts, requests at most floor((W + E)/I_rpm)
// + 1 and actual tokens at most floor((W + E + B)/I_tpm) + the estimate
// (B: llm-tpm's store, MaxStoredNanos), and at most the in-flight cap at
// once (see the file's comment).
type scene3Bounds struct {
	window, expiry, rpmInterval, tpmInterval, stored time.Duration
	estimate                                         int64
	maxRequests                                      int
	maxTokens                                        int64
	maxInFlight                                      int
}

// newScene3Bounds computes the API's tolerances from the limits.
func newScene3Bounds(rpm, tpm bucket.Config) scene3Bounds {
	w, e := s3Window, time.Duration(rpm.ExpiryNanos)
	return scene3Bounds{window: w, expiry: e, rpmInterval: time.Duration(rpm.IntervalNanos), tpmInterval: time.Duration(tpm.IntervalNanos),
		stored: time.Duration(tpm.MaxStoredNanos), estimate: s3Estimate,
		maxRequests: int((int64(w)+rpm.ExpiryNanos)/rpm.IntervalNanos) + 1,
		maxTokens:   (int64(w)+rpm.ExpiryNanos+tpm.MaxStoredNanos)/tpm.IntervalNanos + s3Estimate,
		maxInFlight: s3MaxInFlight}
}

// checks are scene 3's checks of what the API saw (t) against b.
func (b scene3Bounds) checks(t llmTotals) []check {
	rejected := fmt.Sprint(t.rejected)
	if t.rejected > 0 {
		rejected += fmt.Sprintf(" (for calls at once %d, requests %d, tokens %d)", t.rejInFlight, t.rejRequests, t.rejTokens)
	}
	return []check{
		{what: "calls the API answered 429 (too many requests)", got: rejected, want: "allowed: 0", ok: t.rejected == 0},
		{what: fmt.Sprintf("most calls started in any sliding %s window", sec(b.window)), got: fmt.Sprint(t.maxWinRequests),
			want: fmt.Sprintf("allowed: ≤ floor((W + E) / I) + 1 = floor((%s + %s) / %s) + 1 = %d + 1 = %d",
				ms(b.window), ms(b.expiry), ms(b.rpmInterval), b.maxRequests-1, b.maxRequests),
			ok: t.maxWinRequests <= b.maxRequests},
		{what: fmt.Sprintf("most tokens used by calls started in any sliding %s window", sec(b.window)), got: fmt.Sprint(t.maxWinTokens),
			want: fmt.Sprintf("allowed: ≤ floor((W + E + B) / I) + estimate = floor((%s + %s + %s) / %s) + %d = %d + %d = %d",
				ms(b.window), ms(b.expiry), ms(b.stored), ms(b.tpmInterval), b.estimate, b.maxTokens-b.estimate, b.estimate, b.maxTokens),
			ok: t.maxWinTokens <= b.maxTokens},
		{what: "most calls at once", got: fmt.Sprint(t.maxInFlight), want: fmt.Sprintf("allowed: ≤ %d", b.maxInFlight), ok: t.maxInFlight <= b.maxInFlight},
	}
}

// runScene3 runs scene 3, prints a line per second and its checks.
func runScene3(ctx context.Context, out io.Writer, sc scene3) sceneResult {
	res := sceneResult{n: 3, title: scene3Title}
	l := sc.leader()
	if l == nil {
		res.err = fmt.Errorf("scene 3: no leader")
		return res
	}
	rpm, tpm, _, err := s3Limits(ctx, l, sc.TokensPerSec, sc.BurstSeconds)
	if err != nil {
		res.err = err
		return res
	}
	b := newScene3Bounds(rpm, tpm)
	api := &fakeLLM{
		window:      b.window,
		maxRequests: b.maxRequests,
		maxTokens:   b.maxTokens,
		maxInFlight: b.maxInFlight,
		minTokens:   s3MinTokens, maxCallTokens: s3Estimate,
		minDur: s3MinCall, maxDur: s3MaxCall,
	}
	sc.printHeader(out, b)
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
		res.err = err
		return res
	}
	began := time.Now()
	sc.printSeconds(out, api, began, done, b)
	t := sc.summarize(out, api, st, time.Since(began))
	res.checks = b.checks(t)
	return res
}

// printHeader says what scene 3 does and proves, and the per-second
// columns with their bounds.
func (sc scene3) printHeader(out io.Writer, b scene3Bounds) {
	sceneHeader(out, 3, scene3Title, sc.Duration, fmt.Sprintf(
		"A fake LLM API allows %d requests a second, %d tokens a second and %d calls at once, and answers 429 (too many requests) to any call beyond. "+
			"%d workers call it. Before each call a worker reserves, in one request to the cluster, 1 permit of %s (requests), %d of %s (tokens: an estimate, since "+
			"a call's real cost, %d to %d tokens, is known only at its end) and 1 of %s (calls at once); the cluster grants all three or none. "+
			"After the call the worker reports its real cost, and the cluster takes back the unused part of the estimate. "+
			"What it proves: the API never answers 429. It counts, in any sliding window W of %s, the calls started and the tokens they used, and allows what the limits' bounds allow: "+
			"a call may start up to E = %s (%s's expiry) after its permit's time, and %s (bursty) may save up to B = %s of tokens while calls are few and spend them at once. "+
			"So one second may see more than %d tokens; their average stays below it.",
		s3RequestsPerSec, sc.TokensPerSec, s3MaxInFlight, sc.workers, s3RPMName, s3Estimate, s3TPMName, s3MinTokens, s3Estimate, s3InflightName,
		sec(b.window), ms(b.expiry), s3RPMName, s3TPMName, sec(b.stored), sc.TokensPerSec))
	fmt.Fprintf(out, "%-6s %-10s %-12s %-14s %s\n", "time", "calls", "tokens used", "calls at once", "API 429s")
	fmt.Fprintf(out, "%-6s %-10s %-12s %-14s %s\n", "", fmt.Sprintf("(≤ %d)", b.maxRequests), fmt.Sprintf("(≤ %d)", b.maxTokens), fmt.Sprintf("(≤ %d)", b.maxInFlight), "(must be 0)")
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
// calls the API saw start, the tokens they used, the most calls at once
// and the API's 429s.
func (sc scene3) printSeconds(out io.Writer, api *fakeLLM, began time.Time, done <-chan struct{}, b scene3Bounds) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		s := api.sample()
		fmt.Fprintf(out, "%-6s %-10d %-12d %-14d %d\n", sec(time.Since(began).Round(time.Second)), s.calls, s.tokens, s.maxInFlight, s.rejected)
	}
}

// summarize prints the scene's totals over elapsed: what the API saw,
// what the register granted and refunded, and which limit bound; it
// returns the API's totals.
func (sc scene3) summarize(out io.Writer, api *fakeLLM, st *s3Stats, elapsed time.Duration) llmTotals {
	t := api.totals()
	el := elapsed.Seconds()
	reqFrac := float64(t.calls) / el / s3RequestsPerSec
	tokFrac := float64(t.tokens) / el / float64(sc.TokensPerSec)
	resTok := st.grantTokens.Load() - st.refundedTokens.Load()
	resReqFrac := float64(st.grants.Load()) / el / s3RequestsPerSec
	resTokFrac := float64(resTok) / el / float64(sc.TokensPerSec)
	inflFrac := t.inFlightNanos / float64(elapsed) / s3MaxInFlight
	note(out, "%d calls in %s: %.1f/s (%.0f%% of %d/s), %d tokens used: %.0f/s (%.0f%% of %d/s), %.1f calls at once on average (%.0f%% of %d).",
		t.calls, secs(elapsed), float64(t.calls)/el, 100*reqFrac, s3RequestsPerSec,
		t.tokens, float64(t.tokens)/el, 100*tokFrac, sc.TokensPerSec, t.inFlightNanos/float64(elapsed), 100*inflFrac, s3MaxInFlight)
	binding, bfrac := s3RPMName, resReqFrac
	if resTokFrac > bfrac {
		binding, bfrac = s3TPMName, resTokFrac
	}
	if inflFrac > bfrac {
		binding, bfrac = s3InflightName, inflFrac
	}
	note(out, "binding limit: %s (the one the workers reserved closest to its rate: %.0f%%).", binding, 100*bfrac)
	unused := st.unusedTokens.Load()
	refundPct := 0.0
	if unused > 0 {
		refundPct = 100 * float64(st.refundedTokens.Load()) / float64(unused)
	}
	note(out, "Each call reserved %d tokens and used %d on average; %d of the %d tokens reserved and not used went back to %s (%.0f%%).",
		s3Estimate, t.tokens/max(t.calls, 1), st.refundedTokens.Load(), unused, s3TPMName, refundPct)
	note(out, "The cluster granted %d reserves; refused (the worker retried), by the limit that refused: %s; expired before use: %d; errors: %d.",
		st.grants.Load(), st.refusals(), st.expired.Load(), st.errs.Load()+st.settleE.Load())
	return t
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
