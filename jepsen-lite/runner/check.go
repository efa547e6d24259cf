package runner

import (
	"fmt"
	"os"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
)

// limitInfo is the limit a run exercises, as the server compiled it.
type limitInfo struct {
	Name           string         `json:"name"`
	Config         map[string]any `json:"config"`
	IntervalNanos  int64          `json:"interval_ns"`
	ExpiryNanos    int64          `json:"expiry_ns,omitempty"`
	MaxReserved    int64          `json:"max_reserved,omitempty"`
	MaxStoredNanos int64          `json:"max_stored_ns,omitempty"`
	// MaxPermits is the most permits one reserve asked for (window: the
	// bound's n_last).
	MaxPermits int64 `json:"max_permits,omitempty"`
	// BurstPermits (C) and MaxOutstandingPermits (O): the leased limit's
	// lease policy.
	BurstPermits          int64 `json:"burst_permits,omitempty"`
	MaxOutstandingPermits int64 `json:"max_outstanding_permits,omitempty"`
	// Multi is the multi workload's three limits (Name is its strict one).
	Multi *multiLimits `json:"multi,omitempty"`
	// Templated is the templated workload's template and override (Name
	// is the prefix).
	Templated *templatedLimits `json:"templated,omitempty"`

	RatePerSecond float64 `json:"rate_per_second"`
	// SpacingFormula and WindowFormula are the README's bounds the run is
	// judged by.
	SpacingFormula string `json:"spacing_formula,omitempty"`
	WindowFormula  string `json:"window_formula"`
}

// bound returns the README's window bound for the limit.
func (li limitInfo) bound(workload string) (bound.Bound, error) {
	if workload == WorkloadStrict {
		return bound.StrictWithExpiry(li.IntervalNanos, li.ExpiryNanos)
	}
	if workload == WorkloadLeased {
		return leasedBound(li)
	}
	if workload == WorkloadMulti && li.Multi != nil {
		return tokenBound(li.Multi.TokenIntervalNanos, li.Multi.TokenMaxStoredNanos, li.Multi.MaxTokens), nil
	}
	i, s, n := li.IntervalNanos, li.MaxStoredNanos, max(li.MaxPermits, 1)
	return bound.Bound{
		Formula: fmt.Sprintf("floor((W + maxStored)/I) + n_last with I=%dns maxStored=%dns n_last=%d (bucket/README.md, Bursty; n_last: the largest grant)", i, s, n),
		Max:     func(w int64) int64 { return (max(w, 0)+s)/i + n },
	}, nil
}

// checkInput is everything the checkers judge.
type checkInput struct {
	cfg        Config
	limit      limitInfo
	ops        []history.Op
	calls      []fakeapi.Call
	finals     []checker.NodeFinal
	logs       []checker.Log
	healNanos  int64
	endNanos   int64
	lagNanos   int64 // measured timeline lag (negative: ahead of real time)
	lagSpan    int64 // the real time the lag was measured over
	visualizer string
	leased     *checker.LeasedInput      // the leased workload's worker observations
	nemeses    []NemesisRecord           // what the faults did (restarts to judge)
	multiNodes []checker.MultiNodeCounts // the multi workload's final granted_requests
}

// checkOutput is the checkers' verdicts.
type checkOutput struct {
	results []checker.Result
	jitter  checker.Jitter
	// safety and liveness verdicts.
	safetyValid, livenessValid bool
	errors                     []string
}

// livenessCheckers are the checkers whose failure is not a safety
// violation.
var livenessCheckers = map[string]bool{"recovery": true}

// runChecks runs every checker that applies to the workload.
func runChecks(in checkInput) checkOutput {
	c := &checking{in: in}
	c.prepare()
	// The same bounds twice: at the API's receive times, with the measured
	// delivery jitter as tolerance (the README's formulation), and at the
	// moments of use, the workers' send times (sent_ns: the same clock,
	// read when the worker checked the grant), where no jitter applies.
	if in.cfg.Workload == WorkloadLeased {
		leasedChecks(in, c.li, c.tol, c.add)
	} else if in.cfg.Workload == WorkloadMulti {
		multiChecks(in, c.tol, c.add)
	} else if in.cfg.Workload == WorkloadTemplated {
		templatedChecks(in, c.tol, c.add)
	} else if in.cfg.Workload == WorkloadStrict {
		c.strictChecks()
	} else {
		c.windowChecks()
	}
	c.commonChecks()
	c.verdicts()
	return c.out
}

// checking is one runChecks call's state: its input, the verdicts so far
// and what the checkers share.
type checking struct {
	in  checkInput
	out checkOutput
	// li is the fastest configuration in effect during the run, nconf the
	// number of configurations, puts the limit's recorded puts.
	li    limitInfo
	nconf int
	puts  []limitPut
	// tol is the measured delivery jitter.
	tol     int64
	b       bound.Bound
	windows []int64
	// used are the calls at their moments of use.
	used []fakeapi.Call
}

// add records a checker's result; a checker that could not judge fails
// with its error.
func (c *checking) add(r checker.Result, err error) {
	if err == nil && (r.Name == "spacing" || r.Name == "spacing-at-use" || r.Name == "window" || r.Name == "window-at-use") {
		c.configNote(r)
	}
	if err != nil {
		c.out.errors = append(c.out.errors, err.Error())
		r = checker.Result{Name: r.Name, Valid: false, Violations: []string{"could not judge: " + err.Error()}, Details: map[string]any{"violations_total": 1}}
	}
	c.out.results = append(c.out.results, r)
}

// prepare measures the delivery jitter and finds the configuration and
// bound the checkers judge with.
func (c *checking) prepare() {
	in := c.in
	j, err := checker.DeliveryJitter(in.calls, true)
	if err != nil {
		c.out.errors = append(c.out.errors, "jitter: "+err.Error()+" (tolerance 0)")
	}
	c.out.jitter = j
	c.tol = j.JitterNanos
	// Bounds are judged with the fastest configuration in effect during
	// the run (reconfig faults only ever slow the limit down, so it is
	// the original one); linearizability checks each configuration epoch.
	puts, err := limitPuts(in.ops, in.limit.Name)
	if err != nil {
		c.out.errors = append(c.out.errors, err.Error())
	}
	c.puts = puts
	c.li, c.nconf = fastestLimit(in.limit, puts)
	b, err := c.li.bound(in.cfg.Workload)
	if err != nil {
		c.out.errors = append(c.out.errors, err.Error())
	}
	c.b = b
	c.windows = []int64{c.li.IntervalNanos, 5 * c.li.IntervalNanos, 25 * c.li.IntervalNanos}
	c.used = callsAtUse(in.calls)
}

// configNote notes on a bound's result which configuration judged it,
// when the run had several.
func (c *checking) configNote(r checker.Result) {
	li := c.li
	if c.nconf > 1 && r.Details != nil {
		r.Details["configurations"] = c.nconf
		with := fmt.Sprintf("I=%v expiry=%v", time.Duration(li.IntervalNanos), time.Duration(li.ExpiryNanos))
		if c.in.cfg.Workload == WorkloadLeased {
			with = fmt.Sprintf("I=%v C=%d O=%d", time.Duration(li.IntervalNanos), li.BurstPermits, li.MaxOutstandingPermits)
		}
		r.Details["judged_with"] = "the fastest configuration in effect during the run (fsm/README.md: across a change, the smaller interval and the larger expiry, C and O): " + with
	}
}

// strictChecks judges the strict workload: spacing and windows at receive
// and at use, and linearizability.
func (c *checking) strictChecks() {
	in, li, tol, add := c.in, c.li, c.tol, c.add
	r, err := checker.Spacing(in.calls, checker.SpacingSpec{IntervalNanos: li.IntervalNanos - li.ExpiryNanos, ToleranceNanos: tol})
	if err == nil {
		r.Details["readme_bound"] = li.SpacingFormula
	}
	add(withName(r, "spacing"), err)
	r, err = checker.Spacing(c.used, checker.SpacingSpec{IntervalNanos: li.IntervalNanos - li.ExpiryNanos})
	if err == nil {
		r.Name = "spacing-at-use"
		r.Details["rule"] = "use times (sent_ns) >= I - expiry apart: no jitter between a worker's decision to use and its clock"
	}
	add(withName(r, "spacing-at-use"), err)
	r, err = checker.Window(in.calls, checker.WindowSpec{WindowsNanos: c.windows, Bound: c.b, ToleranceNanos: tol})
	add(withName(r, "window"), err)
	r, err = checker.Window(c.used, checker.WindowSpec{WindowsNanos: c.windows, Bound: c.b})
	if err == nil {
		r.Name = "window-at-use"
	}
	add(withName(r, "window-at-use"), err)
	r, err = checker.Linearizability(checker.LinearizabilityInput{
		Ops: in.ops,
		Limits: map[string]checker.RegisterSpec{li.Name: {IntervalNanos: in.limit.IntervalNanos, MaxReserved: in.limit.MaxReserved, Fresh: true,
			Changes: registerChanges(c.puts, in.limit)}},
		ToleranceNanos:   int64(time.Millisecond),
		TimelineLagNanos: max(in.lagNanos, 0) + int64(200*time.Millisecond) + in.lagSpan/50,
		Timeout:          in.cfg.LinearizabilityTimeout,
		VisualizeDir:     in.visualizer,
	})
	add(withName(r, "linearizability"), err)
}

// windowChecks judges the window workload: windows at receive and at use,
// with the workers' use discipline in the tolerance.
func (c *checking) windowChecks() {
	in, tol, add := c.in, c.tol, c.add
	wtol := tol + int64(workload.MaxAnswerRTT+workload.MaxLateUse)
	r, err := checker.Window(in.calls, checker.WindowSpec{WindowsNanos: c.windows, Bound: c.b, ToleranceNanos: wtol})
	if err == nil {
		r.Details["tolerance_parts"] = fmt.Sprintf("delivery jitter %v + answer rtt %v + late use %v (the workers' use discipline)", time.Duration(tol), workload.MaxAnswerRTT, workload.MaxLateUse)
	}
	add(withName(r, "window"), err)
	r, err = checker.Window(c.used, checker.WindowSpec{WindowsNanos: c.windows, Bound: c.b, ToleranceNanos: int64(workload.MaxAnswerRTT + workload.MaxLateUse)})
	if err == nil {
		r.Name = "window-at-use"
	}
	add(withName(r, "window-at-use"), err)
}

// commonChecks runs the checkers every workload has: conservation,
// durability, the timeline, restarts, logs and recovery.
func (c *checking) commonChecks() {
	in, add := c.in, c.add
	r, err := checker.Conservation(checker.ConservationInput{Ops: in.ops, Calls: in.calls, SameTimeBase: true, ToleranceNanos: c.tol})
	add(withName(r, "conservation"), err)
	durOps := in.ops
	if in.cfg.Workload == WorkloadLeased || in.cfg.Workload == WorkloadTemplated {
		// Leased: sidecar grants are not register reserves. Templated:
		// a dropped key is listed nowhere and its counters go with it.
		durOps = leasedDurabilityOps(in.ops)
	}
	r, err = checker.Durability(checker.DurabilityInput{Ops: durOps, Nodes: in.finals})
	add(withName(r, "durability"), err)
	c.out.results = append(c.out.results, timelineResult(in))
	if in.cfg.hasFault(FaultReconfig) {
		c.out.results = append(c.out.results, restartResult(in.nemeses))
	}
	r, err = checker.Logs(in.logs, nil)
	add(withName(r, "logs"), err)
	if in.endNanos > in.healNanos {
		r, err = checker.Recovery(in.calls, checker.RecoverySpec{
			HealNanos: in.healNanos, EndNanos: in.endNanos, RatePerSecond: in.limit.RatePerSecond,
			MeasureWindowNanos: recoveryWindow(in.cfg.Workload, in.limit), Fraction: in.cfg.RecoveryFraction, WithinNanos: int64(in.cfg.RecoveryWithin),
		})
		add(withName(r, "recovery"), err)
	}
}

// verdicts sets the safety and liveness verdicts from the results.
func (c *checking) verdicts() {
	out := &c.out
	out.safetyValid, out.livenessValid = true, true
	for _, r := range out.results {
		switch {
		case r.Valid:
		case livenessCheckers[r.Name]:
			out.livenessValid = false
		case searchTimedOut(r):
			// Not proven either way: the run is incomplete, not unsafe.
			out.errors = append(out.errors, "linearizability: porcupine's search timed out (Unknown); raise Config.LinearizabilityTimeout or shorten the run")
		default:
			out.safetyValid = false
		}
	}
}

// searchTimedOut reports a linearizability result whose only failures are
// searches that timed out.
func searchTimedOut(r checker.Result) bool {
	per, ok := r.Details["per_limit"].(map[string]string)
	if r.Name != "linearizability" || !ok {
		return false
	}
	unknown := 0
	for _, v := range per {
		switch v {
		case "Unknown":
			unknown++
		case "Ok":
		default:
			return false
		}
	}
	return unknown > 0 && r.ViolationsTotal() == unknown // no op-level fault either
}

// withName names a result when a checker returned an error (and so an
// empty result).
func withName(r checker.Result, name string) checker.Result {
	if r.Name == "" {
		r.Name = name
	}
	return r
}

// callsAtUse returns the calls that carry a send time, stamped with it.
func callsAtUse(calls []fakeapi.Call) []fakeapi.Call {
	out := make([]fakeapi.Call, 0, len(calls))
	for _, c := range calls {
		if c.SentNanos != nil {
			c.TimeNanos = *c.SentNanos
			out = append(out, c)
		}
	}
	return out
}

// timelineResult checks invariant 2 from the outside: between the first
// and the last GET /v1/status of the run, the cluster timeline
// (cluster_now_ns) advanced no more than real time did (plus 50 ms for
// the two reads).
func timelineResult(in checkInput) checker.Result {
	const slack = int64(50 * time.Millisecond)
	r := checker.Result{Name: "timeline", Valid: true, Details: map[string]any{
		"violations_total": 0,
		"rule":             "cluster_now_ns advances no faster than real time: lag = real elapsed - cluster elapsed >= -50ms",
		"lag_ns":           in.lagNanos,
		"real_elapsed_ns":  in.lagSpan,
	}}
	if in.lagSpan <= 0 {
		r.Details["note"] = "not measured"
		return r
	}
	if in.lagNanos < -slack {
		r.Valid = false
		r.Details["violations_total"] = 1
		r.Violations = []string{fmt.Sprintf("the cluster timeline ran %v ahead of real time over %v (it must never run faster)", time.Duration(-in.lagNanos), time.Duration(in.lagSpan))}
	}
	return r
}

// readLogs reads the nodes' log files for the logs checker.
func readLogs(nodes []*cluster.Node) ([]checker.Log, []string) {
	var logs []checker.Log
	var errs []string
	for _, n := range nodes {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		logs = append(logs, checker.Log{Name: n.ID + ".log", Text: string(b)})
	}
	return logs, errs
}

// recoveryWindow is the window recovery measures throughput over: 10
// intervals (leased: at least 1 s, since sidecars pace per share).
func recoveryWindow(workload string, li limitInfo) int64 {
	if workload == WorkloadLeased || workload == WorkloadMulti || workload == WorkloadTemplated {
		return max(10*li.IntervalNanos, int64(time.Second))
	}
	return 10 * li.IntervalNanos
}
