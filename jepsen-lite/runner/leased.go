package runner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
	"github.com/permitd/permitd/transport/client"
)

// The leased workload: real `permitd worker` sidecars in groups lease one
// limit from the cluster; the runner's clients reserve from their sidecar
// and, when granted, call the fake API at once (package workload). Every
// API call reaches the API between d and workload.LeasedMaxUseDelay + d
// after its permit was spent (d: the delivery delay), so the window
// check's tolerance is that delay plus the measured delivery jitter.
const (
	// leasedMaxUseDelay bounds a used grant's invoke → API send.
	leasedMaxUseDelay = workload.LeasedMaxUseDelay
	// leasedDefaultInterval is the leased limit's default interval (50/s).
	leasedDefaultInterval = 20 * time.Millisecond
	// leasedDefaultMaxWait is the sidecar reserves' default max_wait.
	leasedDefaultMaxWait = 50 * time.Millisecond
	// leasedDefaultTTL is the workers' default lease TTL.
	leasedDefaultTTL = time.Second
)

// leasedDefaults validates the leased workload's settings and fills in its
// defaults; it runs before the generic defaults (so the leased interval
// and max_wait defaults win).
func (c Config) leasedDefaults() (Config, error) {
	// Every mode: the sidecars run on loopback in the runner's (root)
	// namespace and reach the agents the way the runner's own clients do
	// (in the namespace mode through the root-side veth; the partitions
	// there drop only traffic between nodes).
	if c.Interval == 0 {
		c.Interval = leasedDefaultInterval
	}
	if c.MaxWait == 0 {
		c.MaxWait = leasedDefaultMaxWait
	}
	if c.MaxWait < 0 || c.MaxWait > leasedMaxUseDelay/2 {
		return c, fmt.Errorf("%w: leased max wait %v; allowed: 0 to %v (a grant is used within %v of its request)", ErrInvalid, c.MaxWait, leasedMaxUseDelay/2, leasedMaxUseDelay)
	}
	l := &c.Leased
	if l.TTL == 0 {
		l.TTL = leasedDefaultTTL
	}
	if l.TTL < 100*time.Millisecond || l.TTL > time.Minute {
		return c, fmt.Errorf("%w: lease ttl %v; allowed: 100ms to 1m", ErrInvalid, l.TTL)
	}
	if l.Margin < 0 || l.Margin >= l.TTL/2 {
		return c, fmt.Errorf("%w: lease margin %v; allowed: 0 (worker default) or > 0 and < ttl/2 = %v", ErrInvalid, l.Margin, l.TTL/2)
	}
	perSecond := max(int64(time.Second/max(c.Interval, 1)), 1)
	if l.BurstPermits == 0 {
		l.BurstPermits = perSecond
	}
	if l.MaxOutstandingPermits == 0 {
		l.MaxOutstandingPermits = perSecond
	}
	if l.BurstPermits < 1 || l.MaxOutstandingPermits < 1 || l.BurstPermits > 1_000_000 || l.MaxOutstandingPermits > 1_000_000 {
		return c, fmt.Errorf("%w: lease burst_permits %d, max_outstanding_permits %d; allowed: 1 to 1000000 each", ErrInvalid, l.BurstPermits, l.MaxOutstandingPermits)
	}
	return c, nil
}

// validateWorkerFaults rejects worker faults outside the leased workload,
// and relay faults without relays.
func (c Config) validateWorkerFaults() error {
	if c.Workload != WorkloadLeased && c.hasFault(FaultWorker) {
		return fmt.Errorf("%w: nemesis %s applies only to the %s workload (it acts on worker sidecars)", ErrInvalid, FaultWorker, WorkloadLeased)
	}
	if c.Leased.Relays > maxRelays {
		return fmt.Errorf("%w: %d lease relays; allowed: up to %d (negative: none)", ErrInvalid, c.Leased.Relays, maxRelays)
	}
	if c.hasFault(FaultRelay) && (c.Workload != WorkloadLeased || workload.RelayCount(c.Leased.Relays, c.Workers) == 0) {
		return fmt.Errorf("%w: nemesis %s applies only to the %s workload with lease relays (--lease-relays; by default 2 from 3 workers on, 1 with 2)", ErrInvalid, FaultRelay, WorkloadLeased)
	}
	return nil
}

// maxRelays bounds LeasedConfig.Relays.
const maxRelays = 16

// leasedWindows are the window lengths the leased bound is checked over:
// 1 s, 5 s and 10 s (at least 5 intervals each).
func leasedWindows(li limitInfo) []int64 {
	var out []int64
	for _, w := range []int64{int64(time.Second), int64(5 * time.Second), int64(10 * time.Second)} {
		out = append(out, max(w, 5*li.IntervalNanos))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// leasedBound is the leased bound of fsm/README.md for the configured policy.
func leasedBound(li limitInfo) (bound.Bound, error) {
	return bound.Leased(li.IntervalNanos, li.BurstPermits, li.MaxOutstandingPermits)
}

// leasedAPIConfig is the fake API's configuration for the leased workload:
// windows of 1 s against the leased bound (live counts only).
func leasedAPIConfig(cfg Config, start time.Time) (fakeapi.Config, error) {
	b, err := leasedBound(limitInfo{IntervalNanos: int64(cfg.Interval), BurstPermits: cfg.Leased.BurstPermits, MaxOutstandingPermits: cfg.Leased.MaxOutstandingPermits})
	if err != nil {
		return fakeapi.Config{}, err
	}
	return fakeapi.Config{Start: start, Mode: fakeapi.Window, WindowNanos: int64(time.Second), Bound: b}, nil
}

// putLeasedLimit creates the leased limit: a strict limit of 1 per
// Interval, then its lease policy (C, O). Both are put operations in the
// history.
func (r *run) putLeasedLimit(ctx context.Context, hw *history.Writer, servers []string) (limitInfo, error) {
	cfg := r.cfg
	name := "jl-" + cfg.Workload
	spec := client.LimitSpec{Algorithm: "strict", Rate: 1, Per: cfg.Interval}
	put := history.PutRequest(name, spec)
	// The lease policy's put records the limit's configuration with the
	// policy and the workers' TTL.
	li := limitInfo{Name: name, Config: history.PutRequest(name, spec).Config}
	li.Config["lease_policy"] = map[string]any{"leased": true, "burst_permits": cfg.Leased.BurstPermits, "max_outstanding_permits": cfg.Leased.MaxOutstandingPermits}
	li.Config["lease_ttl"] = cfg.Leased.TTL.String()
	c, err := r.client(servers)
	if err != nil {
		return li, err
	}
	proc := cfg.Workers // the runner's own process, after the workers
	try := func(what string, value any, call func() error) error {
		if err := retry(ctx, hw, proc, history.FPut, value, call); err != nil {
			return fmt.Errorf("runner: %s %s: %w", what, name, err)
		}
		return nil
	}
	var l client.Limit
	err = try("put limit", put, func() error {
		var err error
		l, err = c.PutLimit(ctx, name, spec)
		return err
	})
	if err != nil {
		return li, err
	}
	var pol client.LeasePolicyResult
	err = try("put lease policy", history.LimitRequest{Limit: name, Config: li.Config}, func() error {
		var err error
		pol, err = c.PutLeasePolicy(ctx, name, client.LeasePolicy{Leased: true, BurstPermits: cfg.Leased.BurstPermits, MaxOutstandingPermits: cfg.Leased.MaxOutstandingPermits})
		return err
	})
	if err != nil {
		return li, err
	}
	if !pol.Leased || pol.BurstPermits != cfg.Leased.BurstPermits || pol.MaxOutstandingPermits != cfg.Leased.MaxOutstandingPermits {
		return li, fmt.Errorf("runner: lease policy of %s: the register answered %+v, want leased with C=%d O=%d", name, pol, cfg.Leased.BurstPermits, cfg.Leased.MaxOutstandingPermits)
	}
	li.IntervalNanos = l.IntervalNanos
	li.RatePerSecond = 1e9 / float64(l.IntervalNanos)
	li.BurstPermits, li.MaxOutstandingPermits = pol.BurstPermits, pol.MaxOutstandingPermits
	b, err := leasedBound(li)
	if err != nil {
		return li, err
	}
	li.WindowFormula = b.Formula
	r.logf("limit %s: leased, interval %v, C=%d O=%d", name, time.Duration(l.IntervalNanos), li.BurstPermits, li.MaxOutstandingPermits)
	return li, nil
}

// leasedChecks adds the leased workload's window checks and its
// lease-conservation check.
//
// li is the limit's fastest configuration over the run (see fastestLimit).
func leasedChecks(in checkInput, li limitInfo, tol int64, add func(checker.Result, error)) {
	b, err := leasedBound(li)
	if err != nil {
		add(checker.Result{Name: "window"}, err)
		return
	}
	windows := leasedWindows(li)
	r, err := checker.Window(in.calls, checker.WindowSpec{WindowsNanos: windows, Bound: b, ToleranceNanos: tol + int64(leasedMaxUseDelay)})
	if err == nil {
		r.Details["tolerance_parts"] = fmt.Sprintf("delivery jitter %v + use delay %v (a grant is used within %v of its reserve's invoke; the sidecar spent it in between)", time.Duration(tol), leasedMaxUseDelay, leasedMaxUseDelay)
		r.Details["readme_bound"] = "C + O + floor(W / I) + 1 (fsm/README.md, Leased over-grant bound)"
	}
	add(withName(r, "window"), err)
	r, err = checker.Window(callsAtUse(in.calls), checker.WindowSpec{WindowsNanos: windows, Bound: b, ToleranceNanos: int64(leasedMaxUseDelay)})
	if err == nil {
		r.Name = "window-at-use"
	}
	add(withName(r, "window-at-use"), err)
	if in.leased == nil {
		add(checker.Result{Name: "lease-conservation"}, fmt.Errorf("runner: no worker observations"))
		return
	}
	r, err = checker.LeasedConservation(*in.leased)
	add(withName(r, "lease-conservation"), err)
}

// leasedDurabilityOps are the operations durability judges in the leased
// workload: the puts and deletes (the sidecars' grants are not register
// reserves, so the register's granted counters do not count them).
func leasedDurabilityOps(ops []history.Op) []history.Op {
	var out []history.Op
	for _, o := range ops {
		if o.F == history.FPut || o.F == history.FDelete {
			out = append(out, o)
		}
	}
	return out
}
