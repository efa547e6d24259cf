package runner

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/transport/client"
)

// The reconfig nemesis (kind FaultReconfig). At the start of its window it
// puts the workload's limit again with the same algorithm and a slower
// rate (interval × Event.Factor; max_reserved, expiry and the lease policy
// unchanged), which permitd applies keeping the limit's state (the strict
// register's next free slot, a leased limit's pool). At the window's end,
// and again at the final heal if that failed, it puts the original
// configuration back. Every put is a put operation in the history.
//
// Variant snapshot-restart then, while the slots and leases granted at the
// old rate are still outstanding, picks one node (a follower, or the
// leader when Pick % 3 == 0), waits until it has applied the put, makes it
// take a raft snapshot (POST /v1/debug/snapshot), kills it with -9 and
// restarts it from its data directory: it must restore its own snapshot
// and become ready (GET /readyz 200) within restartReadyBound, which the
// restart-ready checker judges (a snapshot taken within a lease TTL of
// lowering a leased rate once could not be restored).
//
// What the checkers assume (README, "Leased limits", assumption 4, and
// "Algorithms"): across a change the bounds hold with the fastest
// configuration in effect, the smaller interval and the larger expiry, C
// and O. The slower configuration is never faster, so the bounds the run
// is judged by are the original configuration's (fastestLimit). The
// linearizability model assumes one I and M: it checks each configuration
// epoch on its own (checker.RegisterSpec.Changes, from limitPuts).

// restartReadyBound is how long a node restarted by reconfig:
// snapshot-restart may take to answer GET /readyz with 200.
const restartReadyBound = 20 * time.Second

// RestartRecord is one node restarted by reconfig:snapshot-restart.
type RestartRecord struct {
	// Node is the restarted node; WasLeader says it led when picked.
	Node      string `json:"node"`
	WasLeader bool   `json:"was_leader"`
	// SnapshotIndex is the applied index its forced snapshot covered (0:
	// the snapshot failed, see Error).
	SnapshotIndex uint64 `json:"snapshot_index"`
	// KilledNanos is when it was killed (-9) and restarted at once;
	// ReadyNanos when it first answered /readyz 200 (-1: never within
	// restartReadyBound); ReadyAfterNanos the difference.
	KilledNanos     int64 `json:"killed_ns"`
	ReadyNanos      int64 `json:"ready_ns"`
	ReadyAfterNanos int64 `json:"ready_after_ns"`
	// BoundNanos is the bound it was given.
	BoundNanos int64 `json:"bound_ns"`
	// Exited reports that the restarted agent exited on its own while the
	// runner waited for it (see its log).
	Exited bool `json:"exited,omitempty"`
	// LastAnswer is its last /readyz answer (or error) while not ready.
	LastAnswer string `json:"last_answer,omitempty"`
	// Error says why the sequence did not run to its end.
	Error string `json:"error,omitempty"`
}

// limitSpec is the spec and history record of the run's limit at the
// given interval (the original configuration otherwise).
func limitSpec(workload string, li limitInfo, interval time.Duration) (client.LimitSpec, map[string]any) {
	spec := client.LimitSpec{Algorithm: "strict", Rate: 1, Per: interval}
	rec := map[string]any{"algorithm": "strict", "rate": 1, "per": interval.String()}
	if workload == WorkloadStrict {
		m, e := li.MaxReserved, time.Duration(li.ExpiryNanos)
		spec.MaxReserved, spec.Expiry = &m, &e
		rec["max_reserved"], rec["expiry"] = m, e.String()
	}
	return spec, rec
}

// putInterval puts the run's limit with interval factor × its original
// one (factor 1: the original), recording each attempt as a put on process
// proc; it tries up to 5 times while ctx lasts.
func (nm *nemesis) putInterval(ctx context.Context, proc int, factor int64) error {
	if nm.admin == nil {
		return fmt.Errorf("runner: no admin client for the limit %s", nm.limit.Name)
	}
	interval := time.Duration(nm.limit.IntervalNanos * factor)
	spec, rec := limitSpec(nm.cfg.Workload, nm.limit, interval)
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		inv, err := nm.hw.Invoke(proc, "", history.FPut, "", history.LimitRequest{Limit: nm.limit.Name, Config: rec})
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err := nm.admin.PutLimit(pctx, nm.limit.Name, spec)
		cancel()
		if err == nil && l.IntervalNanos != int64(interval) {
			err = fmt.Errorf("runner: put %s with interval %v: the register compiled %v", nm.limit.Name, interval, time.Duration(l.IntervalNanos))
		}
		if err == nil {
			_, err = nm.hw.Complete(inv, history.OK, "", "", nil)
			nm.mu.Lock()
			nm.slowed = factor != 1
			nm.mu.Unlock()
			return err
		}
		lastErr = err
		if _, err := nm.hw.Complete(inv, history.Info, "", "", map[string]string{"error": lastErr.Error()}); err != nil {
			return err
		}
		if factor != 1 {
			nm.mu.Lock()
			nm.slowed = true // it may still take effect
			nm.mu.Unlock()
		}
		if sleepCtx(ctx, 300*time.Millisecond) != nil {
			break
		}
	}
	return fmt.Errorf("runner: put %s with interval %v: %w", nm.limit.Name, interval, lastErr)
}

// beginReconfig starts a reconfig fault: the slower put and, for
// snapshot-restart, the snapshot and restart, in the background (so that
// faults composed on it start on time). end stops it, then undo puts the
// original configuration back.
func (nm *nemesis) beginReconfig(ctx context.Context, i int, ev Event, af *activeFault) {
	rec := af.rec
	factor := int64(max(ev.Factor, 2))
	rec.Notes = append(rec.Notes, fmt.Sprintf("%s interval %v → %v (×%d) until the window's end", nm.limit.Name,
		time.Duration(nm.limit.IntervalNanos), time.Duration(nm.limit.IntervalNanos*factor), factor))
	proc := nm.auxProcess(i)
	var target *agentNode
	var wasLeader bool
	if ev.Variant == "snapshot-restart" {
		target, wasLeader = nm.restartTarget(ctx, ev, rec)
		if target != nil {
			rec.Targets = []string{target.ID}
		}
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	af.launch = func() {
		go func() {
			defer close(done)
			if err := nm.putInterval(bctx, proc, factor); err != nil {
				nm.recordError(rec, err.Error())
			}
			if target != nil {
				nm.snapshotRestart(bctx, target, wasLeader, rec)
			}
		}()
	}
	af.stop = func() { cancel(); <-done }
	af.undo = func(ctx context.Context) []string {
		if err := nm.putInterval(ctx, proc, 1); err != nil {
			return []string{"restoring the limit: " + err.Error()}
		}
		nm.recordNote(rec, fmt.Sprintf("%s interval back to %v", nm.limit.Name, time.Duration(nm.limit.IntervalNanos)))
		return nil
	}
}

// restartTarget picks the node reconfig:snapshot-restart restarts: the
// leader when Pick % 3 == 0, else a follower chosen by Pick.
func (nm *nemesis) restartTarget(ctx context.Context, ev Event, rec *NemesisRecord) (*agentNode, bool) {
	leaderID, _ := leaderOf(nm.ct.statuses(ctx, nm.cl.nodes, time.Second))
	if ev.Pick%3 == 0 && leaderID != "" {
		return nm.node(leaderID), true
	}
	var followers []*agentNode
	for _, n := range nm.upNodes() {
		if n.ID != leaderID {
			followers = append(followers, n)
		}
	}
	if len(followers) == 0 {
		rec.Errors = append(rec.Errors, "no running follower to snapshot and restart")
		return nil, false
	}
	return followers[ev.Pick%uint64(len(followers))], false
}

// snapshotRestart snapshots target right after it applied the
// reconfiguration, kills it with -9, restarts it from its data directory
// and waits (up to restartReadyBound, whatever ctx says) until it is ready.
func (nm *nemesis) snapshotRestart(ctx context.Context, target *agentNode, wasLeader bool, rec *NemesisRecord) {
	rr := RestartRecord{Node: target.ID, WasLeader: wasLeader, ReadyNanos: -1, ReadyAfterNanos: -1, BoundNanos: int64(restartReadyBound)}
	defer func() {
		nm.mu.Lock()
		rec.Restarts = append(rec.Restarts, rr)
		nm.mu.Unlock()
	}()
	leaderID, _ := leaderOf(nm.ct.statuses(ctx, nm.cl.nodes, time.Second))
	// The snapshot must cover the put: wait until the target applied the
	// leader's index as of now (the put has completed).
	want := uint64(0)
	if leaderID != "" {
		if st, err := nm.ct.status(ctx, nm.node(leaderID), time.Second); err == nil {
			want = st.AppliedIndex
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, err := nm.ct.status(ctx, target, time.Second)
		if err == nil && st.AppliedIndex >= want {
			break
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 50*time.Millisecond) != nil {
			nm.recordNote(rec, fmt.Sprintf("%s had not applied index %d within 3s; snapshotting anyway", target.ID, want))
			break
		}
	}
	var snapErr error
	for attempt := 0; attempt < 10; attempt++ {
		if rr.SnapshotIndex, snapErr = nm.ct.snapshot(ctx, target); snapErr == nil || answerCode(snapErr) != 409 {
			break // 409: raft refused (nothing new since its last snapshot); anything else is final
		}
		if sleepCtx(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	if snapErr != nil {
		rr.Error = "snapshot: " + snapErr.Error()
		nm.recordError(rec, rr.Error)
	}
	rr.KilledNanos = nm.now()
	if err := nm.cl.kill(target); err != nil {
		rr.Error = err.Error()
		nm.recordError(rec, err.Error())
	}
	if err := nm.cl.start(target); err != nil {
		rr.Error = err.Error()
		nm.recordError(rec, err.Error())
		return
	}
	nm.recordNote(rec, fmt.Sprintf("%s (leader: %v) snapshotted at applied index %d, killed -9 and restarted at %v", target.ID, rr.WasLeader, rr.SnapshotIndex, time.Duration(rr.KilledNanos)))
	nm.awaitReady(context.WithoutCancel(ctx), target, &rr)
	if rr.ReadyNanos >= 0 {
		nm.recordNote(rec, fmt.Sprintf("%s ready %v after its restart", target.ID, time.Duration(rr.ReadyAfterNanos).Round(time.Millisecond)))
	} else {
		nm.recordError(rec, fmt.Sprintf("%s not ready within %v of its restart (last answer: %s)", target.ID, restartReadyBound, rr.LastAnswer))
	}
}

// awaitReady polls node's GET /readyz until it answers 200, its agent
// exits, or restartReadyBound has passed since rr.KilledNanos.
func (nm *nemesis) awaitReady(ctx context.Context, node *agentNode, rr *RestartRecord) {
	deadline := nm.start.Add(time.Duration(rr.KilledNanos) + restartReadyBound)
	for {
		err := nm.ct.ready(ctx, node)
		if err == nil {
			rr.ReadyNanos = nm.now()
			rr.ReadyAfterNanos = rr.ReadyNanos - rr.KilledNanos
			rr.LastAnswer = ""
			return
		}
		rr.LastAnswer = err.Error()
		if p := node.running(); p != nil && p.hasExited() {
			rr.Exited = true
			rr.LastAnswer = "the agent exited (see its log); last answer: " + rr.LastAnswer
			return
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
}

// restartResult is the restart-ready checker: every node restarted by
// reconfig:snapshot-restart answered /readyz 200 within its bound.
func restartResult(recs []NemesisRecord) checker.Result {
	r := checker.Result{Name: "restart-ready", Valid: true, Details: map[string]any{
		"rule":  fmt.Sprintf("a node killed -9 right after a forced snapshot and restarted from its data directory answers GET /readyz 200 within %v", restartReadyBound),
		"bound": int64(restartReadyBound),
	}}
	var restarts []RestartRecord
	var worst int64 = -1
	for _, rec := range recs {
		for _, rr := range rec.Restarts {
			restarts = append(restarts, rr)
			switch {
			case rr.KilledNanos == 0:
				// the sequence never got to a restart (Error says why)
			case rr.ReadyNanos < 0:
				why := "not ready within " + restartReadyBound.String()
				if rr.Exited {
					why = "exited instead of becoming ready"
				}
				r.Violations = append(r.Violations, fmt.Sprintf("%s, restarted at %v after a snapshot at applied index %d: %s (last answer: %s)",
					rr.Node, time.Duration(rr.KilledNanos), rr.SnapshotIndex, why, rr.LastAnswer))
			default:
				worst = max(worst, rr.ReadyAfterNanos)
			}
		}
	}
	r.Valid = len(r.Violations) == 0
	r.Details["violations_total"] = len(r.Violations)
	r.Details["restarts"] = restarts
	r.Details["slowest_ready_ns"] = worst
	if len(restarts) == 0 {
		r.Details["note"] = "no snapshot-restart in this run"
	}
	return r
}

// limitPut is one put of the run's limit in the history, with the
// configuration it sent.
type limitPut struct {
	OpIndex int
	// CallNanos and ReturnNanos bound it; ReturnNanos -1: outcome unknown.
	CallNanos, ReturnNanos int64
	OK                     bool
	// IntervalNanos (0: not set), MaxReserved and ExpiryNanos (-1: not
	// set), BurstPermits and MaxOutstanding (0: not set).
	IntervalNanos, MaxReserved, ExpiryNanos int64
	BurstPermits, MaxOutstanding            int64
}

// limitPuts reads the puts of limit name from the history, in invoke
// order. The configurations are the runner's own records (see limitSpec,
// putLimit, putLeasedLimit).
func limitPuts(ops []history.Op, name string) ([]limitPut, error) {
	pairs, err := history.Pair(ops)
	if err != nil {
		return nil, fmt.Errorf("runner: limit puts: %w", err)
	}
	var out []limitPut
	for _, o := range history.Filter(pairs, history.FPut) {
		var req history.LimitRequest
		if err := o.Invoke.DecodeValue(&req); err != nil {
			return nil, fmt.Errorf("runner: limit puts: %w", err)
		}
		if req.Limit != name {
			continue
		}
		p := limitPut{OpIndex: o.Invoke.Index, CallNanos: o.CallNanos(), ReturnNanos: -1, MaxReserved: -1, ExpiryNanos: -1}
		if ret, ok := o.ReturnNanos(); ok && o.Outcome() == history.OK {
			p.ReturnNanos, p.OK = ret, true
		}
		if per, ok := req.Config["per"].(string); ok {
			d, err := time.ParseDuration(per)
			if err != nil {
				return nil, fmt.Errorf("runner: put op #%d: per %q: %w", p.OpIndex, per, err)
			}
			rate, _ := req.Config["rate"].(float64)
			if rate <= 0 {
				return nil, fmt.Errorf("runner: put op #%d: rate %v; want > 0", p.OpIndex, req.Config["rate"])
			}
			p.IntervalNanos = int64(math.Ceil(float64(d) / rate))
		}
		if m, ok := req.Config["max_reserved"].(float64); ok {
			p.MaxReserved = int64(m)
		}
		if e, ok := req.Config["expiry"].(string); ok {
			d, err := time.ParseDuration(e)
			if err != nil {
				return nil, fmt.Errorf("runner: put op #%d: expiry %q: %w", p.OpIndex, e, err)
			}
			p.ExpiryNanos = int64(d)
		}
		if lp, ok := req.Config["lease_policy"].(map[string]any); ok {
			c, _ := lp["burst_permits"].(float64)
			o, _ := lp["max_outstanding_permits"].(float64)
			p.BurstPermits, p.MaxOutstanding = int64(c), int64(o)
		}
		out = append(out, p)
	}
	return out, nil
}

// registerChanges turns the puts after the one that created the limit
// (the first ok put) into the linearizability checker's configuration
// changes; a put without max_reserved keeps base's.
func registerChanges(puts []limitPut, base limitInfo) []checker.RegisterChange {
	var out []checker.RegisterChange
	created := false
	for _, p := range puts {
		if p.OK && !created {
			created = true
			continue
		}
		if p.IntervalNanos == 0 {
			continue // a lease policy without a rate: no change to I or M
		}
		m := p.MaxReserved
		if m < 0 {
			m = base.MaxReserved
		}
		out = append(out, checker.RegisterChange{OpIndex: p.OpIndex, CallNanos: p.CallNanos, ReturnNanos: p.ReturnNanos, IntervalNanos: p.IntervalNanos, MaxReserved: m})
	}
	return out
}

// fastestLimit returns li with the fastest configuration any put of the
// history may have set: the smallest interval, the largest expiry, C and
// O (README: across a change the bounds hold with those), and how many
// distinct configurations there were. The spacing and window bounds are
// judged with it.
func fastestLimit(li limitInfo, puts []limitPut) (limitInfo, int) {
	type key struct{ i, e, c, o int64 }
	seen := map[key]bool{{li.IntervalNanos, li.ExpiryNanos, li.BurstPermits, li.MaxOutstandingPermits}: true}
	out := li
	for _, p := range puts {
		if p.IntervalNanos > 0 {
			out.IntervalNanos = min(out.IntervalNanos, p.IntervalNanos)
		}
		if p.ExpiryNanos >= 0 {
			out.ExpiryNanos = max(out.ExpiryNanos, p.ExpiryNanos)
		}
		out.BurstPermits = max(out.BurstPermits, p.BurstPermits)
		out.MaxOutstandingPermits = max(out.MaxOutstandingPermits, p.MaxOutstanding)
		k := key{p.IntervalNanos, p.ExpiryNanos, p.BurstPermits, p.MaxOutstanding}
		if k.i == 0 {
			k.i = li.IntervalNanos
		}
		if k.e < 0 {
			k.e = li.ExpiryNanos
		}
		if k.c == 0 {
			k.c = li.BurstPermits
		}
		if k.o == 0 {
			k.o = li.MaxOutstandingPermits
		}
		seen[k] = true
	}
	return out, len(seen)
}
