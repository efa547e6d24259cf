package runner

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
	"github.com/permitd/permitd/transport/client"
)

// WorkloadMulti: three limits reserved together (strict requests, bursty
// tokens, concurrency), settled and released; judged by the fake API's
// three dimensions, no partial grant and settle/release once (see the
// README, "The multi workload").
const WorkloadMulti = workload.Multi

// MultiConfig configures the multi workload. Zero values select the
// defaults.
type MultiConfig struct {
	// TokensPerSecond is the bursty token limit's rate (default 400) and
	// TokenBurstSeconds its max_burst_seconds (default 1).
	TokensPerSecond   float64 `json:"tokens_per_second"`
	TokenBurstSeconds float64 `json:"token_burst_seconds"`
	// MaxTokens is the largest token estimate (default 40).
	MaxTokens int64 `json:"max_tokens"`
	// MaxInFlight (default 3) and HoldTTL (default 3s) configure the
	// concurrency limit.
	MaxInFlight int64         `json:"max_in_flight"`
	HoldTTL     time.Duration `json:"hold_ttl_ns"`
}

// Defaults of the multi workload.
const (
	multiDefaultInterval    = 50 * time.Millisecond // rpm: 20/s
	multiDefaultExpiry      = 25 * time.Millisecond
	multiDefaultMaxReserved = 2
	multiDefaultMaxWait     = time.Second
	multiMinCall            = 20 * time.Millisecond
	multiMaxCall            = 200 * time.Millisecond
	// multiLiveTolerance is the live judge's allowance for delivery
	// jitter (the checkers use the measured one).
	multiLiveTolerance = 5 * time.Millisecond
	// multiCallMargin is how long before its hold lapses (as the grant
	// says) a call must end: the call's way to the fake API, which counts
	// it in flight from its receipt, and the stamping of its end.
	multiCallMargin = 100 * time.Millisecond
)

// multiDefaults validates the multi workload's settings and fills in its
// defaults; it runs before the generic defaults.
func (c Config) multiDefaults() (Config, error) {
	if c.Interval == 0 {
		c.Interval = multiDefaultInterval
	}
	if c.Expiry == 0 {
		c.Expiry = min(multiDefaultExpiry, c.Interval/2)
	}
	if c.MaxReserved == 0 {
		c.MaxReserved = multiDefaultMaxReserved
	}
	if c.MaxWait == 0 {
		c.MaxWait = multiDefaultMaxWait
	}
	if c.MaxPermits > 1 {
		return c, fmt.Errorf("%w: max permits %d; allowed for %s: 1 (a multi-limit reserve takes 1 permit of its strict limit)", ErrInvalid, c.MaxPermits, WorkloadMulti)
	}
	m := &c.Multi
	if m.TokensPerSecond == 0 {
		m.TokensPerSecond = 400
	}
	if m.TokenBurstSeconds == 0 {
		m.TokenBurstSeconds = 1
	}
	if m.MaxTokens == 0 {
		m.MaxTokens = 40
	}
	if m.MaxInFlight == 0 {
		m.MaxInFlight = 3
	}
	if m.HoldTTL == 0 {
		m.HoldTTL = 3 * time.Second
	}
	switch {
	case !(m.TokensPerSecond >= 1 && m.TokensPerSecond <= 1e6):
		return c, fmt.Errorf("%w: tokens per second %v; allowed: 1 to 1e6", ErrInvalid, m.TokensPerSecond)
	case !(m.TokenBurstSeconds > 0 && m.TokenBurstSeconds <= 60):
		return c, fmt.Errorf("%w: token burst seconds %v; allowed: (0, 60]", ErrInvalid, m.TokenBurstSeconds)
	case m.MaxTokens < 1 || float64(m.MaxTokens) > m.TokensPerSecond*m.TokenBurstSeconds:
		return c, fmt.Errorf("%w: max tokens %d; allowed: 1 to one burst (%v)", ErrInvalid, m.MaxTokens, m.TokensPerSecond*m.TokenBurstSeconds)
	case m.MaxInFlight < 1 || m.MaxInFlight > 1000:
		return c, fmt.Errorf("%w: max in flight %d; allowed: 1 to 1000", ErrInvalid, m.MaxInFlight)
	case m.HoldTTL < 4*multiMaxCall || m.HoldTTL > time.Minute:
		return c, fmt.Errorf("%w: hold ttl %v; allowed: %v to 1m (a call lasts up to %v)", ErrInvalid, m.HoldTTL, 4*multiMaxCall, multiMaxCall)
	}
	if c.hasFault(FaultReconfig) {
		return c, fmt.Errorf("%w: nemesis %s does not apply to the %s workload", ErrInvalid, FaultReconfig, WorkloadMulti)
	}
	return c, nil
}

// multiNames are the multi workload's limits.
func multiNames() (rpm, tpm, inflight string) {
	return "jl-multi-rpm", "jl-multi-tpm", "jl-multi-inflight"
}

// multiWorkload is what the workers need of the multi configuration.
func (c Config) multiWorkload() workload.MultiConfig {
	rpm, tpm, inf := multiNames()
	return workload.MultiConfig{RPM: rpm, TPM: tpm, InFlight: inf, MaxTokens: c.Multi.MaxTokens,
		MinCall: multiMinCall, MaxCall: multiMaxCall, HoldTTL: c.Multi.HoldTTL, HoldMargin: multiCallMargin, ProbeOneIn: 4}
}

// multiLimits is the multi workload's part of limitInfo.
type multiLimits struct {
	RPM, TPM, InFlight string
	// TokenIntervalNanos and TokenMaxStoredNanos: the token limit as the
	// server compiled it; MaxTokens the largest grant (n_last).
	TokenIntervalNanos  int64 `json:"token_interval_ns"`
	TokenMaxStoredNanos int64 `json:"token_max_stored_ns"`
	MaxTokens           int64 `json:"max_tokens"`
	MaxInFlight         int64 `json:"max_in_flight"`
	HoldTTLNanos        int64 `json:"hold_ttl_ns"`
	TokenFormula        string
}

// tokenBound is the bursty token limit's window bound (README, bursty):
// floor((W + maxStored)/I) + n_last.
func tokenBound(i, stored, nLast int64) bound.Bound {
	return bound.Bound{
		Formula: fmt.Sprintf("floor((W + maxStored)/I) + n_last with I=%dns maxStored=%dns n_last=%d (bucket/README.md, Bursty; n_last: the largest estimate)", i, stored, nLast),
		Max:     func(w int64) int64 { return (max(w, 0)+stored)/i + nLast },
	}
}

// multiSpec is the judge's specification for the run's configuration
// (tolerances added by the caller).
func multiSpec(cfg Config) fakeapi.MultiSpec {
	ti := int64(math.Ceil(float64(time.Second) / cfg.Multi.TokensPerSecond))
	stored := int64(cfg.Multi.TokenBurstSeconds * 1e9)
	i := int64(cfg.Interval)
	return fakeapi.MultiSpec{
		SpacingNanos:      i - int64(cfg.Expiry),
		TokenBound:        tokenBound(ti, stored, cfg.Multi.MaxTokens),
		TokenWindowsNanos: []int64{i, 5 * i, 25 * i, int64(5 * time.Second)},
		MaxInFlight:       cfg.Multi.MaxInFlight,
	}
}

// multiAPIConfig is the fake API of the multi workload.
func multiAPIConfig(cfg Config, start time.Time) fakeapi.Config {
	spec := multiSpec(cfg)
	spec.SpacingToleranceNanos = int64(multiLiveTolerance)
	spec.TokenToleranceNanos = int64(cfg.Expiry + multiLiveTolerance)
	return fakeapi.Config{Start: start, Mode: fakeapi.Multi, Multi: spec}
}

// putMultiLimits creates the three limits, recording each put.
func (r *run) putMultiLimits(ctx context.Context, hw *history.Writer, servers []string) (limitInfo, error) {
	cfg := r.cfg
	rpm, tpm, inf := multiNames()
	m, e := cfg.MaxReserved, cfg.Expiry
	b := cfg.Multi.TokenBurstSeconds
	n, ttl := cfg.Multi.MaxInFlight, cfg.Multi.HoldTTL
	puts := []struct {
		name string
		spec client.LimitSpec
	}{
		{rpm, client.LimitSpec{Algorithm: "strict", Rate: 1, Per: cfg.Interval, MaxReserved: &m, Expiry: &e}},
		{tpm, client.LimitSpec{Algorithm: "bursty", Rate: cfg.Multi.TokensPerSecond, Per: time.Second, MaxBurstSeconds: &b}},
		{inf, client.LimitSpec{Algorithm: "concurrency", MaxInFlight: &n, TTL: &ttl}},
	}
	li := limitInfo{Name: rpm, MaxPermits: 1, Config: map[string]any{}}
	c, err := r.client(servers)
	if err != nil {
		return li, err
	}
	proc := cfg.Workers
	got := map[string]client.Limit{}
	for _, p := range puts {
		put := history.PutRequest(p.name, p.spec)
		li.Config[p.name] = put.Config
		var lastErr error
		for attempt := 0; attempt < 20; attempt++ {
			inv, err := hw.Invoke(proc, "", history.FPut, "", put)
			if err != nil {
				return li, err
			}
			l, err := c.PutLimit(ctx, p.name, p.spec)
			if err == nil {
				if _, err := hw.Complete(inv, history.OK, "", "", nil); err != nil {
					return li, err
				}
				got[p.name], lastErr = l, nil
				break
			}
			lastErr = err
			if _, err := hw.Complete(inv, history.Info, "", "", map[string]string{"error": err.Error()}); err != nil {
				return li, err
			}
			if wait.Sleep(ctx, 500*time.Millisecond) != nil {
				break
			}
		}
		if lastErr != nil {
			return li, fmt.Errorf("runner: put limit %s: %w", p.name, lastErr)
		}
	}
	l := got[rpm]
	li.IntervalNanos = l.IntervalNanos
	if l.MaxReserved != nil {
		li.MaxReserved = *l.MaxReserved
	}
	if l.Expiry != nil {
		li.ExpiryNanos = int64(*l.Expiry)
	}
	// Recovery asks for half the strict rate: a call also waits for
	// tokens and an in-flight slot, and lasts up to 200 ms.
	li.RatePerSecond = 1e9 / float64(l.IntervalNanos) / 2
	li.SpacingFormula = fmt.Sprintf("t[i+1] - t[i] >= I - expiry - jitter with I=%v expiry=%v", time.Duration(li.IntervalNanos), time.Duration(li.ExpiryNanos))
	t := got[tpm]
	ml := &multiLimits{RPM: rpm, TPM: tpm, InFlight: inf, TokenIntervalNanos: t.IntervalNanos, MaxTokens: cfg.Multi.MaxTokens,
		MaxInFlight: n, HoldTTLNanos: int64(ttl)}
	if t.MaxBurstSeconds != nil {
		ml.TokenMaxStoredNanos = int64(*t.MaxBurstSeconds * 1e9)
	}
	ml.TokenFormula = tokenBound(ml.TokenIntervalNanos, ml.TokenMaxStoredNanos, ml.MaxTokens).Formula
	li.WindowFormula = ml.TokenFormula
	li.Multi = ml
	r.logf("limits %s (strict %v), %s (bursty, interval %v), %s (concurrency %d, ttl %v)", rpm, time.Duration(li.IntervalNanos), tpm, time.Duration(t.IntervalNanos), inf, n, ttl)
	return li, nil
}

// collectMulti reads GET /v1/limits/{name} of the three limits on every
// node.
func (r *run) collectMulti(ctx context.Context, ct *cluster.Control, cl *cluster.Cluster, ml *multiLimits) []checker.MultiNodeCounts {
	var out []checker.MultiNodeCounts
	for _, n := range cl.Nodes {
		nc := checker.MultiNodeCounts{Node: n.ID, GrantedRequests: map[string]uint64{}}
		for _, name := range []string{ml.RPM, ml.TPM, ml.InFlight} {
			var l struct {
				GrantedRequests *uint64 `json:"granted_requests"`
			}
			if err := ct.Do(ctx, n, "GET", "/v1/limits/"+name, nil, &l, 5*time.Second); err != nil {
				nc.Errors = append(nc.Errors, err.Error())
				continue
			}
			if l.GrantedRequests == nil {
				nc.Errors = append(nc.Errors, name+": no granted_requests")
				continue
			}
			nc.GrantedRequests[name] = *l.GrantedRequests
		}
		out = append(out, nc)
	}
	return out
}

// multiChecks runs the multi workload's own checkers.
func multiChecks(in checkInput, tol int64, add func(checker.Result, error)) {
	ml := in.limit.Multi
	if ml == nil {
		add(checker.Result{Name: "multi-dimensions"}, fmt.Errorf("multi: the limits were not created"))
		return
	}
	spec := multiSpec(in.cfg)
	spec.SpacingNanos = in.limit.IntervalNanos - in.limit.ExpiryNanos
	spec.TokenBound = tokenBound(ml.TokenIntervalNanos, ml.TokenMaxStoredNanos, ml.MaxTokens)
	spec.MaxInFlight = ml.MaxInFlight
	recv := spec
	recv.SpacingToleranceNanos, recv.TokenToleranceNanos = tol, tol+in.limit.ExpiryNanos
	r, err := checker.MultiDimensions(in.calls, recv, false)
	add(withName(r, "multi-dimensions"), err)
	use := spec
	use.TokenToleranceNanos = in.limit.ExpiryNanos
	r, err = checker.MultiDimensions(in.calls, use, true)
	add(withName(r, "multi-dimensions-at-use"), err)
	r, err = checker.MultiGrants(checker.MultiGrantsInput{Ops: in.ops, Limits: []string{ml.RPM, ml.TPM, ml.InFlight}, Nodes: in.multiNodes})
	add(withName(r, "multi-no-partial-grant"), err)
	r, err = checker.MultiSettlements(in.ops)
	add(withName(r, "multi-settle-once"), err)
}

// MultiSummary is the multi workload's part of the summary.
type MultiSummary struct {
	Workers workload.MultiStats `json:"workers"`
	// Live is the fake API's live judge.
	Live *fakeapi.MultiStats `json:"live,omitempty"`
	// Nodes are the final granted_requests per node and limit.
	Nodes []checker.MultiNodeCounts `json:"nodes"`
}
