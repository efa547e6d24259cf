package runner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
	"github.com/permitd/permitd/transport/client"
)

// WorkloadTemplated: one template, many keys created on first use and
// dropped when idle, judged key by key (see the README, "The templated
// workload").
const WorkloadTemplated = workload.Templated

// TemplatedConfig configures the templated workload. Zero values select
// the defaults; the seed draws what is left to it.
type TemplatedConfig struct {
	// Keys (default 200, 10 to 4096) is the number of keys, HotKeys
	// (default 5) how many of them are hot.
	Keys    int `json:"keys"`
	HotKeys int `json:"hot_keys"`
	// Algorithm is the template's: strict, bursty or hybrid (without a
	// burst pool: strictness 1); "" lets the seed choose (seed mod 3).
	Algorithm string `json:"algorithm"`
	// Idle is the template's idle time (default and least 1s).
	Idle time.Duration `json:"idle_ns"`
	// MaxKeys is the template's cap on live keys; 0 lets the seed choose
	// between Keys (never full; seed/3 even) and a cap it hits
	// (max(HotKeys+3, Keys/25); seed/3 odd), so that six consecutive
	// seeds run every algorithm with and without a full cap.
	MaxKeys int64 `json:"max_keys"`
	// Override (an explicit put of a hot key with twice the rate) and
	// Churn (the template deleted and put again mid-run): 1 on, -1 off,
	// 0 drawn by the seed (two times in three).
	Override int `json:"override"`
	Churn    int `json:"churn"`
}

const (
	templatedPrefix          = "jlt"
	templatedDefaultInterval = 200 * time.Millisecond
	// templatedDefaultMaxReserved (strict keys): 7 slots of 200 ms queue
	// 1.4 s ahead, longer than the idle time, so that a key may be idle
	// long enough yet not at rest (the register must keep it).
	templatedDefaultMaxReserved = 6
	templatedBurstSeconds       = 2.0
	// templatedLiveTolerance is the live judge's allowance for delivery
	// jitter and the window discipline (the checkers use the measured
	// jitter).
	templatedLiveTolerance = 5*time.Millisecond + workload.MaxAnswerRTT + workload.MaxLateUse
)

// templatedAlgorithms are the templates a run may put.
var templatedAlgorithms = []string{"strict", "bursty", "hybrid"}

// templatedDefaults validates the templated workload's settings and
// fills in its defaults and the seed's draws; it runs before the generic
// defaults.
func (c Config) templatedDefaults() (Config, error) {
	t := &c.Templated
	rng := rand.New(rand.NewPCG(c.Seed, 0x746d706c))
	if t.Keys == 0 {
		t.Keys = 200
	}
	if t.HotKeys == 0 {
		t.HotKeys = 5
	}
	if t.Idle == 0 {
		t.Idle = time.Second
	}
	if t.Algorithm == "" {
		t.Algorithm = templatedAlgorithms[c.Seed%3]
	}
	if t.MaxKeys == 0 {
		t.MaxKeys = int64(t.Keys)
		if c.Seed/3%2 == 1 {
			t.MaxKeys = int64(max(t.HotKeys+3, t.Keys/25))
		}
	}
	for _, p := range []*int{&t.Override, &t.Churn} {
		if *p == 0 {
			*p = 1
			if rng.IntN(3) == 0 {
				*p = -1
			}
		}
	}
	if c.Interval == 0 {
		c.Interval = templatedDefaultInterval
	}
	switch {
	case t.Keys < 10 || t.Keys > 4096:
		return c, fmt.Errorf("%w: %d keys; allowed: 10 to 4096", ErrInvalid, t.Keys)
	case t.HotKeys < 0 || t.HotKeys >= t.Keys:
		return c, fmt.Errorf("%w: %d hot keys; allowed: 0 to keys - 1 = %d", ErrInvalid, t.HotKeys, t.Keys-1)
	case t.Idle < time.Second || t.Idle > time.Minute:
		return c, fmt.Errorf("%w: idle %v; allowed: 1s (the register's least) to 1m", ErrInvalid, t.Idle)
	case t.MaxKeys < 1 || t.MaxKeys > 1<<21:
		return c, fmt.Errorf("%w: max keys %d; allowed: 1 to 2097152", ErrInvalid, t.MaxKeys)
	case t.Override != 1 && t.Override != -1, t.Churn != 1 && t.Churn != -1:
		return c, fmt.Errorf("%w: override %d, churn %d; allowed: 1 (on), -1 (off), 0 (the seed draws)", ErrInvalid, t.Override, t.Churn)
	}
	switch t.Algorithm {
	case "strict":
		if c.MaxReserved == 0 {
			c.MaxReserved = templatedDefaultMaxReserved
		}
		m := c.MaxReserved
		if c.MaxPermits == 0 {
			c.MaxPermits = m + 1
		}
		if c.MaxWait == 0 {
			c.MaxWait = time.Duration(m+1) * c.Interval
		}
	case "bursty":
		if c.MaxPermits == 0 {
			c.MaxPermits = 3
		}
	case "hybrid":
		if c.MaxPermits > 1 {
			return c, fmt.Errorf("%w: max permits %d; allowed for a hybrid template: 1 (its pools hold one permit)", ErrInvalid, c.MaxPermits)
		}
	default:
		return c, fmt.Errorf("%w: template algorithm %q; allowed: %s", ErrInvalid, t.Algorithm, strings.Join(templatedAlgorithms, ", "))
	}
	if c.hasFault(FaultReconfig) {
		return c, fmt.Errorf("%w: nemesis %s does not apply to the %s workload (it changes its own template and an override)", ErrInvalid, FaultReconfig, WorkloadTemplated)
	}
	return c, nil
}

// templatedWorkload is what the workers need of the configuration.
func (c Config) templatedWorkload() workload.TemplatedConfig {
	t := c.Templated
	return workload.TemplatedConfig{Prefix: templatedPrefix, Keys: t.Keys, HotKeys: t.HotKeys, Algorithm: t.Algorithm, Idle: t.Idle}
}

// keyConf is one configuration of a key, as the server compiled it.
type keyConf struct {
	Algorithm      string `json:"algorithm"`
	IntervalNanos  int64  `json:"interval_ns"`
	ExpiryNanos    int64  `json:"expiry_ns,omitempty"`
	MaxReserved    int64  `json:"max_reserved,omitempty"`
	MaxStoredNanos int64  `json:"max_stored_ns,omitempty"`
	// MaxPermits is the largest grant (the bursty bound's n_last).
	MaxPermits int64 `json:"max_permits"`
}

// faster returns the fastest of k and o (fsm/README.md: across a change
// the smaller interval, the larger expiry and stored time).
func (k keyConf) faster(o keyConf) keyConf {
	k.IntervalNanos = min(k.IntervalNanos, o.IntervalNanos)
	k.ExpiryNanos = max(k.ExpiryNanos, o.ExpiryNanos)
	k.MaxStoredNanos = max(k.MaxStoredNanos, o.MaxStoredNanos)
	k.MaxPermits = max(k.MaxPermits, o.MaxPermits)
	return k
}

// bound is the algorithm's window bound (bucket/README.md).
func (k keyConf) bound() bound.Bound {
	i := k.IntervalNanos
	switch k.Algorithm {
	case "strict":
		b, _ := bound.StrictWithExpiry(i, k.ExpiryNanos)
		return b
	case "hybrid":
		a := max(i, int64(time.Millisecond))
		return bound.Bound{
			Formula: fmt.Sprintf("floor((A + W)/I) with A=%dns I=%dns (bucket/README.md, Hybrid, no burst pool: B = 0)", a, i),
			Max:     func(w int64) int64 { return (a + max(w, 0)) / i },
		}
	}
	return limitInfo{IntervalNanos: i, MaxStoredNanos: k.MaxStoredNanos, MaxPermits: k.MaxPermits}.mustBound(WorkloadWindow)
}

// spacing is the least gap between two uses (strict: I − expiry; 0 none).
func (k keyConf) spacing() int64 {
	if k.Algorithm != "strict" {
		return 0
	}
	return max(k.IntervalNanos-k.ExpiryNanos, 0)
}

// epoch is the key epoch from fromNanos with k.
func (k keyConf) epoch(fromNanos int64) checker.KeyEpoch {
	return checker.KeyEpoch{FromNanos: fromNanos, Bound: k.bound(), SpacingNanos: k.spacing()}
}

// templatedLimits is the templated workload's part of limitInfo.
type templatedLimits struct {
	Prefix    string  `json:"prefix"`
	Template  keyConf `json:"template"`
	IdleNanos int64   `json:"idle_ns"`
	MaxKeys   int64   `json:"max_keys"`
	Keys      int     `json:"keys"`
	HotKeys   int     `json:"hot_keys"`
	// Override is the explicit key's configuration (twice the rate).
	OverrideKey string  `json:"override_key,omitempty"`
	Override    keyConf `json:"override"`
}

// templateSpec is the template's limit spec for c (rate ×mult).
func templateSpec(cfg Config, mult int) client.LimitSpec {
	per := cfg.Interval / time.Duration(mult)
	spec := client.LimitSpec{Algorithm: cfg.Templated.Algorithm, Rate: 1, Per: per}
	switch spec.Algorithm {
	case "strict":
		m, e := cfg.MaxReserved, cfg.Expiry/time.Duration(mult)
		spec.MaxReserved, spec.Expiry = &m, &e
	case "bursty":
		b := templatedBurstSeconds
		spec.MaxBurstSeconds = &b
	case "hybrid":
		s := 1.0
		spec.Strictness = &s
	}
	return spec
}

// keyConfOf is spec compiled by the server (interval) with the run's
// largest grant.
func keyConfOf(spec client.LimitSpec, intervalNanos, maxPermits int64) keyConf {
	k := keyConf{Algorithm: spec.Algorithm, IntervalNanos: intervalNanos, MaxPermits: maxPermits}
	if spec.Expiry != nil {
		k.ExpiryNanos = int64(*spec.Expiry)
	}
	if spec.MaxReserved != nil {
		k.MaxReserved = *spec.MaxReserved
	}
	if spec.MaxBurstSeconds != nil {
		k.MaxStoredNanos = int64(*spec.MaxBurstSeconds * 1e9)
	}
	return k
}

// templatePut is a template put as the history records it.
func templatePut(cfg Config) (client.TemplateSpec, history.LimitRequest) {
	ts := client.TemplateSpec{LimitSpec: templateSpec(cfg, 1), Idle: cfg.Templated.Idle, MaxKeys: cfg.Templated.MaxKeys}
	return ts, history.PutRequest(templatedPrefix, ts)
}

// retry runs op until it succeeds (at most 20 attempts, 500 ms apart),
// recording each attempt as f with value v by process proc.
func retry(ctx context.Context, hw *history.Writer, proc int, f string, v any, op func() error) error {
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		inv, err := hw.Invoke(proc, "", f, "", v)
		if err != nil {
			return err
		}
		if lastErr = op(); lastErr == nil {
			_, err := hw.Complete(inv, history.OK, "", "", nil)
			return err
		}
		if _, err := hw.Complete(inv, history.Info, "", "", map[string]string{"error": lastErr.Error()}); err != nil {
			return err
		}
		if wait.Sleep(ctx, 500*time.Millisecond) != nil {
			break
		}
	}
	return fmt.Errorf("runner: %s: %w", f, lastErr)
}

// putTemplate puts the run's template, recording the put.
func (r *run) putTemplate(ctx context.Context, hw *history.Writer, servers []string) (limitInfo, error) {
	cfg := r.cfg
	ts, put := templatePut(cfg)
	li := limitInfo{Name: templatedPrefix, MaxPermits: cfg.MaxPermits, Config: put.Config}
	c, err := r.client(servers)
	if err != nil {
		return li, err
	}
	var got client.Template
	err = retry(ctx, hw, cfg.Workers, history.FPutTemplate, put, func() error {
		var err error
		got, err = c.PutTemplate(ctx, templatedPrefix, ts)
		return err
	})
	if err != nil {
		return li, err
	}
	t := cfg.Templated
	tl := &templatedLimits{Prefix: templatedPrefix, Template: keyConfOf(ts.LimitSpec, got.IntervalNanos, cfg.MaxPermits),
		IdleNanos: int64(got.Idle), MaxKeys: got.MaxKeys, Keys: t.Keys, HotKeys: t.HotKeys}
	if t.Override == 1 {
		tl.OverrideKey = cfg.templatedWorkload().Key(min(1, t.HotKeys))
		tl.Override = keyConfOf(templateSpec(cfg, 2), (got.IntervalNanos+1)/2, cfg.MaxPermits)
	}
	li.IntervalNanos, li.ExpiryNanos, li.MaxReserved = got.IntervalNanos, tl.Template.ExpiryNanos, tl.Template.MaxReserved
	li.MaxStoredNanos = tl.Template.MaxStoredNanos
	// Recovery asks for 80 % of one key's rate over all keys.
	li.RatePerSecond = 1e9 / float64(got.IntervalNanos)
	li.WindowFormula = "per key: " + tl.Template.bound().Formula
	li.Templated = tl
	r.logf("template %s: %s, interval %v, idle %v, max keys %d; %d keys (%d hot); override %v, churn %v",
		templatedPrefix, t.Algorithm, time.Duration(got.IntervalNanos), got.Idle, got.MaxKeys, t.Keys, t.HotKeys, t.Override == 1, t.Churn == 1)
	return li, nil
}

// templateChanges puts the override and deletes and puts the template
// again, at times the seed draws within the faults' span; it returns
// when done or when ctx ends.
func (x *execution) templateChanges(ctx context.Context) {
	cfg, tl := x.r.cfg, x.li.Templated
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6368616e6765))
	span := cfg.Duration - cfg.Tail - cfg.Warmup
	at := func(lo, hi float64) time.Time {
		f := lo + rng.Float64()*(hi-lo)
		return x.r.start.Add(cfg.Warmup + time.Duration(f*float64(span)))
	}
	overrideAt, deleteAt := at(0.25, 0.45), at(0.5, 0.7)
	hold := time.Duration(1500+rng.IntN(1500)) * time.Millisecond
	proc := cfg.Workers + 1
	if tl.OverrideKey != "" && wait.Sleep(ctx, time.Until(overrideAt)) == nil {
		spec := templateSpec(cfg, 2)
		put := history.PutRequest(tl.OverrideKey, spec)
		err := retry(ctx, x.hw, proc, history.FPut, put, func() error { _, err := x.admin.PutLimit(ctx, tl.OverrideKey, spec); return err })
		x.r.logf("override: %s put explicitly at twice the rate (%v)", tl.OverrideKey, err)
	}
	if cfg.Templated.Churn != 1 || wait.Sleep(ctx, time.Until(deleteAt)) != nil {
		return
	}
	del := history.LimitRequest{Limit: tl.Prefix}
	err := retry(ctx, x.hw, proc, history.FDeleteTemplate, del, func() error { _, err := x.admin.DeleteTemplate(ctx, tl.Prefix); return err })
	x.r.logf("churn: template %s deleted (%v); put again in %v", tl.Prefix, err, hold)
	_ = wait.Sleep(ctx, hold)
	ts, put := templatePut(cfg)
	err = retry(context.WithoutCancel(ctx), x.hw, proc, history.FPutTemplate, put, func() error {
		_, err := x.admin.PutTemplate(context.WithoutCancel(ctx), tl.Prefix, ts)
		return err
	})
	x.r.logf("churn: template %s put again (%v)", tl.Prefix, err)
}

// templatedAPIConfig is the keyed fake API: every key judged alone, live,
// with the fastest configuration of the run over 1 s windows.
func templatedAPIConfig(cfg Config, start time.Time) fakeapi.Config {
	i := int64(cfg.Interval)
	k := keyConfOf(templateSpec(cfg, 1), i, cfg.MaxPermits)
	if cfg.Templated.Override == 1 {
		k = k.faster(keyConfOf(templateSpec(cfg, 2), (i+1)/2, cfg.MaxPermits))
	}
	return fakeapi.Config{Start: start, Mode: fakeapi.Keyed, KeyMode: fakeapi.Window, WindowNanos: int64(time.Second), Bound: k.bound(),
		ToleranceNanos: int64(templatedLiveTolerance)}
}

// templatedChecks runs the templated workload's own checkers.
func templatedChecks(in checkInput, tol int64, add func(checker.Result, error)) {
	tl := in.limit.Templated
	if tl == nil {
		add(checker.Result{Name: "keyed-bounds"}, fmt.Errorf("templated: the template was not put"))
		return
	}
	spec := checker.KeyedSpec{Ops: in.ops, Default: []checker.KeyEpoch{tl.Template.epoch(0)}}
	i := tl.Template.IntervalNanos
	spec.WindowsNanos = []int64{i, 5 * i, 25 * i}
	if tl.OverrideKey != "" {
		puts, err := limitPuts(in.ops, tl.OverrideKey)
		if err != nil {
			add(checker.Result{Name: "keyed-bounds"}, err)
			return
		}
		if len(puts) > 0 {
			spec.Epochs = map[string][]checker.KeyEpoch{tl.OverrideKey: {tl.Template.epoch(0), tl.Template.faster(tl.Override).epoch(puts[0].CallNanos)}}
		}
	}
	// At receive: the measured jitter, plus (not strict) the window
	// discipline; at use: no jitter.
	use := int64(0)
	if tl.Template.Algorithm != "strict" {
		use = int64(workload.MaxAnswerRTT + workload.MaxLateUse)
	}
	recv := spec
	recv.ToleranceNanos = tol + use
	r, err := checker.KeyedBounds(in.calls, recv)
	add(withName(r, "keyed-bounds"), err)
	at := spec
	at.ToleranceNanos = use
	r, err = checker.KeyedBounds(callsAtUse(in.calls), at)
	if err == nil {
		r.Name = "keyed-bounds-at-use"
	}
	add(withName(r, "keyed-bounds-at-use"), err)
	r, err = checker.KeysFull(checker.KeysFullInput{Ops: in.ops, Calls: in.calls, Prefix: tl.Prefix, IdleNanos: tl.IdleNanos})
	add(withName(r, "keys-full"), err)
	if tl.Template.Algorithm == "strict" {
		templatedLinearizability(in, tl, add)
	}
}

// templatedLinearizability checks every strict key's register: a key
// created from its template starts at rest, exactly as a fresh limit, and
// a key dropped at rest and created again is the same register to its
// callers, so each key is one register over the whole run (the override
// key changes configuration at its put).
func templatedLinearizability(in checkInput, tl *templatedLimits, add func(checker.Result, error)) {
	pairs, err := history.Pair(in.ops)
	if err != nil {
		add(checker.Result{Name: "linearizability"}, err)
		return
	}
	base := limitInfo{IntervalNanos: tl.Template.IntervalNanos, MaxReserved: tl.Template.MaxReserved}
	limits := map[string]checker.RegisterSpec{}
	for _, o := range history.Filter(pairs, history.FReserve) {
		var req history.ReserveRequest
		if o.Invoke.DecodeValue(&req) != nil || limits[req.Limit].IntervalNanos != 0 {
			continue
		}
		s := checker.RegisterSpec{IntervalNanos: base.IntervalNanos, MaxReserved: base.MaxReserved, Fresh: true}
		if req.Limit == tl.OverrideKey {
			puts, err := limitPuts(in.ops, req.Limit)
			if err != nil {
				add(checker.Result{Name: "linearizability"}, err)
				return
			}
			// The template made the key: every put is a change.
			s.Changes = registerChanges(append([]limitPut{{OK: true}}, puts...), base)
		}
		limits[req.Limit] = s
	}
	r, err := checker.Linearizability(checker.LinearizabilityInput{
		Ops: in.ops, Limits: limits,
		ToleranceNanos:   int64(time.Millisecond),
		TimelineLagNanos: max(in.lagNanos, 0) + int64(200*time.Millisecond) + in.lagSpan/50,
		Timeout:          in.cfg.LinearizabilityTimeout,
	})
	if per, ok := r.Details["per_limit"].(map[string]string); err == nil && ok {
		// Hundreds of keys: list only those not Ok.
		notOK := map[string]string{}
		for k, v := range per {
			if v != "Ok" {
				notOK[k] = v
			}
		}
		r.Details["per_limit"] = notOK
		r.Details["keys"], r.Details["keys_ok"] = len(per), len(per)-len(notOK)
	}
	add(withName(r, "linearizability"), err)
}

// TemplatedSummary is the templated workload's part of the summary.
type TemplatedSummary struct {
	Workers workload.TemplatedStats `json:"workers"`
	// Live is the keyed fake API's live judge.
	Live fakeapi.Stats `json:"live"`
	// Nodes are each node's final template counters (a node counts from
	// its last start); Created, Dropped and KeysFull their largest.
	Nodes    []TemplateCounters `json:"nodes"`
	Created  int64              `json:"keys_created"`
	Dropped  int64              `json:"keys_dropped"`
	KeysFull int64              `json:"keys_full"`
}

// TemplateCounters are one node's permitd_template_* counters of the
// run's template.
type TemplateCounters struct {
	Node     string `json:"node"`
	Created  int64  `json:"keys_created"`
	Dropped  int64  `json:"keys_dropped"`
	KeysFull int64  `json:"keys_full"`
	Error    string `json:"error,omitempty"`
}

// collectTemplated reads every node's template counters from /metrics and
// records the templated summary.
func (x *execution) collectTemplated(ctx context.Context) {
	ts := &TemplatedSummary{Workers: x.wl.TemplatedStats(), Live: x.api.Stats()}
	for _, n := range x.cl.Nodes {
		tc := TemplateCounters{Node: n.ID}
		var raw []byte
		if err := x.ct.Do(ctx, n, "GET", "/metrics", nil, &raw, 5*time.Second); err != nil {
			tc.Error = err.Error()
		} else {
			tc.Created, tc.Dropped, tc.KeysFull = templateMetrics(raw, x.li.Templated.Prefix)
		}
		ts.Created, ts.Dropped, ts.KeysFull = max(ts.Created, tc.Created), max(ts.Dropped, tc.Dropped), max(ts.KeysFull, tc.KeysFull)
		ts.Nodes = append(ts.Nodes, tc)
	}
	x.sum.Templated = ts
	w := ts.Workers
	x.r.logf("templated: %d keys granted, %d revisits of a cold key, %d keys_full answers, %d unknown-limit answers; nodes: %d keys created, %d dropped, %d keys_full (the node that counted most); live judge: %d keys, %d calls, %d violations",
		w.KeysGranted, w.Revisits, w.KeysFull, w.NotFound, ts.Created, ts.Dropped, ts.KeysFull, ts.Live.Keys, ts.Live.Calls, ts.Live.Violations)
}

// templateMetrics reads the template's counters from a /metrics page.
func templateMetrics(raw []byte, prefix string) (created, dropped, full int64) {
	label := `{template="` + prefix + `"}`
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasSuffix(name, label) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch strings.TrimSuffix(name, label) {
		case "permitd_template_keys_created_total":
			created = int64(v)
		case "permitd_template_keys_dropped_total":
			dropped = int64(v)
		case "permitd_template_keys_full_total":
			full = int64(v)
		}
	}
	return created, dropped, full
}
