package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/history"
)

// settle measures the timeline lag, waits for the cluster to settle and
// collects the final state of every node, then stops the agents.
func (x *execution) settle() error {
	sum, cl, ct := x.sum, x.cl, x.ct
	fctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 60*time.Second)
	x.onExit(cancel)
	lag1, lagOK1 := x.r.probeClusterTime(fctx, ct, cl, x.servers)
	if x.lagOK0 && lagOK1 {
		realSpan := lag1.real - x.lag0.real
		sum.TimelineLagNanos = realSpan - (lag1.cluster - x.lag0.cluster)
		x.r.logf("timeline: real %v, cluster %v, lag %v", time.Duration(realSpan), time.Duration(lag1.cluster-x.lag0.cluster), time.Duration(sum.TimelineLagNanos))
		x.r.lagSpan = realSpan
	} else {
		sum.Errors = append(sum.Errors, "timeline lag not measured (no leader status at the start or the end)")
	}
	if err := ct.Settle(fctx, cl.Nodes, 30*time.Second); err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	}
	for _, n := range cl.UnexpectedExits() {
		sum.Errors = append(sum.Errors, "agent "+n+" exited on its own (see its log)")
	}
	finals, reports := x.r.collect(fctx, ct, cl)
	x.finals = finals
	sum.Nodes = reports
	if x.li.Multi != nil {
		x.collectMulti(fctx)
	}
	if x.li.Templated != nil {
		x.collectTemplated(fctx)
	}
	cl.StopAll(5 * time.Second)
	return nil
}

// collectMulti collects the multi workload's per-node counts and reports
// its settlements, releases and live judge (multi workload only).
func (x *execution) collectMulti(ctx context.Context) {
	x.multiNodes = x.r.collectMulti(ctx, x.ct, x.cl, x.li.Multi)
	ms := x.api.Stats().Multi
	x.sum.Multi = &MultiSummary{Workers: x.wl.MultiStats(), Live: ms, Nodes: x.multiNodes}
	mw := x.sum.Multi.Workers
	x.r.logf("multi: refusals by limit %v; %d settles (%d with refunds, %d tokens refunded), %d duplicate answers, %d conflicts, %d settle errors; %d releases (%d permits), %d repeated, %d errors; tokens estimated %d, used %d",
		mw.Blocking, mw.Settles, mw.SettlesWithRefund, mw.TokensRefunded, mw.SettleDuplicates, mw.SettleConflicts, mw.SettleErrors,
		mw.Releases, mw.Released, mw.ReleaseRepeats, mw.ReleaseErrors, mw.TokensEstimated, mw.TokensUsed)
	if ms != nil {
		x.r.logf("multi live judge: %d calls, violations: spacing %d, tokens %d, in-flight %d; min gap %v, max in flight %d",
			ms.Calls, ms.SpacingViolations, ms.TokenViolations, ms.InFlightViolations, time.Duration(ms.MinGapNanos), ms.MaxInFlight)
	}
}

// judge reads the history back and runs the checkers on it, the API's
// calls, the nodes' final states and the logs.
func (x *execution) judge() error {
	cfg, sum := x.r.cfg, x.sum
	if err := x.hw.Flush(); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	ops, err := history.ReadFile(x.histPath)
	if err != nil {
		return fmt.Errorf("reading the history back: %w", err)
	}
	calls := x.api.Calls()
	sum.APICalls = len(calls)
	logs, lerrs := readLogs(x.cl.Nodes)
	sum.Errors = append(sum.Errors, lerrs...)
	sum.Errors = append(sum.Errors, checkSecureListeners(logs, sum.Security)...)
	var leased *checker.LeasedInput
	if x.fl != nil {
		wlogs, wlerrs := x.fl.Logs()
		logs, sum.Errors = append(logs, wlogs...), append(sum.Errors, wlerrs...)
		leased = x.fl.Observations()
	}
	x.r.logf("checking %d ops, %d API calls", len(ops), len(calls))
	co := runChecks(checkInput{
		cfg: cfg, limit: x.li, ops: ops, calls: calls, finals: x.finals, logs: logs,
		healNanos: sum.HealNanos, endNanos: sum.EndNanos, lagNanos: sum.TimelineLagNanos, lagSpan: x.r.lagSpan,
		visualizer: cfg.OutDir, leased: leased, nemeses: sum.Nemeses, multiNodes: x.multiNodes,
	})
	sum.Checkers, sum.Jitter = co.results, co.jitter
	sum.Errors = append(sum.Errors, co.errors...)
	sum.SafetyValid, sum.LivenessValid = co.safetyValid, co.livenessValid
	sum.Phases = phases(ops, sum)
	if err := writeCalls(filepath.Join(cfg.OutDir, "api-calls.jsonl"), calls); err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	}
	return nil
}
