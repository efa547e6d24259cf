package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/jepsen-lite/runner/process"
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
// and become ready (GET /readyz 200) within RestartReadyBound, which the
// restart-ready checker judges (a snapshot taken within a lease TTL of
// lowering a leased rate once could not be restored).
//
// What the checkers assume (README, "Leased limits", assumption 4, and
// "Algorithms"): across a change the bounds hold with the fastest
// configuration in effect, the smaller interval and the larger expiry, C
// and O. The slower configuration is never faster, so the bounds the run
// is judged by are the original configuration's (the runner's fastestLimit). The
// linearizability model assumes one I and M: it checks each configuration
// epoch on its own (checker.RegisterSpec.Changes, from the history's puts).

// RestartReadyBound is how long a node restarted by reconfig:
// snapshot-restart may take to answer GET /readyz with 200.
const RestartReadyBound = 20 * time.Second

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
	// RestartReadyBound); ReadyAfterNanos the difference.
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

// LimitSpec is the spec and history record of limit l at the given
// interval (l's other settings unchanged).
func LimitSpec(l Limit, interval time.Duration) (client.LimitSpec, map[string]any) {
	spec := client.LimitSpec{Algorithm: "strict", Rate: 1, Per: interval}
	if l.Strict {
		m, e := l.MaxReserved, time.Duration(l.ExpiryNanos)
		spec.MaxReserved, spec.Expiry = &m, &e
	}
	return spec, history.PutRequest(l.Name, spec).Config
}

// putInterval puts the run's limit with interval factor × its original
// one (factor 1: the original), recording each attempt as a put on process
// proc; it tries up to 5 times while ctx lasts.
func (nm *Nemesis) putInterval(ctx context.Context, proc int, factor int64) error {
	if nm.admin == nil {
		return fmt.Errorf("nemesis: no admin client for the limit %s", nm.limit.Name)
	}
	interval := time.Duration(nm.limit.IntervalNanos * factor)
	spec, rec := LimitSpec(nm.limit, interval)
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
			err = fmt.Errorf("nemesis: put %s with interval %v: the register compiled %v", nm.limit.Name, interval, time.Duration(l.IntervalNanos))
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
		if wait.Sleep(ctx, 300*time.Millisecond) != nil {
			break
		}
	}
	return fmt.Errorf("nemesis: put %s with interval %v: %w", nm.limit.Name, interval, lastErr)
}

// beginReconfig starts a reconfig fault: the slower put and, for
// snapshot-restart, the snapshot and restart, in the background (so that
// faults composed on it start on time). end stops it, then undo puts the
// original configuration back.
func (nm *Nemesis) beginReconfig(ctx context.Context, i int, ev Event, af *activeFault) {
	rec := af.rec
	factor := int64(max(ev.Factor, 2))
	rec.Notes = append(rec.Notes, fmt.Sprintf("%s interval %v → %v (×%d) until the window's end", nm.limit.Name,
		time.Duration(nm.limit.IntervalNanos), time.Duration(nm.limit.IntervalNanos*factor), factor))
	proc := nm.auxProcess(i)
	var target *cluster.Node
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
func (nm *Nemesis) restartTarget(ctx context.Context, ev Event, rec *Record) (*cluster.Node, bool) {
	leaderID, _ := cluster.LeaderOf(nm.ct.Statuses(ctx, nm.cl.Nodes, time.Second))
	if ev.Pick%3 == 0 && leaderID != "" {
		return nm.cl.Node(leaderID), true
	}
	var followers []*cluster.Node
	for _, n := range nm.cl.UpNodes() {
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
// and waits (up to RestartReadyBound, whatever ctx says) until it is ready.
func (nm *Nemesis) snapshotRestart(ctx context.Context, target *cluster.Node, wasLeader bool, rec *Record) {
	rr := RestartRecord{Node: target.ID, WasLeader: wasLeader, ReadyNanos: -1, ReadyAfterNanos: -1, BoundNanos: int64(RestartReadyBound)}
	defer func() {
		nm.mu.Lock()
		rec.Restarts = append(rec.Restarts, rr)
		nm.mu.Unlock()
	}()
	leaderID, _ := cluster.LeaderOf(nm.ct.Statuses(ctx, nm.cl.Nodes, time.Second))
	// The snapshot must cover the put: wait until the target applied the
	// leader's index as of now (the put has completed).
	want := uint64(0)
	if leaderID != "" {
		if st, err := nm.ct.Status(ctx, nm.cl.Node(leaderID), time.Second); err == nil {
			want = st.AppliedIndex
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, err := nm.ct.Status(ctx, target, time.Second)
		if err == nil && st.AppliedIndex >= want {
			break
		}
		if time.Now().After(deadline) || wait.Sleep(ctx, 50*time.Millisecond) != nil {
			nm.recordNote(rec, fmt.Sprintf("%s had not applied index %d within 3s; snapshotting anyway", target.ID, want))
			break
		}
	}
	var snapErr error
	for attempt := 0; attempt < 10; attempt++ {
		if rr.SnapshotIndex, snapErr = nm.ct.Snapshot(ctx, target); snapErr == nil || cluster.AnswerCode(snapErr) != 409 {
			break // 409: raft refused (nothing new since its last snapshot); anything else is final
		}
		if wait.Sleep(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	if snapErr != nil {
		rr.Error = "snapshot: " + snapErr.Error()
		nm.recordError(rec, rr.Error)
	}
	rr.KilledNanos = nm.now()
	if err := nm.cl.Kill(target); err != nil {
		rr.Error = err.Error()
		nm.recordError(rec, err.Error())
	}
	if err := nm.cl.Start(target); err != nil {
		rr.Error = err.Error()
		nm.recordError(rec, err.Error())
		return
	}
	nm.recordNote(rec, fmt.Sprintf("%s (leader: %v) snapshotted at applied index %d, killed -9 and restarted at %v", target.ID, rr.WasLeader, rr.SnapshotIndex, time.Duration(rr.KilledNanos)))
	nm.awaitReady(context.WithoutCancel(ctx), target, &rr)
	if rr.ReadyNanos >= 0 {
		nm.recordNote(rec, fmt.Sprintf("%s ready %v after its restart", target.ID, time.Duration(rr.ReadyAfterNanos).Round(time.Millisecond)))
	} else {
		nm.recordError(rec, fmt.Sprintf("%s not ready within %v of its restart (last answer: %s)", target.ID, RestartReadyBound, rr.LastAnswer))
	}
}

// awaitReady polls node's GET /readyz until it answers 200, its agent
// exits, or RestartReadyBound has passed since rr.KilledNanos.
func (nm *Nemesis) awaitReady(ctx context.Context, node *cluster.Node, rr *RestartRecord) {
	deadline := nm.start.Add(time.Duration(rr.KilledNanos) + RestartReadyBound)
	err := node.Proc.WaitReady(ctx, deadline, 100*time.Millisecond, func(ctx context.Context) error { return nm.ct.Ready(ctx, node) })
	if err == nil {
		rr.ReadyNanos = nm.now()
		rr.ReadyAfterNanos = rr.ReadyNanos - rr.KilledNanos
		rr.LastAnswer = ""
		return
	}
	var nr *process.NotReadyError
	if errors.As(err, &nr) {
		rr.LastAnswer = fmt.Sprint(nr.Last)
		if nr.Exited {
			rr.Exited = true
			rr.LastAnswer = "the agent exited (see its log); last answer: " + rr.LastAnswer
		}
		return
	}
	rr.LastAnswer = err.Error()
}
